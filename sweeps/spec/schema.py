"""The schema of a sweep spec as written: pydantic models with a docstring per key.

:class:`Spec` is the whole file (sweeps/specs/README.md, "Keys"); :class:`Profile` the
overrides of one profile; :class:`Group` a conditional group. Each model rejects unknown keys
naming the keys it knows (:class:`~sweeps.spec.space.StrictModel`), and every constraint's
message reads after "expected" (``an integer > 0``), as :class:`~sweeps.spec.source.SpecError`
words it. Checks that need more than one key (profiles merged, Optuna dimensions only in an
Optuna search) are :mod:`sweeps.spec.profiles`'; checks against a trainer's ``Config`` are
:func:`sweeps.spec.resolve`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    PlainValidator,
    PrivateAttr,
    Strict,
    field_validator,
)

from ortho_core import experiments
from ortho_core.config import MAX_SEED
from sweeps.spec.source import SpecSource
from sweeps.spec.space import SpaceEntry, StrictModel

PROFILES = ("smoke", "cpu", "paper")
"""Profiles every spec defines (EXPERIMENTS.md, "Profiles")."""


def _check(ok: Any, expected: str) -> None:
    if not ok:
        raise ValueError(expected)


def _sign(strict: bool, kind: str) -> AfterValidator:
    """A validator of values > 0 (``strict``) or >= 0; ``kind``: "an integer" or "a number",
    for the message."""

    def check(value: Any) -> Any:
        _check(value > 0 if strict else value >= 0, f"{kind} {'>' if strict else '>='} 0")
        return value

    return AfterValidator(check)


StrictInt = Annotated[int, Strict()]
"""An integer as YAML writes one: ``true`` is not 1 (pydantic's lax mode would take it)."""
StrictFloat = Annotated[float, Strict()]
"""A number as YAML writes one (an integer included); ``true`` is not 1.0."""
PositiveInt = Annotated[StrictInt, _sign(True, "an integer")]
NonNegativeInt = Annotated[StrictInt, _sign(False, "an integer")]
PositiveFloat = Annotated[StrictFloat, _sign(True, "a number")]
NonNegativeFloat = Annotated[StrictFloat, _sign(False, "a number")]


def _seed(value: int) -> int:
    _check(0 <= value <= MAX_SEED, f"an integer in 0..{MAX_SEED} (seeds are 32-bit)")
    return value


Seed = Annotated[StrictInt, AfterValidator(_seed)]
"""A seed: 32-bit, as NumPy's (and so Optuna's samplers') seeding requires."""


def _pack_size(value: Any) -> Any:
    _check(value == "auto" or (isinstance(value, int) and not isinstance(value, bool)
                               and value > 0), "an integer > 0 or auto")
    return value


PackSize = Annotated[int | Literal["auto"], PlainValidator(_pack_size)]
"""``pack_size``: a number of configurations per trial, or ``auto`` (:mod:`sweeps.pack_size`);
one check, so that a bad value's message names both."""


def _not_null(value: Any) -> Any:
    _check(value is not None, "a value (null is allowed only for scheduler and groups)")
    return value


class Metric(StrictModel):
    """The trial summary that ranks trials."""

    name: str = Field(min_length=1)
    """A key of the trainer's ``Result.summary`` (e.g. ``max_seq_len_solved``; the trainer's
    ``SUMMARY`` lists them, ``ortho train EXPERIMENT --keys`` prints them): what reports call
    "best" and what Optuna optimises."""
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
    seed: Seed | None = None
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
    """CPU cores per trial (fractional allowed: 0.5 runs two trials per core). Its whole part
    sets the trial's torch threads; on a GPU a pack's host work uses them too (the synthetic
    trainer splits ρ(W_hh) of a pack over them, which one thread computes at about 1.5 ms a
    member: ``benchmarks/spectral_radius.py``)."""
    gpu: NonNegativeFloat = 0.0
    """GPUs per trial (fractional allowed: many small packs share one GPU)."""


class Scheduler(StrictModel):
    """An early-stopping scheduler over the trials' intermediate reports."""

    kind: Literal["asha"]
    """Only ASHA (asynchronous successive halving) is supported."""
    metric_step: str = Field(min_length=1)
    """The per-evaluation metric ASHA compares at each rung (a key of the trainer's
    ``METRICS``, such as ``val_error``; checked when the spec resolves): the spec's
    ``metric`` is a final summary, unknown until a trial ends."""
    mode: Literal["max", "min"]
    """Whether larger or smaller ``metric_step`` is better."""
    grace_period: PositiveInt = 1
    """Training steps a trial runs before it can be stopped."""
    reduction_factor: StrictFloat = 4.0
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
    pack_size: PackSize | None = None
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
    """Config keys swept for every group: grid or Optuna dimensions (``sweeps.spec.space``)."""
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
    pack_size: PackSize = 1
    """Most configurations trained together in one trial (DESIGN.md "Packs"; 1 = off). The
    runner packs only configurations that agree on the trainer's ``PACK_FIELDS``. ``auto``:
    the K whose plan finishes soonest by a throughput curve measured on a trial's device when
    the sweep starts (:mod:`sweeps.pack_size`), recorded on the parent run."""
    max_failures: NonNegativeInt = 0
    """Retries of a trial whose trainer raised (a lost node, an out-of-memory)."""
    scheduler: Scheduler | None = None
    """Early stopping of unpromising trials (none: every trial runs its budget)."""
    profiles: dict[str, Profile] = Field(default_factory=dict)
    """Overrides per profile. Each of ``smoke``, ``cpu`` and ``paper`` that a spec leaves out
    overrides nothing (a spec of one's own may have no ``profiles`` at all); the shipped
    specs write all three."""

    _source: SpecSource = PrivateAttr(
        default_factory=lambda: SpecSource(file="<spec>", path=Path("<spec>")))
    _written: frozenset[str] = PrivateAttr(default=frozenset())

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

    @property
    def profiles_written(self) -> frozenset[str]:
        """The profiles its file writes (:attr:`profiles` adds each of :data:`PROFILES` it
        leaves out, overriding nothing): an error under one it does not write is the spec's
        own."""
        return self._written

