"""One Ray Tune searcher for a whole sweep: grid packs first, then one Optuna study per cell.

Tune's ``OptunaSearch`` rejects ``grid_search`` dimensions (STACK.md), so the runner does not
use it: :class:`SweepSearcher` hands out the plan's grid packs as they are, then asks each
Optuna cell's study for points (round robin over the cells, ``n_trials`` per cell) and tells
the study the trial's metric when the trial ends. A trial with no finite metric (failed,
diverged without a summary, stopped early) is told as failed. Every study is seeded
(``search.seed`` + cell index), so a rerun proposes the same points.

Tune stages every grid pack at once (:func:`sweeps.tune_run.staged_trials`), but Optuna's
points are proposed one at a time: the next point is asked for only once the trial of the
previous one has started (:class:`TrialStarts` says when), so that a study is not asked for
points long before resources free up for them, when more results would inform them.

A point Optuna proposes again (the grid sampler under concurrency, or a categorical space
exhausted) is not trained twice: the repeat is told the known value, or failed while the
first is still running, and costs one trial of the cell's budget.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import optuna
from ray.tune import Callback
from ray.tune.search import Searcher

from sweeps.plan import Member, Plan
from sweeps.spec import ChoiceDim, OptunaSettings, trial_key


def make_sampler(settings: OptunaSettings, cell_space: dict[str, Any], seed: int) -> Any:
    """The Optuna sampler ``settings.sampler`` for one cell."""
    if settings.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if settings.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if settings.sampler == "grid":
        space = {k: list(d.choice) for k, d in cell_space.items() if isinstance(d, ChoiceDim)}
        return AskTellGridSampler(space, seed=seed)
    return optuna.samplers.CmaEsSampler(seed=seed)


class AskTellGridSampler(optuna.samplers.GridSampler):
    """Optuna's grid sampler without its ``study.stop()`` once the grid is covered: that call
    only works inside ``study.optimize`` and raises under ask-and-tell; the cell's
    ``n_trials`` bounds the search instead."""

    def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
        """Nothing to do after a trial."""


class _Study:
    """An Optuna study of one cell with its budget."""

    def __init__(self, index: int, plan: Plan, settings: OptunaSettings, mode: str) -> None:
        cell = plan.optuna_cells[index]
        self.index = index
        self.params = dict(cell.params)
        self.distributions = {k: d.distribution() for k, d in cell.optuna_space.items()}
        self.study = optuna.create_study(
            direction="maximize" if mode == "max" else "minimize",
            sampler=make_sampler(settings, cell.optuna_space, settings.seed + index))
        for past in plan.history.get(index, []):
            self.study.add_trial(optuna.trial.create_trial(
                params=past.optuna, distributions=self.distributions, value=past.value,
                state=(optuna.trial.TrialState.COMPLETE if past.value is not None
                       else optuna.trial.TrialState.FAIL)))
        self.remaining = plan.remaining(index)


class SweepSearcher(Searcher):
    """Suggests ``{"members": [...]}`` trial configs for a :class:`~sweeps.plan.Plan`."""

    def __init__(self, plan: Plan, metric: str, mode: str,
                 settings: OptunaSettings | None) -> None:
        super().__init__(metric=metric, mode=mode)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.plan = plan
        self._packs = deque(plan.packs)
        self._studies = deque(_Study(i, plan, settings, mode) for i in plan.optuna_cells
                              if settings is not None and plan.remaining(i) > 0)
        self._live: dict[str, tuple[_Study, Any, str]] = {}
        self._known: dict[str, float | None] = {}
        self._unstarted: set[str] = set()
        """Optuna trials handed to Tune that have not started yet."""
        self.n_suggested = 0
        """Trial configs handed to Tune so far."""

    @property
    def exhausted(self) -> bool:
        """Whether every pack and every Optuna trial has been handed out."""
        return not self._packs and all(s.remaining == 0 for s in self._studies)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if self._packs:
            self.n_suggested += 1
            return {"members": [m.to_dict() for m in self._packs.popleft()]}
        if self._unstarted:
            return None  # Tune asks again later
        while self._studies:
            study = self._studies[0]
            self._studies.rotate(-1)
            if study.remaining == 0:
                self._studies.remove(study)
                continue
            study.remaining -= 1
            asked = study.study.ask(study.distributions)
            params = {**study.params, **asked.params}
            key = trial_key(self.plan.experiment, params)
            if key in self._known or key in (k for _, _, k in self._live.values()):
                self._tell(study, asked, self._known.get(key))
                continue
            self._live[trial_id] = (study, asked, key)
            self._unstarted.add(trial_id)
            self.n_suggested += 1
            return {"members": [Member(key, params, study.index, dict(asked.params)).to_dict()]}
        return Searcher.FINISHED

    def on_trial_start(self, trial_id: str) -> None:
        """Trial ``trial_id`` got its resources and runs (from :class:`TrialStarts`)."""
        self._unstarted.discard(trial_id)

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None,
                          error: bool = False) -> None:
        self._unstarted.discard(trial_id)
        if trial_id not in self._live:
            return
        study, asked, key = self._live.pop(trial_id)
        value = None if error or not result else result.get(self.metric)
        value = float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
        self._known[key] = value
        self._tell(study, asked, value)

    @staticmethod
    def _tell(study: _Study, asked: Any, value: float | None) -> None:
        if value is None:
            study.study.tell(asked, state=optuna.trial.TrialState.FAIL)
        else:
            study.study.tell(asked, value)


class TrialStarts(Callback):
    """Tells a :class:`SweepSearcher` when Tune starts a trial (a searcher hears only of
    results and ends)."""

    def __init__(self, searcher: SweepSearcher) -> None:
        self.searcher = searcher

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any,
                       **info: Any) -> None:
        self.searcher.on_trial_start(trial.trial_id)
