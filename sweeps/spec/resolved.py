"""Resolving a spec: one profile applied, every cell checked against the trainer's ``Config``.

:func:`resolve` is the last check before any work starts: it imports the trainer named by the
spec, checks every config key and builds the ``Config`` of every cell (Optuna dimensions at
each end or choice), so that a bad value is reported at the line that wrote it. The
:class:`ResolvedSpec` it returns is what the runner runs, and its ``text`` what a sweep keeps
in MLflow.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import importlib.util
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal

import yaml

from ortho_core import experiments
from ortho_core.config import from_dict
from ortho_core.errors import ConfigError
from sweeps.spec.cells import Cell, expand, trial_key
from sweeps.spec.profiles import Effective, check_scheduler, check_search, check_size
from sweeps.spec.schema import OptunaSettings, Resources, Scheduler, Search, Spec
from sweeps.spec.source import Location, SpecError, SpecSource
from sweeps.spec.space import Dimension, StrictModel


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
    optuna: OptunaSettings | None
    """Sampler, trials per cell and seed of an Optuna search within each cell; None for a
    grid only."""
    resources: Resources
    """Per trial."""
    pack_size: int | Literal["auto"]
    """Most configurations per trial; ``auto`` until :func:`sweeps.pack_size.settle`
    measures it."""
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


def resolve(spec: Spec, profile: str) -> ResolvedSpec:
    """Apply ``profile``, expand the cells and validate each against the trainer's Config,
    and the metric against the keys of the trainer's summary (its ``SUMMARY``).

    Optuna dimensions are validated at each end (or each choice) with the other dimensions
    at their low end (first choice). The spec is validated whole: every other profile's
    resolved form is checked the same way, so that a bad value a profile happens to override
    is still found; such an error names its profile. Raises :class:`SpecError` naming the
    field and line (a profile the file writes and the one asked for lacks, whose name is
    close to it: ``smok`` for ``smoke``, at its line), or ``ConfigError`` naming ``profile``
    for a profile the spec lacks.
    """
    source = spec.source
    if profile not in spec.profiles:  # the command line's fault, not the file's
        raise ConfigError("profile", f"one of the profiles of {source.file}: "
                          + ", ".join(spec.profiles), profile)
    if profile not in spec.profiles_written:
        near = difflib.get_close_matches(profile, spec.profiles_written, n=1, cutoff=0.75)
        if near:  # the file's fault: a misspelt profile, which would leave this one bare
            raise source.error(("profiles", near[0]), f"a profile named {profile} (the file "
                               f"writes none, so --profile {profile} would run the spec with "
                               f"no override; `{profile}: {{}}` says that is meant)", near[0])
    try:
        trainer = experiments.get(spec.experiment)
    except ImportError as err:
        raise source.error(("experiment",), f"a trainer that imports ({err})",
                           spec.experiment) from err
    if spec.metric.name not in trainer.SUMMARY:
        raise source.error(("metric", "name"), f"a summary key of {spec.experiment}: "
                           + ", ".join(trainer.SUMMARY), spec.metric.name)
    eff, cells = _checked(spec, profile, trainer)
    for other in spec.profiles:
        if other != profile:
            try:
                _checked(spec, other, trainer)
            except SpecError as err:  # under a profile the file does not write: its own
                raise (err.in_profile(other) if other in spec.profiles_written
                       else err) from None
    search: Search = eff.value("search")
    text = yaml.dump(_resolved_document(spec, eff), Dumper=_PlainDumper, sort_keys=False,
                     allow_unicode=True)
    optuna = None
    if search.kind == "optuna":
        optuna = OptunaSettings(sampler=search.sampler or "tpe", n_trials=search.n_trials,
                                seed=search.seed or 0)
    return ResolvedSpec(
        name=spec.name, experiment=spec.experiment, profile=profile,
        description=spec.description, metric=spec.metric.name, mode=spec.metric.mode,
        optuna=optuna, resources=eff.value("resources"),
        pack_size=eff.value("pack_size"), max_failures=eff.value("max_failures"),
        repeats=eff.value("repeats"), scheduler=eff.value("scheduler"), text=text,
        sha256=hashlib.sha256(text.encode()).hexdigest(), source=str(source.path),
        all_cells=tuple(cells))


def _checked(spec: Spec, profile: str, trainer: ModuleType) -> tuple[Effective, list[Cell]]:
    """``spec`` with ``profile`` applied, checked whole (its size before anything is
    expanded; a scheduler's metric against what ``trainer`` reports), and its cells, each
    validated against the trainer's ``Config``."""
    source = spec.source
    config_cls = trainer.Config
    eff = Effective.of(spec, profile)
    check_search(eff, source)
    scheduler, scheduler_path = eff.settings["scheduler"]
    if scheduler is not None and not experiments.reports_metric(trainer,
                                                                scheduler.metric_step):
        raise source.error((*scheduler_path, "metric_step"), f"a metric {spec.experiment} "
                           "reports at its evaluations: " + ", ".join(trainer.METRICS),
                           scheduler.metric_step)
    check_scheduler(eff, source)
    check_size(eff, source)
    search: Search = eff.value("search")
    if search.sampler == "cmaes" and importlib.util.find_spec("cmaes") is None:
        raise source.error((*eff.settings["search"][1], "sampler"),
                           "tpe, random or grid (cmaes needs the cmaes package, which is not "
                           "installed here)", search.sampler)
    known = sorted(f.name for f in dataclasses.fields(config_cls) if f.init)
    for index in range(len(eff.groups)):
        fixed, space = eff.group(index)
        for key, (_, path) in (fixed | space).items():
            if key not in known:
                raise source.error(path, f"a config key of {spec.experiment}: "
                                   + ", ".join(known), key)
    return eff, expand(eff, source, functools.partial(_validate, config_cls, source),
                       functools.partial(trial_key, spec.experiment))


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
            if err.field in where:
                raise source.error(where[err.field], err.expected, err.value) from err
            # a key the spec leaves at the Config's default: named as it is, at the line of
            # the key its check names ("... with direction simplex_switch"), else its group's
            related = [k for k in where if re.search(rf"\b{re.escape(k)}\b", err.expected)]
            at = where[related[0]] if related else group_path or ("fixed",)
            raise SpecError(source.file, source.line(at), err.field,
                            f"{err.expected}; the spec leaves {err.field} at its default, "
                            "so set it in fixed or space", err.value) from err


class _PlainDumper(yaml.SafeDumper):
    """Writes a value shared by several groups out in full each time, not as a YAML alias."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _resolved_document(spec: Spec, eff: Effective) -> dict[str, Any]:
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
