"""Sweep specs: the schema, loading with line-accurate errors, profiles and cells.

A spec (``sweeps/specs/<name>.yaml``, format in sweeps/specs/README.md) names an experiment, the
config keys it fixes, the keys it sweeps and the profiles (``smoke``, ``cpu``, ``paper``) that
override them. Everything is checked before any work starts:

- :func:`load_spec` reads the YAML and checks its structure and every profile's merged
  shape (unknown keys, types, rates, empty lists, Optuna dimensions in a grid search,
  packs under an early-stopping scheduler);
- :func:`resolve` applies one profile, expands the grid into :class:`Cell`\\ s and builds the
  experiment's ``Config`` for every cell (Optuna dimensions at each end or choice), so that
  an unknown config key or a bad value is reported with its field and line;
- :func:`expand_resolved` expands a resolved spec's text (the artifact a sweep keeps) into
  the same cells by the same code, without building any ``Config``: what ``analysis``
  compares a sweep's runs against.

Errors are :class:`SpecError` (a ``ConfigError``: the CLI exits with status 2), e.g.
``synthetic-max-length.yaml:14: space.lr.log_range: expected two positive numbers low < high
(got [0.1, -1])``.

This module imports neither the trainers' code (until :func:`resolve`) nor Ray or MLflow, so
that ``analysis`` may read specs too.

    >>> spec = resolve(load_spec("synthetic-max-length"), "smoke")
    >>> len(spec.cells()), sorted({cell.params["variant"] for cell in spec.cells()})
    (8, ['oinit', 'open', 'plain'])
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import itertools
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
)

from ortho_core import experiments
from ortho_core.config import from_dict, to_dict
from ortho_core.errors import ConfigError
from sweeps.space import (
    TAGS,
    ChoiceDim,
    Dimension,
    FloatDim,
    SpaceEntry,
    StrictModel,
    grid_values,
)
from sweeps.spec_source import Location, SpecError, SpecSource, format_path, read_yaml

__all__ = [
    "PROFILES",
    "Cell",
    "ChoiceDim",
    "Dimension",
    "FloatDim",
    "OptunaSettings",
    "ResolvedSpec",
    "Spec",
    "SpecError",
    "available_specs",
    "expand_resolved",
    "load_spec",
    "resolve",
    "trial_key",
]

PROFILES = ("smoke", "cpu", "paper")
"""Profiles every spec defines (EXPERIMENTS.md, "Profiles")."""

SEED_KEY = "seed"
"""The config key a spec may not fix or sweep: it is the top-level ``seed`` + repeat index."""

KEY_EXCLUDED = ("device",)
"""Config keys left out of :func:`trial_key`: where a configuration runs does not change
what it computes (up to floating-point rounding), so moving a sweep from CPU to GPU resumes
rather than reruns it."""


def _check(ok: Any, expected: str) -> None:
    if not ok:
        raise ValueError(expected)


def _at_least(low: float, strict: bool, kind: str) -> AfterValidator:
    """A validator of values > ``low`` (``strict``) or >= ``low``; ``kind``: "an integer" or
    "a number", for the message."""

    def check(value: Any) -> Any:
        _check(value > low if strict else value >= low,
               f"{kind} {'>' if strict else '>='} {low:g}")
        return value

    return AfterValidator(check)


PositiveInt = Annotated[int, _at_least(0, True, "an integer")]
NonNegativeInt = Annotated[int, _at_least(0, False, "an integer")]
PositiveFloat = Annotated[float, _at_least(0, True, "a number")]
NonNegativeFloat = Annotated[float, _at_least(0, False, "a number")]


def _not_null(value: Any) -> Any:
    _check(value is not None, "a value (null is allowed only for scheduler and groups)")
    return value


class Metric(StrictModel):
    """The trial summary that ranks trials."""

    name: str = Field(min_length=1)
    """A key of the trainer's ``Result.summary`` (e.g. ``max_seq_len_solved``): what reports
    call "best" and what Optuna optimises."""
    mode: Literal["max", "min"]
    """Whether larger (max) or smaller (min) is better."""


class Search(StrictModel):
    """How the space is searched (sweeps/specs/README.md, "Grid × Optuna")."""

    kind: Literal["grid", "optuna"] = "grid"
    """``grid``: the cells only. ``optuna``: Optuna searches the Optuna dimensions within each
    cell (one study per cell)."""
    sampler: Literal["tpe", "random", "cmaes", "grid"] | None = None
    """Optuna sampler (optuna only; default tpe). ``grid`` needs ``choice`` dimensions only."""
    n_trials: PositiveInt | None = None
    """Optuna trials per cell (optuna only; required there)."""
    seed: int | None = None
    """Seed of the Optuna sampler (optuna only; default 0), so a sweep proposes the same points
    when rerun."""


class OptunaSettings(StrictModel):
    """The Optuna part of a resolved spec (``search.kind: optuna``)."""

    sampler: Literal["tpe", "random", "cmaes", "grid"]
    """Optuna sampler."""
    n_trials: int
    """Trials per cell."""
    seed: int
    """Sampler seed."""


class Resources(StrictModel):
    """What one trial (one pack) reserves from Ray."""

    cpu: PositiveFloat = 1.0
    """CPU cores per trial (fractional allowed: 0.5 runs two trials per core)."""
    gpu: NonNegativeFloat = 0.0
    """GPUs per trial (fractional allowed: many small packs share one GPU)."""


class Scheduler(StrictModel):
    """An early-stopping scheduler over the trials' intermediate reports."""

    kind: Literal["asha"]
    """Only ASHA (asynchronous successive halving) is supported."""
    metric_step: str = Field(min_length=1)
    """The per-evaluation metric ASHA compares at each rung (a ``Report.metrics`` key such as
    ``val_error``): the spec's ``metric`` is a final summary, unknown until a trial ends."""
    mode: Literal["max", "min"]
    """Whether larger or smaller ``metric_step`` is better."""
    grace_period: PositiveInt = 1
    """Training steps a trial runs before it can be stopped."""
    reduction_factor: float = 4.0
    """Fraction 1/reduction_factor of trials continues past each rung (> 1)."""
    max_t: PositiveInt | None = None
    """Training steps after which every trial stops (default: the trainer's own budget)."""

    @field_validator("reduction_factor")
    @classmethod
    def _above_one(cls, value: float) -> float:
        _check(value > 1, "a number > 1")
        return value


def _non_empty_groups(value: list[Any] | None) -> list[Any] | None:
    _check(value is None or value, "at least one group (leave the key out for none)")
    return value


class Group(StrictModel):
    """A conditional group: its own fixed keys and swept keys, added to the top level's.

    The sweep is the union over groups; a key a group sets replaces the top level's (so
    ``penalty`` can be swept in the ``open`` group only)."""

    fixed: dict[str, Any] = Field(default_factory=dict)
    """Config keys fixed for this group's cells."""
    space: dict[str, SpaceEntry] = Field(default_factory=dict)
    """Config keys swept in this group's cells."""


class Profile(StrictModel):
    """Overrides of one profile. A key present here replaces the spec's value, except
    ``fixed`` and ``space``, which replace key by key (a key fixed here is no longer swept,
    and the other way round) at every level: in the spec's groups too, so a profile that
    needs a key per group replaces ``groups``."""

    fixed: dict[str, Any] | None = None
    """Config keys to fix (added to or replacing the spec's)."""
    space: dict[str, SpaceEntry] | None = None
    """Config keys to sweep (added to or replacing the spec's)."""
    groups: Annotated[list[Group] | None, AfterValidator(_non_empty_groups)] = None
    """Replaces the spec's groups whole (null: no groups)."""
    repeats: PositiveInt | None = None
    """Replaces ``repeats``."""
    seed: NonNegativeInt | None = None
    """Replaces ``seed``."""
    resources: Resources | None = None
    """Replaces ``resources`` whole."""
    pack_size: PositiveInt | None = None
    """Replaces ``pack_size``."""
    max_failures: NonNegativeInt | None = None
    """Replaces ``max_failures``."""
    search: Search | None = None
    """Replaces ``search`` whole."""
    scheduler: Scheduler | None = None
    """Replaces ``scheduler`` (null: none)."""

    @field_validator("fixed", "space", "repeats", "seed", "resources", "pack_size",
                     "max_failures", "search")
    @classmethod
    def _present(cls, value: Any) -> Any:
        return _not_null(value)


class Spec(StrictModel):
    """A sweep spec as written (before a profile is applied)."""

    name: str = Field(min_length=1)
    """The spec's name: the MLflow experiment name; equal to the file's stem."""
    experiment: str
    """The trainer: a name in ``ortho_core.experiments.EXPERIMENTS``."""
    description: str = ""
    """What the spec reproduces (one line; shown in MLflow and reports)."""
    metric: Metric
    """The trial summary that ranks trials."""
    search: Search = Field(default_factory=Search)
    """Grid only, or Optuna within each grid cell."""
    fixed: dict[str, Any] = Field(default_factory=dict)
    """Config keys fixed for every trial (values as the experiment's ``Config`` reads them)."""
    space: dict[str, SpaceEntry] = Field(default_factory=dict)
    """Config keys swept for every group: grid or Optuna dimensions (``sweeps.space``)."""
    groups: Annotated[list[Group], AfterValidator(_non_empty_groups)] = Field(
        default_factory=list)
    """Conditional groups; the sweep is the union over them (none: one implicit group)."""
    repeats: PositiveInt = 1
    """Each configuration runs with ``seed = seed + r`` for r < repeats (initial weights
    differ; the data stream, ``data_seed``, does not)."""
    seed: NonNegativeInt = 0
    """Base of the config key ``seed``; also ``data_seed`` unless fixed or swept."""
    resources: Resources = Field(default_factory=Resources)
    """Per trial (a trial trains one pack)."""
    pack_size: PositiveInt = 1
    """Most configurations trained together in one trial (DESIGN.md "Packs"; 1 = off). The
    runner packs only configurations that agree on the trainer's ``PACK_FIELDS``."""
    max_failures: NonNegativeInt = 0
    """Retries of a trial whose trainer raised (a lost node, an out-of-memory)."""
    scheduler: Scheduler | None = None
    """Early stopping of unpromising trials (none: every trial runs its budget)."""
    profiles: dict[str, Profile]
    """Overrides per profile; ``smoke``, ``cpu`` and ``paper`` are required."""

    _source: SpecSource = PrivateAttr(
        default_factory=lambda: SpecSource(file="<spec>", path=Path("<spec>")))

    @field_validator("experiment")
    @classmethod
    def _known_experiment(cls, value: str) -> str:
        _check(value in experiments.EXPERIMENTS,
               "one of " + ", ".join(experiments.EXPERIMENTS))
        return value

    @property
    def source(self) -> SpecSource:
        """The file the spec was read from, with the line of each key."""
        return self._source


@dataclass(frozen=True)
class Cell:
    """One grid point (with one repeat's seed) and the Optuna dimensions searched in it."""

    params: dict[str, Any]
    """Config keys: fixed, group and grid values, ``seed`` and ``data_seed``."""
    optuna_space: dict[str, Dimension]
    """Config keys Optuna chooses within this cell (empty for a grid search)."""


@dataclass(frozen=True)
class ResolvedSpec:
    """A spec with one profile applied and every cell validated: what the runner runs."""

    name: str
    """MLflow experiment name."""
    experiment: str
    """Trainer name (``ortho_core.experiments``)."""
    profile: str
    """The profile applied."""
    description: str
    """What the spec reproduces."""
    metric: str
    """Trial summary that ranks trials."""
    mode: Literal["max", "min"]
    """Whether a larger or smaller ``metric`` is better."""
    search_kind: Literal["grid", "optuna"]
    """Grid only, or Optuna within each cell."""
    optuna: OptunaSettings | None
    """Sampler, trials per cell and seed (optuna searches only)."""
    resources: Resources
    """Per trial."""
    pack_size: int
    """Most configurations per trial."""
    max_failures: int
    """Retries of a raising trial."""
    repeats: int
    """Seeds per configuration (already expanded into the cells)."""
    scheduler: Scheduler | None
    """Early stopping, if any."""
    text: str
    """The resolved spec as YAML (profile applied, profiles dropped, every group written with
    all the keys in force in it): the MLflow artifact."""
    sha256: str
    """SHA-256 of ``text`` (MLflow tag ``ortho.spec_sha256``)."""
    source: str
    """The YAML file the spec was read from."""
    all_cells: tuple[Cell, ...] = field(repr=False)
    """Every cell, in order: group, then grid dimensions (first written varies slowest),
    then repeat."""

    def cells(self) -> list[Cell]:
        """Every cell (see ``all_cells``)."""
        return list(self.all_cells)


SPEC_DIR = resources.files("sweeps") / "specs"
"""The shipped specs (package data)."""


def available_specs() -> list[str]:
    """Names of the shipped specs, sorted."""
    return sorted(p.name.removesuffix(".yaml") for p in SPEC_DIR.iterdir()
                  if p.name.endswith(".yaml"))


def _locate(name_or_path: str) -> tuple[Path, str]:
    """The file of a spec name or path, and the name messages show."""
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        path = Path(name_or_path)
        if not path.is_file():
            raise ConfigError("spec", "an existing YAML file", name_or_path)
        return path, name_or_path
    shipped = SPEC_DIR / f"{name_or_path}.yaml"
    if not shipped.is_file():
        raise ConfigError("spec", "the name of a shipped spec (" + ", ".join(available_specs())
                          + ") or a path to a YAML file", name_or_path)
    return Path(str(shipped)), shipped.name


def _pydantic_error(err: ValidationError, source: SpecSource) -> SpecError:
    """The first of pydantic's errors as a :class:`SpecError` at its field and line."""
    first = err.errors()[0]
    loc = tuple(p for p in first["loc"] if p not in TAGS and p != "[key]")
    if first["type"] == "unknown_key":
        return source.error((*loc, first["ctx"]["key"]), first["msg"])
    if first["type"] == "missing":
        return source.error(loc, "a value (the key is required)")
    expected = first["msg"].removeprefix("Value error, ").removeprefix("Input should be ")
    return source.error(loc, expected, first["input"])


def load_spec(name_or_path: str) -> Spec:
    """Read and check a spec: a shipped spec's name or a path to a YAML file.

    Checks everything that does not need the trainer: the schema, the name against the file,
    the three profiles, and for every profile the merged fixed and swept keys. Raises
    :class:`SpecError` (file, line, field) or ``ConfigError`` (field ``spec``) for an unknown
    name.
    """
    path, file = _locate(name_or_path)
    data, source = read_yaml(path, file)
    try:
        spec = Spec.model_validate(data)
    except ValidationError as err:
        raise _pydantic_error(err, source) from None
    spec._source = source
    if spec.name != path.stem:
        raise source.error(("name",), f"the file's stem {path.stem!r}", spec.name)
    for profile in PROFILES:
        if profile not in spec.profiles:
            raise source.error(("profiles", profile),
                               "a profile (every spec defines " + ", ".join(PROFILES) + ")")
    _check_levels(spec)
    for profile in spec.profiles:
        eff = _Effective.of(spec, profile)
        _check_search(eff, source)
        _check_scheduler(eff, source)
    return spec


def _levels(spec: Spec) -> list[tuple[Location, Mapping[str, Any], Mapping[str, Any]]]:
    """Every (path, fixed, space) pair written in the spec, profiles included."""
    out: list[tuple[Location, Mapping[str, Any], Mapping[str, Any]]] = [
        ((), spec.fixed, spec.space)]
    out += [(("groups", i), g.fixed, g.space) for i, g in enumerate(spec.groups)]
    for name, prof in spec.profiles.items():
        out.append((("profiles", name), prof.fixed or {}, prof.space or {}))
        out += [(("profiles", name, "groups", i), g.fixed, g.space)
                for i, g in enumerate(prof.groups or [])]
    return out


def _check_levels(spec: Spec) -> None:
    """No level fixes or sweeps ``seed``, nor both fixes and sweeps one key."""
    for path, fixed, space in _levels(spec):
        for part, keys in (("fixed", fixed), ("space", space)):
            for key in keys:
                if key == SEED_KEY:
                    raise spec.source.error((*path, part, key),
                                            "no seed here: set the top-level seed and repeats")
        for key in space:
            if key in fixed:
                raise spec.source.error((*path, "space", key),
                                        "a key either fixed or swept at one level, not both")


Keys = dict[str, tuple[Any, Location]]
"""Config key -> (value or space entry, the path it was written at)."""

Level = tuple[Mapping[str, Any], Mapping[str, Any], Location]
"""The fixed keys, the swept keys and the path of one level of a spec."""


@dataclass
class _Effective:
    """A spec with one profile applied; every value keeps the path it was written at.

    Fixed and swept keys come from levels applied in order, later ones replacing earlier
    ones: the spec's top level, the spec's group, the profile's top level; or, when the
    profile has groups of its own, the spec's top level, the profile's top level, the
    profile's group. So a key a profile sets holds in every group of the spec (``penalty:
    1`` fixes λ even where a group sweeps it); a profile that needs a key per group replaces
    the groups.
    """

    profile: str
    settings: dict[str, tuple[Any, Location]]
    """Every other setting (``search``, ``repeats``, ...), from the profile if it sets it."""
    top: tuple[Level, Level]
    """The spec's top level and the profile's."""
    groups: list[tuple[Group, Location]]
    """The groups in force with their paths; one empty group at path () if there are none."""
    own_groups: bool
    """Whether the groups are the profile's."""

    @classmethod
    def of(cls, spec: Spec, profile: str) -> _Effective:
        prof = spec.profiles[profile]
        here: Location = ("profiles", profile)
        settings = {}
        for name in ("search", "repeats", "seed", "resources", "pack_size", "max_failures",
                     "scheduler", "groups"):
            if name in prof.model_fields_set:
                settings[name] = (getattr(prof, name), (*here, name))
            else:
                settings[name] = (getattr(spec, name), (name,))
        groups_value, groups_path = settings.pop("groups")
        groups = [(g, (*groups_path, i)) for i, g in enumerate(groups_value or [])]
        top = ((spec.fixed, spec.space, ()), (prof.fixed or {}, prof.space or {}, here))
        return cls(profile, settings, top, groups or [(Group(), ())],
                   "groups" in prof.model_fields_set)

    def group(self, index: int) -> tuple[Keys, Keys]:
        """The fixed and swept keys in force in group ``index``."""
        group, path = self.groups[index]
        level = (group.fixed, group.space, path)
        spec_top, profile_top = self.top
        if self.own_groups:
            return _apply((spec_top, profile_top, level))
        return _apply((spec_top, level, profile_top))

    def value(self, name: str) -> Any:
        """The effective value of setting ``name`` (``repeats``, ``search``, ...)."""
        return self.settings[name][0]


def _apply(levels: tuple[Level, ...]) -> tuple[Keys, Keys]:
    """Fixed and swept keys after ``levels``, each replacing the keys the earlier ones set."""
    fixed: Keys = {}
    space: Keys = {}
    for level in levels:
        _override(fixed, space, *level)
    return fixed, space


def _override(fixed: dict[str, tuple[Any, Location]], space: dict[str, tuple[Any, Location]],
              new_fixed: Mapping[str, Any], new_space: Mapping[str, Any], path: Location) -> None:
    """Apply a more specific level's keys in place: a key fixed there is no longer swept."""
    for key, value in new_fixed.items():
        fixed[key] = (value, (*path, "fixed", key))
        space.pop(key, None)
    for key, entry in new_space.items():
        space[key] = (entry, (*path, "space", key))
        fixed.pop(key, None)


def _check_search(eff: _Effective, source: SpecSource) -> None:
    """Optuna dimensions only in an Optuna search, and an Optuna search has some."""
    search, search_path = eff.settings["search"]
    dims = [(key, entry, path) for i in range(len(eff.groups))
            for key, (entry, path) in eff.group(i)[1].items()
            if isinstance(entry, (FloatDim, ChoiceDim))]
    if search.kind == "grid":
        for key, _, path in dims:
            raise source.error(path, f"a grid dimension for {key} (a list, {{range: ..}} or "
                               "{log_range: ..}): Optuna dimensions need search.kind: optuna")
        for name in ("sampler", "n_trials", "seed"):
            if getattr(search, name) is not None:
                raise source.error((*search_path, name), "no Optuna setting in a grid search",
                                   getattr(search, name))
        return
    if not dims:
        raise source.error((*search_path, "kind"),
                           "grid when the space has no Optuna dimension", search.kind)
    if search.n_trials is None:
        raise source.error((*search_path, "n_trials"), "the number of Optuna trials per cell")
    if search.sampler == "grid":
        for key, entry, path in dims:
            if not isinstance(entry, ChoiceDim):
                raise source.error(path, f"a {{choice: [..]}} dimension for {key}: "
                                   "the grid sampler enumerates choices only")


def _check_scheduler(eff: _Effective, source: SpecSource) -> None:
    """Packs of one under an early-stopping scheduler: it stops a trial on one
    configuration's reports, and a trial trains a whole pack."""
    scheduler, scheduler_path = eff.settings["scheduler"]
    pack_size, pack_path = eff.settings["pack_size"]
    if scheduler is not None and pack_size > 1:
        raise source.error(pack_path, f"1 when a scheduler is set (line "
                           f"{source.line(scheduler_path)}: early stopping judges one "
                           "configuration per trial)", pack_size)


def resolve(spec: Spec, profile: str) -> ResolvedSpec:
    """Apply ``profile``, expand the cells and validate each against the trainer's Config.

    Optuna dimensions are validated at each end (or each choice) with the other dimensions
    at their low end (first choice). Raises :class:`SpecError` naming the field and line.
    """
    source = spec.source
    if profile not in spec.profiles:
        raise source.error(("profiles",), "one of the profiles " + ", ".join(spec.profiles),
                           profile)
    eff = _Effective.of(spec, profile)
    _check_search(eff, source)
    _check_scheduler(eff, source)
    search: Search = eff.value("search")
    if search.sampler == "cmaes" and importlib.util.find_spec("cmaes") is None:
        raise source.error((*eff.settings["search"][1], "sampler"),
                           "tpe, random or grid (cmaes needs the cmaes package, which is not "
                           "installed here)", search.sampler)
    try:
        config_cls = experiments.get(spec.experiment).Config
    except ImportError as err:
        raise source.error(("experiment",), f"a trainer that imports ({err})",
                           spec.experiment) from err
    known = sorted(f.name for f in dataclasses.fields(config_cls) if f.init)
    for index in range(len(eff.groups)):
        fixed, space = eff.group(index)
        for key, (_, path) in (fixed | space).items():
            if key not in known:
                raise source.error(path, f"a config key of {spec.experiment}: "
                                   + ", ".join(known), key)
    cells = _expand(eff, source, functools.partial(_validate, config_cls, source))
    text = yaml.dump(_resolved_document(spec, eff), Dumper=_PlainDumper, sort_keys=False,
                     allow_unicode=True)
    optuna = None
    if search.kind == "optuna":
        optuna = OptunaSettings(sampler=search.sampler or "tpe", n_trials=search.n_trials,
                                seed=search.seed or 0)
    return ResolvedSpec(
        name=spec.name, experiment=spec.experiment, profile=profile,
        description=spec.description, metric=spec.metric.name, mode=spec.metric.mode,
        search_kind=search.kind, optuna=optuna, resources=eff.value("resources"),
        pack_size=eff.value("pack_size"), max_failures=eff.value("max_failures"),
        repeats=eff.value("repeats"), scheduler=eff.value("scheduler"), text=text,
        sha256=hashlib.sha256(text.encode()).hexdigest(), source=str(source.path),
        all_cells=tuple(cells))


PointCheck = Callable[[dict[str, Any], Mapping[str, Dimension], Mapping[str, Location],
                      Location], None]
"""Called on each grid point before its repeats become cells: its params (without ``seed``),
its Optuna dimensions, the path each param was written at, and its group's path."""


def _expand(eff: _Effective, source: SpecSource, check: PointCheck | None = None) -> list[Cell]:
    """Every cell of every group, in order (group, grid point, repeat); ``check`` sees every
    grid point first. Raises :class:`SpecError` where two groups give one configuration."""
    repeats: int = eff.value("repeats")
    seed, seed_path = eff.settings["seed"]
    cells: list[Cell] = []
    seen: dict[str, Location] = {}
    for index, (_, group_path) in enumerate(eff.groups):
        fixed, space = eff.group(index)
        for point, where, optuna in _points(fixed, space, seed, seed_path):
            if check is not None:
                check(point, optuna, where, group_path)
            for r in range(repeats):
                params = {**point, "seed": seed + r}
                identity = json.dumps([params, sorted(optuna)], sort_keys=True, default=str)
                if identity in seen:
                    raise source.error(group_path or ("space",), "distinct configurations "
                                       "(this group repeats a configuration of "
                                       f"{format_path(seen[identity])})")
                seen[identity] = group_path
                cells.append(Cell(params=params, optuna_space=dict(optuna)))
    return cells


class _ResolvedLevels(BaseModel):
    """The keys of a resolved spec's text that decide its cells; the others are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    fixed: dict[str, Any] = Field(default_factory=dict)
    """Config keys fixed in every group (a resolved spec writes them in its groups)."""
    space: dict[str, SpaceEntry] = Field(default_factory=dict)
    """Config keys swept in every group (likewise)."""
    groups: list[Group] = Field(default_factory=list)
    """The groups, each with the keys in force in it (none: one implicit group)."""
    repeats: PositiveInt = 1
    """Seeds per configuration."""
    seed: NonNegativeInt = 0
    """Base of ``seed``; also ``data_seed`` unless fixed or swept."""


RESOLVED_FILE = "<resolved spec>"
"""How messages name a resolved spec's text (it has no file of its own)."""


def expand_resolved(text: str) -> list[Cell]:
    """The cells of a resolved spec's ``text`` (:attr:`ResolvedSpec.text`, the artifact a
    sweep's parent run keeps), by :func:`resolve`'s rules and in its order, without building
    any ``Config`` (no trainer is imported): values are as the text writes them.

    The text's own top-level ``fixed`` and ``space``, if any, hold in each of its ``groups``
    with the group's keys replacing them; ``repeats`` and ``seed`` default to 1 and 0; other
    keys are not read. Raises :class:`SpecError` for a text that is not such a spec.
    """
    source = SpecSource(file=RESOLVED_FILE, path=Path(RESOLVED_FILE))
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise SpecError(RESOLVED_FILE, None, "yaml", f"well-formed YAML ({err})") from err
    if not isinstance(doc, dict):
        raise source.error((), "a mapping of spec keys", doc)
    try:
        levels = _ResolvedLevels.model_validate(
            {key: value for key, value in doc.items() if value is not None})
    except ValidationError as err:
        raise _pydantic_error(err, source) from None
    eff = _Effective(
        profile=str(doc.get("profile", "")),
        settings={"repeats": (levels.repeats, ("repeats",)), "seed": (levels.seed, ("seed",))},
        top=((levels.fixed, levels.space, ()), ({}, {}, ())),
        groups=[(g, ("groups", i)) for i, g in enumerate(levels.groups)] or [(Group(), ())],
        own_groups=False)
    return _expand(eff, source)


def _points(fixed: dict[str, tuple[Any, Location]], space: dict[str, tuple[Any, Location]],
            seed: int, seed_path: Location,
            ) -> Iterator[tuple[dict[str, Any], dict[str, Location], dict[str, Dimension]]]:
    """Every grid point of one group (first dimension slowest): its params without ``seed``,
    the path each param was written at (a grid list's item for list values), and the Optuna
    dimensions searched there."""
    grid = {key: (values, path) for key, (entry, path) in space.items()
            if (values := grid_values(entry)) is not None}
    optuna = {key: entry for key, (entry, _) in space.items() if key not in grid}
    base = {key: value for key, (value, _) in fixed.items()}
    base.setdefault("data_seed", seed)
    origin = {key: path for key, (_, path) in (fixed | space).items()}
    origin.setdefault("data_seed", seed_path)
    origin["seed"] = seed_path
    for combo in itertools.product(*(range(len(values)) for values, _ in grid.values())):
        point, where = dict(base), dict(origin)
        for (key, (values, path)), j in zip(grid.items(), combo, strict=True):
            point[key] = values[j]
            if isinstance(space[key][0], list):
                where[key] = (*path, j)
        yield point, where, optuna


def _validate(config_cls: type, source: SpecSource, point: dict[str, Any],
              optuna: Mapping[str, Dimension], where: Mapping[str, Location],
              group_path: Location) -> None:
    """Build the Config of ``point`` with the Optuna dimensions at each end or choice."""
    low = {key: dim.edges()[0] for key, dim in optuna.items()}
    variants = [low] + [{**low, key: edge} for key, dim in optuna.items()
                        for edge in dim.edges()[1:]]
    for extra in variants:
        try:
            from_dict(config_cls, {**point, **extra})
        except ConfigError as err:
            path = where.get(err.field, (*group_path, "fixed", err.field))
            raise source.error(path, err.expected, err.value) from err


class _PlainDumper(yaml.SafeDumper):
    """Writes a value shared by several groups out in full each time, not as a YAML alias."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _resolved_document(spec: Spec, eff: _Effective) -> dict[str, Any]:
    """The resolved spec as plain data (the ``text`` of :class:`ResolvedSpec`).

    Each group is written with every key in force in it, so the cells are read off
    directly: per group, the product of its ``space`` with its ``fixed``.
    """

    def dump(value: Any) -> Any:
        if isinstance(value, StrictModel):
            return value.model_dump(mode="json", by_alias=True, exclude_none=True)
        return value

    groups = []
    for index in range(len(eff.groups)):
        fixed, space = eff.group(index)
        groups.append({"fixed": {k: v for k, (v, _) in fixed.items()},
                       "space": {k: dump(v) for k, (v, _) in space.items()}})
    return {
        "name": spec.name, "experiment": spec.experiment, "profile": eff.profile,
        "description": spec.description, "metric": dump(spec.metric),
        "search": dump(eff.value("search")), "groups": groups,
        "repeats": eff.value("repeats"), "seed": eff.value("seed"),
        "resources": dump(eff.value("resources")), "pack_size": eff.value("pack_size"),
        "max_failures": eff.value("max_failures"), "scheduler": dump(eff.value("scheduler")),
    }


def trial_key(experiment: str, params: Mapping[str, Any]) -> str:
    """A stable key of one configuration: the first 16 hex digits of a SHA-256.

    Hashes the experiment's name and its full ``Config`` (``params`` converted and completed
    with defaults, as sorted JSON), so ``lr: 1`` and ``lr: 1.0``, or a default written out,
    give the same key, while any changed value gives another. ``device`` is left out
    (:data:`KEY_EXCLUDED`). MLflow tags each child run with it (``ortho.trial_key``) so that
    a resumed or retried configuration reuses its run.
    """
    config = from_dict(experiments.get(experiment).Config, params)
    values = {k: v for k, v in to_dict(config).items() if k not in KEY_EXCLUDED}
    blob = json.dumps({"experiment": experiment, "config": values}, sort_keys=True,
                      separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
