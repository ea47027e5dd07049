"""What a sweep trains: the grid's configurations gathered into packs, and the Optuna cells.

A Ray Tune trial trains one pack (DESIGN.md "Packs"). Grid configurations (cells without
Optuna dimensions) that agree on the trainer's ``PACK_FIELDS`` are dealt into packs of at
most ``pack_size``, as evenly as possible (17 configurations with ``pack_size: 16`` make
packs of 9 and 8), neighbours to different packs so that groups of different cost share
themselves out (:func:`deal`), and into as many more packs as make their number a multiple
of the trials the cluster runs at once (:func:`pack_counts`: 18 configurations with
``pack_size: 6`` on 2 cores make four packs, not three of which the last would run alone).

Cells with Optuna dimensions are searched in packs too: a trial of such a cell trains a batch
of points its study proposes together (:mod:`sweeps.searcher`), at most ``pack_size``, split
as evenly and into as many batches as a grid's group of that many configurations
(:func:`optuna_batches`: 17 trials with ``pack_size: 16`` on one slot are batches of 9 and 8;
9 trials on 6 slots, 2, 2, 2, 1, 1, 1), so that a small budget does not leave slots idle. A
cell whose Optuna dimensions include one of the trainer's ``PACK_FIELDS`` is searched one
point per trial, since its points could not share a pack.

``pack_size: auto`` is a number by the time a plan is built: the K whose plan a throughput
curve measured on a trial's device when the sweep starts says finishes soonest, the recorded
one on resume (:mod:`sweeps.pack_size`).

Every member carries its run's name (:mod:`sweeps.naming`), given from the whole sweep's
cells, so a resume names its configurations as the first run did.

On resume the configurations already FINISHED in MLflow are left out before packing, and
each Optuna cell's budget is reduced by the trials its stored study has already spent
(:mod:`sweeps.studies`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from types import ModuleType
from typing import Any

from ortho_core import experiments
from ortho_core.config import from_dict
from sweeps import contract, naming
from sweeps.spec import Cell, ResolvedSpec, resolved_params, trial_key


@dataclass(frozen=True)
class Member:
    """One configuration of a trial."""

    key: str
    """Its trial key (``sweeps.spec.trial_key``)."""
    params: dict[str, Any]
    """Config keys as the spec gives them (Optuna's choices included)."""
    cell: int
    """Index of its cell in ``ResolvedSpec.cells()``."""
    optuna: dict[str, Any] | None = None
    """The values Optuna chose, for a configuration of an Optuna cell."""
    name: str = ""
    """Its run's name (:mod:`sweeps.naming`); empty: the trial key names it."""

    def to_dict(self) -> dict[str, Any]:
        """As plain data (what a Tune trial's config carries)."""
        return asdict(self)


@dataclass
class Plan:
    """The work of a sweep, or of what remains of it."""

    experiment: str
    """Trainer name."""
    module: str
    """The trainer's module path (trials import it by this path)."""
    packs: list[list[Member]]
    """Grid configurations still to train, one list per trial."""
    optuna_cells: dict[int, Cell]
    """Cells searched by Optuna, by cell index."""
    n_trials: int
    """Optuna trials per cell (0 for a grid search)."""
    done: dict[int, int] = field(default_factory=dict)
    """Optuna trials already spent per cell (on resume)."""
    n_configs: int = 0
    """Configurations of the whole sweep (finished ones included)."""
    optuna_batches: dict[int, tuple[int, ...]] = field(default_factory=dict)
    """The points of each trial of each Optuna cell, in the order they run: its remaining
    budget in batches of at most ``pack_size``, as many as fill the trials that run at once
    (:func:`optuna_batches`); batches of 1 where the cell searches a field its packs must
    share."""
    varying: tuple[str, ...] = ()
    """Config keys that vary within the sweep: what its runs are named by
    (:mod:`sweeps.naming`)."""

    def remaining(self, cell: int) -> int:
        """Optuna trials still to run in ``cell``."""
        return max(0, self.n_trials - self.done.get(cell, 0))

    @property
    def n_tune_trials(self) -> int:
        """Ray Tune trials this plan runs (at most: a batch whose points all repeat known or
        live ones is not handed out)."""
        return len(self.packs) + sum(len(self.optuna_batches.get(c, ()))
                                     for c in self.optuna_cells)

    @property
    def n_todo(self) -> int:
        """Configurations this plan trains."""
        return sum(map(len, self.packs)) + sum(self.remaining(c) for c in self.optuna_cells)


def deal(items: Sequence[Any], n_chunks: int) -> list[list[Any]]:
    """``items`` dealt into ``n_chunks`` chunks, item i to chunk i mod n_chunks: the lengths
    differ by at most one, and neighbours in ``items`` go to different chunks.

    Dealing rather than cutting consecutive runs balances the chunks' cost: a plan lists a
    cell's configurations group by group, and groups differ in cost per configuration
    (ff-mnist's FF+OPEN costs two to four times FF), so consecutive runs would give one pack
    the cheap group and another the dear one, and the core of the cheap pack would idle.
    """
    return [list(items[i::n_chunks]) for i in range(n_chunks)]


def pack_counts(sizes: Sequence[int], pack_size: int, slots: int = 1) -> list[int]:
    """How many packs each group of ``sizes`` configurations is dealt into: ceil(n /
    ``pack_size``), then one more pack at a time for the group whose packs are largest until
    the total is a multiple of ``slots`` (or every pack holds one configuration).

    ``slots`` is how many trials run at once (:func:`sweeps.ray_session.trial_slots`). Trials
    of equal cost run in rounds of ``slots``; a last round with fewer packs than slots leaves
    the rest idle for a whole pack's time (18 configurations in packs of 6 on 2 cores: 12
    configurations' time, against 9 in four packs of 5, 5, 4 and 4). Splitting costs only
    the smaller packs' efficiency, which on one core is a few tens of percent at most
    (``benchmarks/pack_ceiling.py``), against half the machine idle.
    """
    counts = [math.ceil(n / pack_size) for n in sizes]
    while sum(counts) % slots:
        splittable = [i for i, n in enumerate(sizes) if counts[i] < n]
        if not splittable:
            break
        widest = max(splittable, key=lambda i: math.ceil(sizes[i] / counts[i]))
        counts[widest] += 1
    return counts


def group(members: Sequence[Member], module: ModuleType) -> list[list[Member]]:
    """``members`` grouped by their Config's ``PACK_FIELDS`` (the trainer's ``module``), first
    appearance first: the configurations that can share a pack."""
    groups: dict[tuple[Any, ...], list[Member]] = {}
    for m in members:
        config = from_dict(module.Config, m.params)
        shape = tuple(repr(getattr(config, f)) for f in module.PACK_FIELDS)
        groups.setdefault(shape, []).append(m)
    return list(groups.values())


def pack(members: Sequence[Member], module: ModuleType, pack_size: int,
         slots: int = 1) -> list[list[Member]]:
    """:func:`group` ``members`` and deal each group into packs of at most ``pack_size``, as
    many as fill ``slots`` (:func:`pack_counts`, :func:`deal`)."""
    groups = group(members, module)
    counts = pack_counts([len(g) for g in groups], pack_size, slots)
    return [p for members_, n in zip(groups, counts, strict=True) for p in deal(members_, n)]


def optuna_batches(cells: Mapping[int, Cell], module: ModuleType, pack_size: int,
                   remaining: Mapping[int, int], slots: int) -> dict[int, tuple[int, ...]]:
    """Each Optuna cell's batches, the points of each of its trials: batches of 1 for a cell
    that searches one of the trainer's ``PACK_FIELDS`` (its points could not share a pack);
    the other cells' ``remaining`` trials split as :func:`pack_counts` deals a grid's groups,
    into a multiple of ``slots`` batches where there are points enough, sizes differing by
    one at most, larger first (6 trials at ``pack_size: 6`` on 2 cores: two batches of 3,
    not one of 6; 9 on 6 slots: 2, 2, 2, 1, 1, 1)."""
    fields = set(module.PACK_FIELDS)
    out = {i: (1,) * remaining[i] for i, c in cells.items() if fields & set(c.optuna_space)}
    packing = [i for i in cells if i not in out]
    counts = pack_counts([remaining[i] for i in packing], pack_size, slots)
    out |= {i: tuple(len(chunk) for chunk in deal(range(remaining[i]), n))
            for i, n in zip(packing, counts, strict=True)}
    return out


def fill_slots(plan: Plan, pack_size: int, slots: int) -> Plan:
    """``plan`` with its grid configurations dealt again into packs that fill ``slots``
    (:func:`pack`) and its Optuna cells' batches sized to fill them
    (:func:`optuna_batches`)."""
    members = [m for p in plan.packs for m in p]
    module = experiments.get(plan.experiment)
    remaining = {c: plan.remaining(c) for c in plan.optuna_cells}
    return replace(plan, packs=pack(members, module, pack_size, slots),
                   optuna_batches=optuna_batches(plan.optuna_cells, module, pack_size,
                                                 remaining, slots))


def build_plan(spec: ResolvedSpec, finished: Mapping[str, Any] | None = None,
               done: Mapping[int, int] | None = None, slots: int = 1) -> Plan:
    """The plan of ``spec``, leaving out the grid configurations whose keys are in
    ``finished`` and the Optuna trials each cell has ``done`` (a scheduler comes with packs
    of one: :mod:`sweeps.spec` checks it), its grid packs filling ``slots`` trials at once.
    ``pack_size: auto`` is settled first (:func:`sweeps.pack_size.settle`, or
    :func:`~sweeps.pack_size.recorded` on resume)."""
    if spec.pack_size == "auto":
        raise ValueError("pack_size auto: settle it before planning (sweeps.pack_size)")
    finished = finished or {}
    module = experiments.get(spec.experiment)
    varying = contract.varying_keys(spec.cells(),
                                  resolved_params(spec.experiment, spec.cells()))
    optuna_cells: dict[int, Cell] = {}
    keyed: list[tuple[int, str, Cell]] = []
    for index, cell in enumerate(spec.cells()):
        if cell.optuna_space:
            optuna_cells[index] = cell
        else:
            keyed.append((index, trial_key(spec.experiment, cell.params), cell))
    names = naming.unique_names([(key, cell.params) for _, key, cell in keyed], varying)
    grid = [Member(key=key, params=dict(cell.params), cell=index, name=names[key])
            for index, key, cell in keyed if key not in finished]
    n_trials = spec.optuna.n_trials if spec.optuna is not None else 0
    n_grid = len(spec.cells()) - len(optuna_cells)
    done = dict(done or {})
    remaining = {i: max(0, n_trials - done.get(i, 0)) for i in optuna_cells}
    return Plan(experiment=spec.experiment, module=experiments.EXPERIMENTS[spec.experiment],
                packs=pack(grid, module, spec.pack_size, slots), optuna_cells=optuna_cells,
                n_trials=n_trials, done=done, n_configs=n_grid + n_trials * len(optuna_cells),
                optuna_batches=optuna_batches(optuna_cells, module, spec.pack_size, remaining,
                                              slots),
                varying=varying)
