"""Each Optuna cell's study, kept in a real Optuna storage beside the MLflow store, so that
``optuna.load_study`` or ``optuna-dashboard`` shows its history and a resume continues it.

Where (:func:`storage_url`): ``--optuna-storage URL`` or ``$ORTHO_OPTUNA_STORAGE`` (any URL
of Optuna's RDB storage: ``sqlite:///PATH``, ``postgresql://...``); else ``optuna.db``
beside a SQLite tracking store (``sqlite:///<home>/optuna.db`` beside the embedded
``sqlite:///<home>/mlflow.db``). With any other tracking URI (a tracking server, a file
store) a sweep with Optuna cells needs one of the two, and is
refused without (``ConfigError`` naming ``optuna_storage``, exit status 2) rather than keep
its studies where no one could open them. Only the driver opens the storage (the searcher runs
there, :mod:`sweeps.searcher`), so a SQLite file on the head's disk serves a cluster too; the
KubeRay cluster of ``cluster/`` sets ``$ORTHO_OPTUNA_STORAGE`` on its head to a database of
its PostgreSQL instead, which a laptop reaches by a port-forward. The parent run records
the URL, credentials masked (:data:`sweeps.contract.OPTUNA_STORAGE`), and each study is named
:data:`sweeps.contract.STUDY_NAME` (``<sweep_id>/cell-<index>``).

Every trial the searcher asks carries the member's trial key (user attribute
:data:`KEY_ATTR`); a repeated point, told without training, is marked :data:`REPEAT_ATTR`.
A resume (:func:`resume_studies`) loads the same studies and:

- tells each trial still RUNNING (its driver died before the trial ended) the value of its
  FINISHED MLflow run when there is one, else marks it FAIL (every sweep whose driver lives
  to its end does this itself before it exits, Ctrl-C or not: :meth:`Studies.end_running`),
  and :data:`INTERRUPTED_ATTR` where its configuration was cut short rather than failed
  (Optuna has no state for it; ``ortho sweep studies`` counts those trials apart);
- asks again, first (``enqueue_trial``), the point of every trial whose configuration has no
  FINISHED run (failed or interrupted), once per point, so each configuration ends with one
  run as in a grid;
- counts the cell's spent budget as its distinct finished points plus its repeats.

The samplers are seeded (``search.seed`` + cell index; on resume mixed with the number of
trials the study holds, so that a resumed random search does not propose its first points
again), so a rerun proposes the same points.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna

from ortho_core.config import MAX_SEED
from ortho_core.errors import ConfigError
from sweeps import contract
from sweeps.contract import first_line
from sweeps.plan import Plan
from sweeps.spec import ChoiceDim, OptunaSettings, resolved_params
from sweeps.tracking import redact

STORAGE_ENV = "ORTHO_OPTUNA_STORAGE"
"""The Optuna storage URL when ``--optuna-storage`` is not given."""
KEY_ATTR = "ortho.trial_key"
"""User attribute of an asked trial: the trial key of its configuration."""
REPEAT_ATTR = "ortho.repeat"
"""User attribute of a trial whose point was already known or in flight (told, not trained)."""
CELL_ATTR = "ortho.cell_params"
"""User attribute of a study: the config keys any Optuna cell of its sweep fixes, at the values
its trainer runs this cell with (:func:`sweeps.spec.resolved_params`: a key another cell sets
and this one leaves to the trainer holds the trainer's default). Studies created before
2026-12-06 hold only the keys their cell sets."""
INTERRUPTED_ATTR = "ortho.interrupted"
"""User attribute of a trial told FAIL because its configuration's training was cut short (a
Ctrl-C, a killed driver: no FINISHED or FAILED run), not because it failed; a resume asks its
point again."""


def storage_url(explicit: str | None, tracking_uri: str) -> str:
    """The Optuna storage of a sweep tracked in ``tracking_uri`` (the module docstring):
    ``explicit``, else ``$ORTHO_OPTUNA_STORAGE``, else ``optuna.db`` beside an embedded
    SQLite store; a relative SQLite path is made absolute, and a bare ``postgresql://`` names
    the driver this package installs (:func:`sweeps.contract.database_url`), so that the URL
    the parent run records opens as it is in ``optuna.load_study``."""
    url = explicit or os.environ.get(STORAGE_ENV) or None
    if url is not None and url.split("?")[0] in ("sqlite://", "sqlite:///:memory:"):
        raise ConfigError("optuna_storage", "a database that outlives this process (an "
                          "in-memory SQLite one goes with it, and the studies with it)", url)
    if url is None:
        db = contract.sqlite_path(tracking_uri)
        if db is None:
            raise ConfigError("optuna_storage", "an Optuna storage URL for the studies of a "
                              "sweep tracked outside an embedded SQLite store "
                              f"({redact(tracking_uri)}): --optuna-storage or "
                              f"${STORAGE_ENV}, e.g. postgresql://HOST/optuna or "
                              "sqlite:///PATH/optuna.db on the driver's disk")
        return f"sqlite:///{db.parent / 'optuna.db'}"
    if url.startswith("sqlite:///"):
        return contract.absolute_sqlite(url)
    return contract.database_url(url)


def sweep_storage(recorded: str, explicit: str | None, sweep_id: str,
                  tracking_uri: str) -> str:
    """The storage URL of the studies of sweep ``sweep_id``, tracked in ``tracking_uri``, as
    it opens (:func:`sweeps.contract.database_url`): ``explicit``, else
    ``$ORTHO_OPTUNA_STORAGE``, else ``recorded`` (its parent run's tag); where ``recorded`` is
    a SQLite file that is no longer there (a home moved or copied since) and ``optuna.db``
    beside the SQLite store is, that one. ``ConfigError`` for a grid sweep (field ``sweep``),
    for a recorded URL whose credentials were masked with neither given, and for a SQLite file
    that does not exist (field ``optuna_storage``), since opening one would create an empty
    storage."""
    if not recorded:
        raise ConfigError("sweep", f"a sweep with Optuna cells ({sweep_id} searches a grid "
                          "only: it has no studies)", sweep_id)
    given = explicit or os.environ.get(STORAGE_ENV)
    if given:
        url = storage_url(given, "")
    elif contract.MASK in recorded:
        raise ConfigError("optuna_storage", f"--optuna-storage or ${STORAGE_ENV}: sweep "
                          f"{sweep_id} recorded its storage with the credentials masked",
                          recorded)
    else:
        url = contract.database_url(recorded)  # recorded bare before the driver was named
        store = contract.sqlite_path(tracking_uri)
        moved = contract.sqlite_path(url)
        if (moved is not None and not moved.exists() and store is not None
                and (store.parent / "optuna.db").exists()):
            url = f"sqlite:///{store.parent / 'optuna.db'}"
    db = contract.sqlite_path(url)
    if db is not None and not db.exists():
        raise ConfigError("optuna_storage", f"the storage of sweep {sweep_id}'s studies "
                          f"({db} does not exist)", redact(url))
    return url


def make_sampler(settings: OptunaSettings, cell_space: Mapping[str, Any], seed: int) -> Any:
    """The Optuna sampler ``settings.sampler`` for one cell. TPE runs with the constant
    liar: the points of a batch still in flight count as the worst results, so that the
    points asked together differ."""
    if settings.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=seed, constant_liar=True)
    if settings.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if settings.sampler == "grid":
        space = {k: list(d.choice) for k, d in cell_space.items() if isinstance(d, ChoiceDim)}
        return AskTellGridSampler(space, seed=seed)
    return optuna.samplers.CmaEsSampler(seed=seed)


class AskTellGridSampler(optuna.samplers.GridSampler):
    """Optuna's grid sampler without its ``study.stop()`` once the grid is covered: that call
    only works inside ``study.optimize`` and raises under ask-and-tell; the cell's
    ``n_trials`` bounds the search instead. Points in flight are not proposed again."""

    def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
        """Nothing to do after a trial."""


@dataclass
class Studies:
    """The studies of a sweep's Optuna cells, open in the driver."""

    by_cell: dict[int, Any]
    """The ``optuna.Study`` of each Optuna cell, by cell index."""
    done: dict[int, int] = field(default_factory=dict)
    """Trials each cell has spent (on resume)."""
    known: dict[str, float | None] = field(default_factory=dict)
    """The metric of every configuration with a FINISHED run, by trial key (None: not
    finite): a point proposed again is told this value instead of being trained."""

    def repeats(self) -> int:
        """Trials of every cell that repeated a point (:data:`REPEAT_ATTR`): told, not
        trained."""
        return sum(bool(t.user_attrs.get(REPEAT_ATTR))
                   for study in self.by_cell.values() for t in study.get_trials(deepcopy=False))

    def end_running(self, values: Mapping[str, float | None],
                    failed: Collection[str] = ()) -> None:
        """Tell every trial still RUNNING the value of its configuration's FINISHED run in
        ``values`` (the metric by trial key), else FAIL, marked :data:`INTERRUPTED_ATTR`
        unless its configuration's run FAILED (``failed``: their trial keys), as Optuna's own
        ``optimize`` marks a
        trial a Ctrl-C stopped: what every sweep does before it exits (after a Ctrl-C, Tune
        stops telling the searcher, even of packs that then finish, and the searcher leaves
        the members of a pack that errored to this), so that the studies show what MLflow
        holds."""
        for study in self.by_cell.values():
            _end_running(study, values, failed)


def study_name(sweep_id: str, cell: int) -> str:
    """The name of cell ``cell``'s study (:data:`sweeps.contract.STUDY_NAME`)."""
    return contract.STUDY_NAME.format(sweep_id=sweep_id, cell=cell)


def open_storage(url: str | None) -> Any:
    """The storage ``url`` opens (None: in memory; ``ConfigError`` naming ``optuna_storage``
    when it cannot be opened, which a new sweep asks before Ray starts); Optuna's line per
    study created (INFO) is silenced first, since the sweep's first line names the storage
    and the studies."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if url is None:
        return None
    try:
        return optuna.storages.get_storage(url)
    except Exception as err:  # a malformed URL, a missing driver, an unreachable database
        raise ConfigError("optuna_storage", f"an Optuna storage URL this driver can open "
                          f"({redact(first_line(str(err)) or type(err).__name__)})",
                          redact(url)) from err


def _seed(settings: OptunaSettings, cell: int, n_past: int) -> int:
    """The sampler's seed for ``cell``, after ``n_past`` earlier runs of its study: the
    spec's seed plus the cell's index, within 32 bits as NumPy requires, on a first run."""
    if n_past == 0:
        return (settings.seed + cell) % (MAX_SEED + 1)
    return int(np.random.SeedSequence([settings.seed, cell, n_past]).generate_state(1)[0])


def create_studies(url: str | None, sweep_id: str, plan: Plan, settings: OptunaSettings,
                   mode: str) -> Studies:
    """A new study for each Optuna cell of ``plan`` in the storage ``url``, holding its
    cell's fixed params as the trainer resolves them (:data:`CELL_ATTR`)."""
    storage = open_storage(url)
    by_cell = {}
    cells = resolved_params(plan.experiment, list(plan.optuna_cells.values()))
    for (index, cell), params in zip(plan.optuna_cells.items(), cells, strict=True):
        study = optuna.create_study(
            storage=storage, study_name=study_name(sweep_id, index),
            direction="maximize" if mode == "max" else "minimize",
            sampler=make_sampler(settings, cell.optuna_space, _seed(settings, index, 0)))
        study.set_user_attr(CELL_ATTR, params)
        by_cell[index] = study
    return Studies(by_cell=by_cell)


def resume_studies(url: str, sweep_id: str, plan: Plan, settings: OptunaSettings,
                   values: Mapping[str, float | None], failed: Collection[str] = ()) -> Studies:
    """Load the studies of sweep ``sweep_id`` and set them right for a resume (the module
    docstring); ``values`` holds the metric of every FINISHED configuration run by trial
    key, ``failed`` the trial keys of its FAILED runs. A study missing from ``url`` raises
    ``ConfigError`` naming ``optuna_storage``."""
    storage = open_storage(url)
    opened = Studies(by_cell={}, known=dict(values))
    for index, cell in plan.optuna_cells.items():
        name = study_name(sweep_id, index)
        try:
            study = optuna.load_study(study_name=name, storage=storage)
        except KeyError as err:
            raise ConfigError("optuna_storage", f"the storage holding study {name!r} (the "
                              f"parent run's tag {contract.OPTUNA_STORAGE} names it)",
                              redact(url)) from err
        opened.done[index] = _set_right(study, values, failed)
        study.sampler = make_sampler(settings, cell.optuna_space,
                                     _seed(settings, index, len(study.trials)))
        opened.by_cell[index] = study
    return opened


def _set_right(study: Any, values: Mapping[str, float | None], failed: Collection[str]) -> int:
    """End ``study``'s RUNNING trials, queue the unfinished points again; its spent budget."""
    state = optuna.trial.TrialState
    _end_running(study, values, failed)
    finished: set[str] = set()
    queued: set[str] = set()
    again: dict[str, dict[str, Any]] = {}
    repeats = 0
    for trial in study.get_trials(deepcopy=False):
        key = trial.user_attrs.get(KEY_ATTR, "")
        if trial.user_attrs.get(REPEAT_ATTR):
            repeats += 1
        elif trial.state == state.WAITING:
            queued.add(key)
        elif key in values:
            finished.add(key)
        else:
            again.setdefault(key, trial.params)
    for key, params in again.items():
        if key not in queued:
            study.enqueue_trial(params, user_attrs={KEY_ATTR: key})
    return len(finished) + repeats


def _end_running(study: Any, values: Mapping[str, float | None],
                 failed: Collection[str]) -> None:
    """Tell each of ``study``'s RUNNING trials its configuration's value in ``values``, or
    FAIL when it has none (no FINISHED run, or a metric that is not finite), marked
    :data:`INTERRUPTED_ATTR` when its configuration has neither a FINISHED run nor one in
    ``failed``."""
    state = optuna.trial.TrialState
    for trial in study.get_trials(deepcopy=False, states=(state.RUNNING,)):
        key = trial.user_attrs.get(KEY_ATTR, "")
        value = values.get(key)
        if value is not None:
            study.tell(trial.number, value)
            continue
        if key not in values and key not in failed:
            optuna.trial.Trial(study, trial._trial_id).set_user_attr(INTERRUPTED_ATTR, True)
        study.tell(trial.number, state=state.FAIL)
