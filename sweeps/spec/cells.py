"""A spec's cells, and the key that identifies a cell's configuration across sweeps.

A cell is one grid point of one group with one repeat's seed, and the Optuna dimensions
searched in it. :func:`expand` lists the cells of a spec with a profile applied, in the order
the runner runs them; :func:`expand_resolved` lists the same cells from a resolved spec's text
(the artifact a sweep keeps) by the same code, building no ``Config``, which is what
``analysis`` compares a sweep's runs against. :func:`resolved_params` completes each cell
with the values the trainer gives the keys other cells set and it leaves unset, so that
cells are compared by value (a key one group fixes and another leaves at its default).
:func:`trial_key` names a configuration in MLflow, so that a resumed sweep finds the runs it
already has.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ortho_core import experiments
from ortho_core.config import from_dict, to_dict
from sweeps.spec.profiles import Effective
from sweeps.spec.schema import Group, NonNegativeInt, PositiveInt
from sweeps.spec.source import Location, SpecError, SpecSource, format_path, validation_error
from sweeps.spec.space import Dimension, SpaceEntry, grid_values

KEY_EXCLUDED = ("device", "subnormals")
"""Config keys left out of :func:`trial_key`: where a configuration runs, and whether the CPU
flushes subnormal numbers, do not change what it computes (up to floating-point rounding and
values below the smallest normal number), so moving a sweep from CPU to GPU, or changing its
``subnormals``, resumes rather than reruns it."""


@dataclass(frozen=True)
class Cell:
    """One grid point (with one repeat's seed) and the Optuna dimensions searched in it."""

    params: dict[str, Any]
    """Config keys: fixed, group and grid values, ``seed`` and ``data_seed``."""
    optuna_space: dict[str, Dimension]
    """Config keys Optuna chooses within this cell (empty for a grid search)."""


PointCheck = Callable[[dict[str, Any], Mapping[str, Dimension], Mapping[str, Location],
                      Location], None]
"""Called on each grid point before its repeats become cells: its params (without ``seed``),
its Optuna dimensions, the path each param was written at, and its group's path."""


def expand(eff: Effective, source: SpecSource, check: PointCheck | None = None,
           identity: Callable[[dict[str, Any]], str] | None = None) -> list[Cell]:
    """Every cell of every group, in order (group, grid point, repeat); ``check`` sees every
    grid point first. Raises :class:`SpecError` where two groups give one configuration:
    the same params and the same Optuna dimensions (names and ranges), a grid cell's params
    compared by ``identity`` (its trial key, where the trainer is at hand, so that ``lr: 1``
    and ``lr: 1.0``, or a default written out, are one configuration, as in the store), the
    others as written."""
    repeats: int = eff.value("repeats")
    seed, seed_path = eff.settings["seed"]
    cells: list[Cell] = []
    seen: dict[str, tuple[Location, str]] = {}
    for index, (_, group_path) in enumerate(eff.groups):
        fixed, space = eff.group(index)
        for point, where, optuna in _points(fixed, space, seed, seed_path):
            if check is not None:
                check(point, optuna, where, group_path)
            for r in range(repeats):
                params = {**point, "seed": seed + r}
                dims = {k: d.model_dump(mode="json") for k, d in optuna.items()}
                written = json.dumps([params, dims], sort_keys=True, default=str)
                same = written if identity is None or optuna else identity(params)
                if same in seen:
                    earlier, first = seen[same]
                    alike = "" if first == written else (
                        " written differently, which the trainer reads alike: one number as "
                        "an integer and as a float, a default written out, or another "
                        f"{' or '.join(KEY_EXCLUDED)}, which the trial key leaves out")
                    raise source.error(group_path or ("space",), "distinct configurations "
                                       "(this group repeats a configuration of "
                                       f"{format_path(earlier)}{alike})")
                seen[same] = (group_path, written)
                cells.append(Cell(params=params, optuna_space=dict(optuna)))
    return cells


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
        raise validation_error(err, source) from None
    eff = Effective(
        profile=str(doc.get("profile", "")),
        settings={"repeats": (levels.repeats, ("repeats",)), "seed": (levels.seed, ("seed",))},
        top=((levels.fixed, levels.space, ()), ({}, {}, ())),
        groups=[(g, ("groups", i)) for i, g in enumerate(levels.groups)] or [(Group(), ())],
        own_groups=False)
    return expand(eff, source)


def resolved_params(experiment: str, cells: Sequence[Cell]) -> list[dict[str, Any]]:
    """Each cell's configuration as the trainer resolves it, on the config keys any of
    ``cells`` sets: its params as the trainer's ``Config`` converts them (``lr: 1`` is
    ``1.0``), and each key that another cell sets and it leaves unset at the value ``Config``
    gives it (its default), which is what its runs log (a run logs its whole ``Config``). The
    keys its Optuna search chooses are left out. Keys are in the order they first appear in
    ``cells``.

    ``{task: adding}`` in one group and nothing in another: the other group's cells resolve
    to ``task: temporal_order`` (``synthetic``'s default), so that ``task`` varies across the
    sweep by value, as its runs show it.
    """
    keys = dict.fromkeys(k for cell in cells for k in cell.params)
    config_cls = experiments.get(experiment).Config if cells else None
    resolved = []
    for cell in cells:
        low = {k: dim.edges()[0] for k, dim in cell.optuna_space.items()}
        values = to_dict(from_dict(config_cls, {**cell.params, **low}))
        resolved.append({k: values[k] for k in keys if k not in cell.optuna_space})
    return resolved


def trial_key(experiment: str, params: Mapping[str, Any]) -> str:
    """A stable key of one configuration: the first 16 hex digits of a SHA-256.

    Hashes the experiment's name and its full ``Config`` (``params`` converted and completed
    with defaults, as sorted JSON), so ``lr: 1`` and ``lr: 1.0``, or a default written out,
    give the same key, while any changed value gives another. ``device`` and ``subnormals``
    are left out (:data:`KEY_EXCLUDED`), and so is a field of the experiment's
    ``ADDED_FIELDS`` that holds its default, so that keys stored before the field existed stay
    valid; a field of its ``FORMER_DEFAULTS`` that holds its default is hashed at its former
    one, so that keys stored before the default changed stay valid. MLflow tags each child
    run with it (``ortho.trial_key``), so that a resumed or retried configuration is found:
    a finished one is kept, one that did not finish is replaced by a new run
    (:mod:`sweeps.tracking.layout`).
    """
    module = experiments.get(experiment)
    config = from_dict(module.Config, params)
    values = {k: v for k, v in to_dict(config).items() if k not in KEY_EXCLUDED}
    defaults = {f.name: f.default for f in dataclasses.fields(module.Config)}
    for name in getattr(module, "ADDED_FIELDS", ()):
        if values.get(name) == defaults[name]:
            del values[name]
    for name, former in getattr(module, "FORMER_DEFAULTS", {}).items():
        if values.get(name) == defaults[name]:
            values[name] = former
    blob = json.dumps({"experiment": experiment, "config": values}, sort_keys=True,
                      separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
