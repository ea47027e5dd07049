"""A hand-built MLflow store with known values, laid out as ``sweeps.tracking`` tracks a sweep
(DESIGN.md "What MLflow holds"), built with ``MlflowClient`` directly, no runner involved.

Experiment ``orth-pretrain-convergence`` holds sweep ``pc-1`` (:data:`PRETRAIN_STEPS`).
Experiment ``synthetic-max-length`` holds two sweeps:

- ``sw-0`` (profile smoke, older): one configuration;
- ``sw-1`` (profile cpu, newer): the resolved spec :data:`SPEC_TEXT` defines 16
  configurations (2 tasks × (2 plain + 4 open + 2 oinit)); 16 runs tracked for 14 of them:

  * temporal order, all 8 configurations, one trial key tracked twice (an older FAILED run
    claiming T = 90, then a FINISHED one with T = 60: the finished one must win), one
    configuration diverged;
  * adding: plain lr = 0.1 failed; open lr = 0.1, λ = 0.1 tracked twice (a FINISHED run,
    then a newer KILLED one: the finished one must win); no oinit run at all (a missing
    cell).

Temporal-order runs log stepwise ``seq_len``, ``spectral_radius``, ``grad_norm_whh`` and
``val_error`` as the synthetic trainer reports them (every 100 iterations, 300 per length,
steps counted over all lengths T = 10, 20, ... up to the first T not solved), and the
summary ``val_error`` again at the last step, as ``sweeps.tracking`` does.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

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
"""Child runs of sweep ``sw-1``, in creation order."""

SW0: list[Trial] = [Trial("temporal_order", "plain", 0.1, max_len=20, iters=300, start=2)]


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
    runs: dict[str, list[tuple[Trial, str]]]
    """Sweep id -> (trial, run id) in creation order."""
    parents: dict[str, str]
    """Sweep id -> parent run id."""

    def client(self) -> MlflowClient:
        return MlflowClient(tracking_uri=self.uri)


def _child(client: MlflowClient, experiment_id: str, parent: str, sweep_id: str,
           trial: Trial, index: int) -> str:
    tags = {"mlflow.parentRunId": parent, "ortho.sweep_id": sweep_id,
            "ortho.role": "configuration", "ortho.trial_key": trial.key(),
            "ortho.attempt": "1", "ortho.node": "node-a", "ortho.hostname": "host-a"}
    if trial.outcome is not None:
        tags["ortho.outcome"] = trial.outcome
    run = client.create_run(experiment_id, start_time=1_000 * trial.start, tags=tags,
                            run_name=trial.key())
    metrics = [Metric(k, v, 0, s) for k, s, v in stage_history(trial, index)] if (
        trial.history) else []
    last = metrics[-1].step if metrics else 0
    if trial.max_len is not None:
        metrics.append(Metric("max_seq_len_solved", float(trial.max_len), 1, last))
    if trial.iters is not None:
        metrics.append(Metric("iters_to_solve", float(trial.iters), 1, last))
    if trial.history:
        metrics.append(Metric("val_error", 0.25, 1, last))
    client.log_batch(run.info.run_id, metrics=metrics,
                     params=[Param(k, v) for k, v in trial.params().items()])
    client.set_terminated(run.info.run_id, trial.status, end_time=1_000 * trial.start + 500)
    return run.info.run_id


def build_store(root: Path) -> Store:
    """Build the store described in the module docstring under ``root`` (``mlflow.db`` and
    ``artifacts/``, as the embedded default lays them out)."""
    root.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment(SPEC, artifact_location=(root / "artifacts" / SPEC).as_uri())
    runs: dict[str, list[tuple[Trial, str]]] = {}
    parents: dict[str, str] = {}
    for sweep_id, profile, start, trials, n in (("sw-0", "smoke", 1, SW0, 1),
                                                ("sw-1", "cpu", 5, SW1, 16)):
        parent = client.create_run(exp, start_time=1_000 * start, run_name=sweep_id, tags={
            "ortho.sweep_id": sweep_id, "ortho.role": "sweep", "ortho.spec": SPEC,
            "ortho.profile": profile, "ortho.n_configs": str(n),
            "ortho.spec_sha256": hashlib.sha256(SPEC_TEXT.encode()).hexdigest(),
            "ortho.git_sha": "0" * 40}).info.run_id
        if sweep_id == "sw-1":
            client.log_text(parent, SPEC_TEXT, "resolved_spec.yaml")
            client.log_text(parent, "name: synthetic-max-length\n", f"spec/{SPEC}.yaml")
        parents[sweep_id] = parent
        runs[sweep_id] = [(t, _child(client, exp, parent, sweep_id, t, i))
                          for i, t in enumerate(trials)]
        client.set_terminated(parent, "FINISHED", end_time=1_000 * 40)
    parents["pc-1"] = _pretrain_sweep(client, root)
    return Store(uri=uri, root=root, runs=runs, parents=parents)


def _pretrain_sweep(client: MlflowClient, root: Path) -> str:
    """Sweep ``pc-1`` of ``orth-pretrain-convergence``: three seeds, the last one failed."""
    exp = client.create_experiment(
        PRETRAIN_SPEC, artifact_location=(root / "artifacts" / PRETRAIN_SPEC).as_uri())
    parent = client.create_run(exp, start_time=1_000, run_name="pc-1", tags={
        "ortho.sweep_id": "pc-1", "ortho.role": "sweep", "ortho.spec": PRETRAIN_SPEC,
        "ortho.profile": "smoke", "ortho.n_configs": "3"}).info.run_id
    client.log_text(parent, PRETRAIN_TEXT, "resolved_spec.yaml")
    for seed, steps in PRETRAIN_STEPS.items():
        tags = {"mlflow.parentRunId": parent, "ortho.sweep_id": "pc-1",
                "ortho.role": "configuration", "ortho.trial_key": f"pc-{seed}",
                "ortho.outcome": "failed" if steps is None else "unsolved"}
        run = client.create_run(exp, start_time=2_000 + seed, tags=tags).info.run_id
        params = {"repeats": "6", "size": "100", "distributions": "normal,uniform",
                  "pretrain_lr": "0.1", "seed": str(seed), "data_seed": "0"}
        summary = {} if steps is None else pretrain_summary(steps)
        client.log_batch(run, metrics=[Metric(k, v, 1, 12) for k, v in summary.items()],
                         params=[Param(k, v) for k, v in params.items()])
        client.set_terminated(run, "FAILED" if steps is None else "FINISHED")
    return parent


@pytest.fixture(scope="session")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """The hand-built store (read-only: tests that write copy it with :func:`copy_store`)."""
    return build_store(tmp_path_factory.mktemp("hand-built"))


def copy_store(store: Store, dest: Path) -> str:
    """A writable copy of the store's database under ``dest``; returns its URI (artifacts stay
    where the original's are)."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "mlflow.db").write_bytes((store.root / "mlflow.db").read_bytes())
    return f"sqlite:///{dest / 'mlflow.db'}"
