"""One Ray Tune searcher for a whole sweep: grid packs first, then one Optuna study per cell,
asked for a pack of points at a time.

Tune's ``OptunaSearch`` rejects ``grid_search`` dimensions (STACK.md), so the runner does not
use it: :class:`SweepSearcher` hands out the plan's grid packs as they are, then asks each
Optuna cell's study (:mod:`sweeps.studies`) for packs of points (round robin over the cells,
``n_trials`` per cell, at most ``pack_size`` per pack and fewer where that fills the trials
that run at once: :attr:`sweeps.plan.Plan.optuna_batches`). The points of a pack are asked in one
go, every ask before any tell, so that the sampler sees the earlier ones as pending
(Optuna's RUNNING trials; TPE's constant liar counts them as the worst results, the grid
sampler skips them). The pack ends when all its members end (a
trainer trains a pack to its end): the trial's final report carries each member's metric
(:data:`MEMBER_VALUES`), and each member's Optuna trial is told its own value, or failed
when it has no finite one (failed, diverged without a summary, stopped early).

A trial that errors (Tune's retries spent) reports nothing, yet may have ended some of its
runs FINISHED before it died (its actor lost after the pack's endings), and may have died
before it claimed any (:attr:`SweepSearcher.errored` keeps its members, so that the driver
gives those a failed run: :func:`sweeps.tune_run.backfill_failures`). Its members' Optuna
trials are therefore left pending (RUNNING: the worst result to TPE's constant liar,
skipped by the grid sampler) and are told after the fit, from what MLflow holds once the
writer has drained (:meth:`sweeps.studies.Studies.end_running`): the value of a FINISHED
run, else FAIL. Telling them FAIL at once would tell Optuna a configuration failed whose run
MLflow holds FINISHED, and no resume would mend it (the sweep ends FINISHED).

Tune stages every grid pack at once (:func:`sweeps.tune_run.staged_trials`), but Optuna's
packs are proposed one at a time: the next pack is asked for only once the trial of the
previous one has started (:class:`TrialStarts` says when), so that a study is not asked for
points long before resources free up for them, when more results would inform them.

A point Optuna proposes again (within a pack, while an earlier one is in flight, or after it
finished: the grid sampler past its grid, a categorical space exhausted), or one that is a
grid configuration of the sweep (a group's grid value inside another group's Optuna
choice), is not trained twice: the repeat is told the known value, or failed while the
first is still to train, running or in an errored pack, and costs one trial of the cell's
budget.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import optuna
from ray.tune import Callback
from ray.tune.search import Searcher

from sweeps.contract import finite_or_none
from sweeps.naming import optuna_name
from sweeps.plan import Member, Plan
from sweeps.spec import trial_key
from sweeps.studies import KEY_ATTR, REPEAT_ATTR, Studies

MEMBER_VALUES = "member_values"
"""Key of a trial's final report (:func:`sweeps.trial.run_trial`): each member's metric by
trial key, NaN when not finite. Tune hands searchers the report flattened, so the value of
member ``key`` arrives as ``member_values/<key>``."""


class _Cell:
    """An Optuna cell's study with its budget."""

    def __init__(self, index: int, plan: Plan, study: Any) -> None:
        cell = plan.optuna_cells[index]
        self.index = index
        self.params = dict(cell.params)
        self.distributions = {k: d.distribution() for k, d in cell.optuna_space.items()}
        self.study = study
        self.batches = deque(plan.optuna_batches.get(index, ()))
        """The points of each of its trials still to hand out."""


class SweepSearcher(Searcher):
    """Suggests ``{"members": [...]}`` trial configs for a :class:`~sweeps.plan.Plan`, the
    Optuna cells' points from ``studies``."""

    def __init__(self, plan: Plan, metric: str, mode: str, studies: Studies | None) -> None:
        super().__init__(metric=metric, mode=mode)
        self.plan = plan
        self._packs = deque(plan.packs)
        self._cells = deque(_Cell(i, plan, studies.by_cell[i]) for i in plan.optuna_cells
                            if studies is not None and plan.optuna_batches.get(i))
        self._live: dict[str, tuple[_Cell, list[tuple[Any, Member]]]] = {}
        """Optuna packs handed to Tune: their cell and (Optuna trial, member) per member."""
        self._known: dict[str, float | None] = dict(studies.known) if studies else {}
        """Each finished configuration's metric (None: not finite), by trial key."""
        self._grid = {m.key for pack in plan.packs for m in pack}
        """The grid configurations this run trains (known once their trial completes)."""
        self._unstarted: set[str] = set()
        """Optuna packs handed to Tune whose trials have not started yet."""
        self.errored: list[Member] = []
        """The members of Optuna packs whose trials errored: told after the fit (the module
        docstring)."""
        self.n_suggested = 0
        """Trial configs handed to Tune so far."""
        self.n_repeats = 0
        """Points proposed again so far, told rather than trained."""

    def __getstate__(self) -> dict[str, Any]:
        """What pickling keeps: no study. Tune writes its searcher into ``tuner.pkl`` under
        the sweep's home (which a cluster's nodes share), and a study's storage holds the
        Optuna URL, password and all. Nothing reads it back: a sweep resumes from MLflow and
        its Optuna storage (:func:`sweeps.runner.resume_sweep`), never from Tune's state."""
        return {**self.__dict__, "_cells": deque(), "_live": {}}

    @property
    def exhausted(self) -> bool:
        """Whether every pack and every Optuna trial has been handed out."""
        return not self._packs and not any(c.batches for c in self._cells)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if self._packs:
            self.n_suggested += 1
            return {"members": [m.to_dict() for m in self._packs.popleft()]}
        if self._unstarted:
            return None  # Tune asks again later
        while self._cells:
            cell = self._cells[0]
            self._cells.rotate(-1)
            if not cell.batches:
                self._cells.remove(cell)
                continue
            batch = [(asked, Member(key, {**cell.params, **asked.params}, cell.index,
                                    dict(asked.params),
                                    optuna_name({**cell.params, **asked.params},
                                                self.plan.varying, key)))
                     for asked, key in self._ask(cell)]
            if not batch:
                continue  # every point repeated a known or live one
            self._live[trial_id] = (cell, batch)
            self._unstarted.add(trial_id)
            self.n_suggested += 1
            return {"members": [member.to_dict() for _, member in batch]}
        return Searcher.FINISHED

    def _ask(self, cell: _Cell) -> list[tuple[Any, str]]:
        """Ask ``cell``'s study for its next pack, every point before any tell; tell the
        repeats; the new points with their trial keys."""
        asked = [cell.study.ask(cell.distributions) for _ in range(cell.batches.popleft())]
        live = {m.key for _, batch in self._live.values() for _, m in batch}
        live |= {m.key for m in self.errored} | (self._grid - self._known.keys())
        fresh = []
        for trial in asked:
            key = trial_key(self.plan.experiment, {**cell.params, **trial.params})
            trial.set_user_attr(KEY_ATTR, key)
            if key in self._known or key in live:
                trial.set_user_attr(REPEAT_ATTR, True)
                self.n_repeats += 1
                self._tell(cell, trial, self._known.get(key))
            else:
                live.add(key)
                fresh.append((trial, key))
        return fresh

    def on_trial_start(self, trial_id: str) -> None:
        """Trial ``trial_id`` got its resources and runs (from :class:`TrialStarts`)."""
        self._unstarted.discard(trial_id)

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None,
                          error: bool = False) -> None:
        self._unstarted.discard(trial_id)
        if trial_id not in self._live:  # a grid pack: its values, for Optuna's repeats
            prefix = f"{MEMBER_VALUES}/"
            for name, value in (result or {}).items() if not error else ():
                if name.startswith(prefix) and name[len(prefix):] in self._grid:
                    self._known[name[len(prefix):]] = finite_or_none(value)
            return
        cell, batch = self._live.pop(trial_id)
        if error:
            self.errored.extend(member for _, member in batch)
            return
        for asked, member in batch:
            value = result.get(f"{MEMBER_VALUES}/{member.key}") if result else None
            self._known[member.key] = finite_or_none(value)
            self._tell(cell, asked, self._known[member.key])

    @staticmethod
    def _tell(cell: _Cell, asked: Any, value: float | None) -> None:
        if value is None:
            cell.study.tell(asked, state=optuna.trial.TrialState.FAIL)
        else:
            cell.study.tell(asked, value)


class TrialStarts(Callback):
    """Tells a :class:`SweepSearcher` when Tune starts a trial (a searcher hears only of
    results and ends)."""

    def __init__(self, searcher: SweepSearcher) -> None:
        self.searcher = searcher

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any,
                       **info: Any) -> None:
        self.searcher.on_trial_start(trial.trial_id)
