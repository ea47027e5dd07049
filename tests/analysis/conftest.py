"""A store with known values, built through the real ``Tracker`` (``sweeps.testing``) as a
sweep is tracked (DESIGN.md "What MLflow holds"), no runner involved; built once per session
for each kind of store (``built_store``; ``store`` is the SQLite one, whose database a test
can copy with :func:`copy_store`). Real smoke sweeps: ``smoke_home`` for a test marked
``@pytest.mark.smoke_sweep(SPEC)`` (:mod:`tests.smoke`, in ``tests/conftest.py``).

Experiment ``orth-pretrain-convergence`` holds sweep ``pc-1`` (:data:`PRETRAIN_STEPS`).
Experiment ``synthetic-max-length`` holds two sweeps:

- ``sw-0`` (profile smoke, older): one configuration, and no artifacts (as a sweep tracked
  before the parent run kept its spec and expected cells);
- ``sw-1`` (profile cpu, newer): the resolved spec :data:`SPEC_TEXT` defines 16
  configurations (2 tasks × (2 plain + 4 open + 2 oinit)); 16 runs tracked for 14 of them:

  * temporal order, all 8 configurations, one trial key tracked twice (an older FAILED run
    claiming T = 90, then a FINISHED one with T = 60 from a claim that raced with it: the
    finished one must win), one configuration diverged;
  * adding: plain lr = 0.1 failed; open lr = 0.1, λ = 0.1 tracked twice (a FINISHED run,
    then a newer KILLED one from a claim that raced: the finished one must win); no oinit
    run at all (a missing cell).

Temporal-order runs report stepwise ``seq_len``, ``spectral_radius``, ``grad_norm_whh`` and
``val_error`` as the synthetic trainer reports them (every 100 iterations, 300 per length,
steps counted over all lengths T = 10, 20, ... up to the first T not solved), and the
summary ``val_error`` again at the last step, as ``sweeps.tracking`` does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from analysis.load import Sweep, SweepRuns
from ortho_core.reporting import Outcome, Result
from sweeps import tracking
from sweeps.testing import raced_claims, sqlite_store, start_sweep, track
from sweeps.tracking.cells import expected_cells
from tests.conftest import STORE_PARAMS, new_store

SPEC = "synthetic-max-length"
SPEC_TEXT = """\
name: synthetic-max-length
experiment: synthetic
profile: cpu
description: M Table I (test store)
metric: {name: max_seq_len_solved, mode: max}
search: {kind: grid}
fixed: {protocol: max_length, hidden: 100, error_threshold: 0.04}
space:
  task: [temporal_order, adding]
  lr: [0.1, 0.01]
groups:
  - fixed: {variant: plain}
    space: {}
  - fixed: {variant: open}
    space: {penalty: [1.0, 0.1]}
  - fixed: {variant: oinit, pretrain_lr: 0.1}
    space: {}
repeats: 1
seed: 0
"""


@dataclass
class Trial:
    """One child run to create."""

    task: str
    variant: str
    lr: float
    penalty: float = 0.0
    status: str = "FINISHED"
    outcome: str | None = "solved"
    max_len: int | None = None
    iters: int | None = None
    start: int = 0
    """Creation order within its sweep."""
    history: bool = False

    def params(self) -> dict[str, str]:
        return {"task": self.task, "variant": self.variant, "lr": str(self.lr),
                "penalty": str(self.penalty), "pretrain_lr": "0.1", "protocol": "max_length",
                "seq_len": "10", "seq_len_step": "10", "hidden": "100", "error_threshold": "0.04",
                "spectral_radius": "None", "warm_start": "False", "seed": "0", "data_seed": "0",
                "device": "cpu"}

    def key(self) -> str:
        blob = json.dumps(self.params(), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


SW1: list[Trial] = [
    Trial("temporal_order", "plain", 0.1, max_len=30, iters=500, start=10, history=True),
    Trial("temporal_order", "plain", 0.01, max_len=30, iters=400, start=11, history=True),
    Trial("temporal_order", "open", 0.1, 1.0, max_len=50, iters=900, start=12, history=True),
    Trial("temporal_order", "open", 0.1, 0.1, outcome="unsolved", max_len=0, iters=0,
          start=13),
    Trial("temporal_order", "open", 0.01, 1.0, status="FAILED", outcome="failed", max_len=90,
          start=14),
    Trial("temporal_order", "open", 0.01, 1.0, max_len=60, iters=2000, start=30,
          history=True),
    Trial("temporal_order", "open", 0.01, 0.1, max_len=20, iters=300, start=15),
    Trial("temporal_order", "oinit", 0.1, max_len=70, iters=1500, start=16, history=True),
    Trial("temporal_order", "oinit", 0.01, outcome="diverged", max_len=10, iters=100,
          start=17, history=True),
    Trial("adding", "plain", 0.1, status="FAILED", outcome="failed", start=18),
    Trial("adding", "plain", 0.01, max_len=40, iters=700, start=19),
    Trial("adding", "open", 0.1, 1.0, max_len=30, iters=650, start=20),
    Trial("adding", "open", 0.1, 0.1, max_len=30, iters=600, start=21),
    Trial("adding", "open", 0.1, 0.1, status="KILLED", outcome=None, start=31),
    Trial("adding", "open", 0.01, 1.0, max_len=30, iters=600, start=22),
    Trial("adding", "open", 0.01, 0.1, max_len=50, iters=800, start=23),
]
"""Child runs of sweep ``sw-1`` (created in the order of ``start``)."""

SW0: list[Trial] = [Trial("temporal_order", "plain", 0.1, max_len=20, iters=300, start=2)]


def frame_runs(frame: pd.DataFrame, spec: str, spec_text: str | None) -> SweepRuns:
    """The runs of a finished sweep of ``spec`` as ``frame`` (one row per run, MLflow's
    ``params.*``/``metrics.*`` columns) without a store, for the table logic alone; its
    expected cells are those of ``spec_text`` (None: a sweep tracked before they were)."""
    sweep = Sweep(spec=spec, sweep_id="s-1", profile="cpu", spec_sha256="", git_sha="",
                  n_configs=None, parent_run_id="parent", status="FINISHED",
                  experiment_id="0", start_time=0)
    return SweepRuns(sweep=sweep, runs=frame, n_runs=len(frame),
                     expected_cells=None if spec_text is None else expected_cells(spec_text))


def stage_history(trial: Trial, index: int) -> list[tuple[str, int, float]]:
    """(metric, step, value) of a run that solved T = 10 .. max_len and stopped at the next
    T: three evaluations per length, values that differ per run, length and step."""
    out = []
    last = (trial.max_len or 0) + 10
    for stage, seq_len in enumerate(range(10, last + 1, 10)):
        for k in range(1, 4):
            step = stage * 300 + k * 100
            out.append(("seq_len", step, float(seq_len)))
            out.append(("spectral_radius", step, 0.9 + 0.01 * index + 0.001 * step / 100))
            out.append(("grad_norm_whh", step, (1 + index) * 0.1 + 0.002 * step))
            out.append(("val_error", step, 0.5 if k < 3 else 0.0))
    return out


PRETRAIN_SPEC = "orth-pretrain-convergence"
PRETRAIN_TEXT = """\
name: orth-pretrain-convergence
experiment: orth-pretrain-convergence
profile: smoke
metric: {name: normal_success_rate, mode: max}
search: {kind: grid}
fixed: {repeats: 6, size: 100, distributions: [normal, uniform], pretrain_lr: 0.1}
space: {}
groups: []
repeats: 3
seed: 0
"""
PRETRAIN_STEPS: dict[int, dict[str, list[int]] | None] = {
    0: {"normal": [22, 23, 23, 24, 22], "uniform": [24, 24, 25, 23, 24, 24]},
    1: {"normal": [21, 22, 23, 22, 22, 25], "uniform": [23, 26, 24, 25, 24, 24]},
    2: None,
}
"""Seed -> steps of the converged matrices per distribution (6 repeats each: seed 0 has one
normal matrix that did not converge); seed 2 failed."""


def pretrain_summary(steps: dict[str, list[int]]) -> dict[str, float]:
    """The trainer's summary of one configuration, from its step counts."""
    out: dict[str, float] = {}
    for dist, values in steps.items():
        n = len(values)
        mean = sum(values) / n
        out |= {f"{dist}_success_rate": n / 6, f"{dist}_repeats": 6.0,
                f"{dist}_mean_steps": mean, f"{dist}_min_steps": float(min(values)),
                f"{dist}_max_steps": float(max(values)),
                f"{dist}_std_steps": (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5}
    return out


@dataclass
class Store:
    """The built store and what went into it."""

    uri: str
    root: Path
    """Where a SQLite store's database is (``mlflow.db``); unused for a server."""
    runs: dict[str, list[tuple[Trial, str]]]
    """Sweep id -> (trial, run id) in the order of :data:`SW1` (or :data:`SW0`)."""
    parents: dict[str, str]
    """Sweep id -> parent run id."""
    kind: str = "sqlite"
    """The kind of store (``tests/conftest.py``)."""

    def client(self) -> MlflowClient:
        return MlflowClient(tracking_uri=self.uri)


def _rows(trial: Trial, index: int) -> list[tuple[int, dict[str, float]]]:
    """What the trainer reported for ``trial``: its stage history, step by step."""
    rows: dict[int, dict[str, float]] = {}
    if trial.history:
        for name, step, value in stage_history(trial, index):
            rows.setdefault(step, {})[name] = value
    return sorted(rows.items())


def _summary(trial: Trial) -> dict[str, float]:
    summary: dict[str, float] = {}
    if trial.max_len is not None:
        summary["max_seq_len_solved"] = float(trial.max_len)
    if trial.iters is not None:
        summary["iters_to_solve"] = float(trial.iters)
    if trial.history:
        summary["val_error"] = 0.25
    return summary


def _track_trial(t: tracking.Tracker, ref: tracking.SweepRef, trial: Trial, index: int) -> str:
    rows = _rows(trial, index)
    summary = _summary(trial)
    if trial.status == "FINISHED":
        assert trial.outcome is not None
        return track(t, ref, trial.key(), trial.params(), rows=rows,
                     result=Result(Outcome(trial.outcome), summary))
    if trial.status == "FAILED":  # it had reported its summaries before it raised
        last = rows[-1][0] if rows else 0
        return track(t, ref, trial.key(), trial.params(), end="failed",
                     rows=[*rows, (last + 1, summary)] if summary else rows)
    return track(t, ref, trial.key(), trial.params(), end="killed", rows=rows)


def _track_sweep(t: tracking.Tracker, ref: tracking.SweepRef,
                 trials: list[Trial]) -> list[tuple[Trial, str]]:
    """Track ``trials`` in the order of their ``start``; a key tracked before comes from a
    claim that raced with the earlier one (else the claim would replace or keep it)."""
    ids: dict[int, str] = {}
    seen: set[str] = set()
    for index in sorted(range(len(trials)), key=lambda i: trials[i].start):
        trial = trials[index]
        with raced_claims(t) if trial.key() in seen else nullcontext():
            ids[index] = _track_trial(t, ref, trial, index)
        seen.add(trial.key())
    return [(trial, ids[i]) for i, trial in enumerate(trials)]


def build_store(uri: str, root: Path, kind: str = "sqlite") -> Store:
    """Build the store described in the module docstring into the empty store ``uri``."""
    t = tracking.Tracker(uri)
    runs: dict[str, list[tuple[Trial, str]]] = {}
    parents: dict[str, str] = {}
    for sweep_id, profile, trials, text in (("sw-0", "smoke", SW0, None),
                                           ("sw-1", "cpu", SW1, SPEC_TEXT)):
        ref = start_sweep(t, SPEC, sweep_id, profile=profile, resolved_text=text,
                          n_configs=len(trials) if text is None else None,
                          metric="max_seq_len_solved", git_sha="0" * 40)
        parents[sweep_id] = ref.parent_run_id
        runs[sweep_id] = _track_sweep(t, ref, trials)
        t.end_sweep(ref, "FINISHED", {})
    parents["pc-1"] = _pretrain_sweep(t)
    return Store(uri=uri, root=root, runs=runs, parents=parents, kind=kind)


def _pretrain_sweep(t: tracking.Tracker) -> str:
    """Sweep ``pc-1`` of ``orth-pretrain-convergence``: three seeds, the last one failed."""
    ref = start_sweep(t, PRETRAIN_SPEC, "pc-1", profile="smoke", resolved_text=PRETRAIN_TEXT,
                      metric="normal_success_rate")
    for seed, steps in PRETRAIN_STEPS.items():
        params = {"repeats": 6, "size": 100, "distributions": ["normal", "uniform"],
                  "pretrain_lr": 0.1, "seed": seed, "data_seed": 0}
        if steps is None:
            track(t, ref, f"pc-{seed}", params, end="failed")
        else:
            track(t, ref, f"pc-{seed}", params, step=12,
                  result=Result(Outcome.UNSOLVED, pretrain_summary(steps)))
    t.end_sweep(ref, "FINISHED", {})
    return ref.parent_run_id


class BuiltStores:
    """The store of the module docstring, built once per kind of store on first use."""

    def __init__(self, request: pytest.FixtureRequest,
                 factory: pytest.TempPathFactory) -> None:
        self._request = request
        self._factory = factory
        self._built: dict[str, Store] = {}

    def get(self, kind: str) -> Store:
        """The built store of ``kind``."""
        if kind not in self._built:
            root = self._factory.mktemp(f"built-{kind}")
            uri = (sqlite_store(root) if kind == "sqlite" else
                   self._request.getfixturevalue("server_stores").uri("analysis"))
            self._built[kind] = build_store(uri, root, kind)
        return self._built[kind]


@pytest.fixture(scope="session")
def built_stores(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> BuiltStores:
    """The built stores of the session (read-only)."""
    return BuiltStores(request, tmp_path_factory)


@pytest.fixture(scope="session", params=STORE_PARAMS)
def built_store(request: pytest.FixtureRequest, built_stores: BuiltStores) -> Store:
    """The built store, of each kind (read-only)."""
    return built_stores.get(request.param)


@pytest.fixture(scope="session")
def store(built_stores: BuiltStores) -> Store:
    """The built SQLite store (read-only: tests that write copy it with :func:`copy_store`);
    it replaces, in this directory, the empty ``store`` of ``tests/conftest.py``."""
    return built_stores.get("sqlite")


@pytest.fixture(params=STORE_PARAMS)
def fresh_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The store of the module docstring built anew for this test alone, of each kind."""
    empty = new_store(request, request.param, tmp_path / "store")
    yield build_store(empty.uri, tmp_path / "store", empty.kind)


def copy_store(store: Store, dest: Path) -> str:
    """A writable copy of the SQLite store's database under ``dest``; returns its URI
    (artifacts stay where the original's are)."""
    if store.kind != "sqlite":
        raise ValueError("only a SQLite store can be copied")
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "mlflow.db").write_bytes((store.root / "mlflow.db").read_bytes())
    return f"sqlite:///{dest / 'mlflow.db'}"
