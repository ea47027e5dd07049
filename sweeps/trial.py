"""The Ray Tune function trainable: one trial trains one pack and tracks every member.

:func:`run_trial` receives ``{"members": [...]}`` (see :mod:`sweeps.plan`), claims an MLflow
run per member (:meth:`sweeps.tracking.Tracker.claim_all`, the whole pack in one call: a
FINISHED one is skipped and its stored result reused), builds the members' ``Config`` with
``from_dict``, and calls the trainer with a :class:`Recorder`, which batches every report
into MLflow and, when the spec has an early-stopping scheduler, forwards the scheduler's
metric to ``ray.tune.report``.
Every write goes through the sweep's writer on the driver's node (:mod:`sweeps.writer`):
a trial never opens the tracking store itself.

Endings:

- the trainer returns: each run gets its summaries, metrics CSV and outcome (FINISHED; the
  pack's endings in one call);
  a member that failed alone (:mod:`ortho_core.experiments.isolation`: one member's
  failure never ends its pack) gets ``traceback.txt``, its metrics CSV and outcome
  ``failed`` (FAILED) while the others finish, and the trial ends normally (the error is
  the member's, so a retry of the trial would not help; a resume retries it);
- the pack raises (an error that is not one member's): each run gets ``traceback.txt``
  and outcome ``failed`` (FAILED), and
  the error is re-raised so that Tune retries the trial up to ``max_failures`` (a retry
  replaces the failed runs); a trainer's own ``SystemExit`` (one not raised by the
  scheduler) is re-raised as :class:`TrainerExit`;
- the scheduler stops the trial (Tune ends the thread from inside ``ray.tune.report`` with
  ``SystemExit`` and may end the actor at once): the trial leaves its runs as they are, with
  every report already in MLflow, and the driver ends them (outcome ``unsolved``, tag
  ``ortho.stopped_early``, FINISHED; :func:`sweeps.tune_run.end_stopped_runs`);
- anything else (the driver interrupted): the runs end KILLED and are replaced on resume.

Threads: a trial computes with as many threads as the CPUs Ray gave it, rounded down and at
least one (:func:`trial_threads`: 1 for ``resources.cpu`` 0.5 or 1.5, 2 for 2):
``torch.set_num_threads`` in the trial's process, and ``OMP_NUM_THREADS`` and
``MKL_NUM_THREADS`` for any process it starts. Ray sizes ``OMP_NUM_THREADS`` so only where
the node's environment leaves it unset; a value set there for every process (by an image or
a shell profile), like torch's own default of the machine's cores, makes concurrent trials
oversubscribe the CPUs, which on a 2-core machine made training 5 to 50 times slower.

``device: auto`` becomes ``cuda`` when Ray gave the trial a GPU, else ``cpu``. The trial's
last report to Tune carries the spec's metric (the best over the pack), each member's metric
(``member_values``, by trial key: what Optuna's studies are told) and counts of what it
trained, for the searcher and the progress line.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ortho_core.config import from_dict, to_dict
from ortho_core.experiments.isolation import train_isolated
from ortho_core.reporting import Outcome, Report, Result
from sweeps import contract, tracking
from sweeps.tracking import SweepRef
from sweeps.writer import MetricRow, RemoteTracker

FLUSH_METRICS = 1000
"""Buffered metric values per member that trigger a flush (a pack of K flushes at K times
this, or after :data:`FLUSH_SECONDS`, whichever comes first). A count over the whole pack
would make a large pack flush a few values per member at every report; MLflow's SQL store
spends about 4 ms a ``log_batch`` call besides its cost per value, so the sweep's one writer
would spend most of its time on calls (``benchmarks/tracking_writer.py --pack``). A member
reports a few values per evaluation, so in a large pack the clock comes first and each run's
batch holds the reports of :data:`FLUSH_SECONDS`; a trial of one configuration flushes as
before."""
FLUSH_SECONDS = 10.0
"""Longest a reported value waits before it reaches MLflow (the UI shows live runs)."""
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""What sizes the thread pools of processes a trial starts."""


@dataclass(frozen=True)
class TrialContext:
    """What every trial of a sweep shares (passed with ``tune.with_parameters``)."""

    writer: Any
    """The handle of the sweep's writer (:func:`sweeps.writer.start_writer`)."""
    sweep: SweepRef
    """The sweep's parent run."""
    module: str
    """The trainer's module path."""
    metric: str
    """The spec's metric (a ``Result.summary`` key)."""
    mode: str
    """``max`` or ``min``."""
    cpus: float = 1.0
    """CPUs Ray reserves for each trial (the spec's ``resources.cpu``)."""
    step_metric: str | None = None
    """The scheduler's per-report metric, forwarded to Tune at every report (None: no
    scheduler, and Tune hears from the trial once, at its end)."""
    run_tags: Mapping[str, str] = field(default_factory=dict)
    """Tags of every configuration's run: the code's provenance
    (:meth:`sweeps.provenance.Provenance.tags`)."""


class TrainerExit(RuntimeError):
    """A trainer ended its pack with a ``SystemExit`` that the scheduler did not raise (a
    library calling ``sys.exit``). :func:`run_trial` fails the runs with the trainer's
    traceback and raises this in its place. Re-raised as it was, a ``SystemExit(0)`` would
    be read by Ray's thread runner as the end of the function (``ray.air._internal.util.
    RunnerThread``), and Tune would then fail the trial with an error of its own that names
    no cause ("Should not have reached here"), after the runs had been left RUNNING and then
    ended as lost (:data:`sweeps.tune_run.LOST`)."""


def trial_threads(cpus: float) -> int:
    """Threads of a trial given ``cpus`` CPUs: rounded down, at least one."""
    return max(1, math.floor(cpus))


def limit_threads(cpus: float) -> int:
    """Size this process's torch thread pool, and that of processes it starts, for a trial
    given ``cpus`` CPUs; the number of threads."""
    import torch

    n = trial_threads(cpus)
    torch.set_num_threads(n)
    for name in THREAD_ENV:
        os.environ[name] = str(n)
    return n


def resolve_device(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with ``device: auto`` replaced by ``cuda`` if this trial holds a GPU."""
    if params.get("device", "cpu") != "auto":
        return dict(params)
    import ray

    return {**params, "device": "cuda" if ray.get_gpu_ids() else "cpu"}


class Recorder:
    """The trainer's reporter: buffers each member's metrics for MLflow (flushed in
    batches) and keeps the rows of its metrics CSV."""

    def __init__(self, tracker: RemoteTracker, run_ids: Sequence[str],
                 context: TrialContext) -> None:
        self.tracker = tracker
        self.run_ids = list(run_ids)
        self.context = context
        self.last_forwarded: dict[str, float] = {}
        """The last report sent to Tune's scheduler (``step`` and its metric)."""
        self.stopped = False
        """Whether the scheduler stopped the trial: Tune raised ``SystemExit`` from inside
        ``ray.tune.report``, the only place it ends a function trainable."""
        self.rows: list[list[tuple[int, dict[str, float]]]] = [[] for _ in run_ids]
        self._pending: list[list[MetricRow]] = [[] for _ in run_ids]
        self._n_pending = 0
        self.flush_values = FLUSH_METRICS * max(1, len(self.run_ids))
        """Buffered values that trigger a flush (besides :data:`FLUSH_SECONDS`)."""
        self._flushed_at = time.monotonic()

    def __call__(self, report: Report) -> None:
        now = int(time.time() * 1000)
        values = {k: float(v) for k, v in report.metrics.items()}
        self.rows[report.member].append((report.step, values))
        self._pending[report.member].extend(
            (k, v, now, report.step) for k, v in values.items())
        self._n_pending += len(values)
        if (self._n_pending >= self.flush_values
                or time.monotonic() - self._flushed_at >= FLUSH_SECONDS):
            self.flush()
        step_metric = self.context.step_metric
        if step_metric is not None and step_metric in values:
            from ray import tune

            self.last_forwarded = {step_metric: values[step_metric], "step": report.step}
            self.flush(wait=True)  # MLflow has every report before the scheduler may stop it
            # Tune requires the searcher's metric in every result; it is known at the end
            # (NaN till then), unless it is the scheduler's own, reported now.
            try:
                tune.report({self.context.metric: math.nan, **self.last_forwarded})
            except SystemExit:
                self.stopped = True
                raise

    def flush(self, wait: bool = False) -> None:
        """Send every buffered metric to MLflow; with ``wait``, until they are written."""
        if self._n_pending:
            self.tracker.log_metrics(dict(zip(self.run_ids, self._pending, strict=True)))
            self._pending = [[] for _ in self.run_ids]
        if wait:
            self.tracker.sync()
        self._n_pending = 0
        self._flushed_at = time.monotonic()

    def last_step(self, member: int) -> int:
        """The last step ``member`` reported (0 if none)."""
        return self.rows[member][-1][0] if self.rows[member] else 0


def best(values: Sequence[float | None], mode: str) -> float:
    """The best finite value under ``mode``, or NaN if there is none: a diverged member's NaN
    or ±inf, or a member without a value (None), never wins, and the NaN of a pack without
    one reads as no value to the searcher and the progress line."""
    finite = [v for v in map(contract.finite_or_none, values) if v is not None]
    if not finite:
        return math.nan
    return max(finite) if mode == "max" else min(finite)


def member_tags(member: Mapping[str, Any], node: Mapping[str, str]) -> dict[str, str]:
    """The tags of a pack member's run: ``node``'s (where it runs, the code's provenance),
    its cell, its Optuna point and its run name where it has them."""
    tags = {**node, tracking.CELL: str(member["cell"])}
    if member.get("optuna") is not None:
        tags[tracking.OPTUNA_PARAMS] = json.dumps(member["optuna"])
    if member.get("name"):
        tags[contract.RUN_NAME] = member["name"]
    return tags


def budget_tag(module: Any, config: Any) -> str:
    """The :data:`~sweeps.contract.BUDGET` tag of a member's run: its experiment's
    ``planned_steps`` and, where the experiment has one, ``ends_early``."""
    ends_early = getattr(module, "ends_early", None)
    return json.dumps({"steps": int(module.planned_steps(config)),
                       "ends_early": bool(ends_early is not None and ends_early(config))})


def _fail_all(tracker: RemoteTracker, run_ids: Sequence[str], recorder: Recorder) -> None:
    """End every run of the pack FAILED with the traceback being handled."""
    error = traceback.format_exc()
    recorder.flush()
    for j, run_id in enumerate(run_ids):
        tracker.fail(run_id, error, recorder.rows[j])


def run_trial(config: dict[str, Any], context: TrialContext) -> None:
    """Train one pack (Ray Tune function trainable; see the module docstring)."""
    from ray import tune

    limit_threads(context.cpus)
    module = importlib.import_module(context.module)
    members = config["members"]
    tracker = RemoteTracker(context.writer)
    node = {**context.run_tags, **tracking.node_tags()}
    configs = [from_dict(module.Config, resolve_device(m["params"])) for m in members]
    claims = tracker.claim_all(context.sweep, [
        (member["key"], to_dict(cfg),
         {**member_tags(member, node), contract.BUDGET: budget_tag(module, cfg)})
        for member, cfg in zip(members, configs, strict=True)])
    results: list[Result | None] = [claim.stored for claim in claims]
    todo = [i for i, claim in enumerate(claims) if claim.stored is None]
    run_ids = [claims[i].run_id for i in todo]
    forwarded: dict[str, float] = {}
    if todo:
        recorder = Recorder(tracker, run_ids, context)
        try:
            trained = train_isolated(module.train, [configs[i] for i in todo], recorder)
            ended = list(zip(todo, run_ids, trained, strict=True))
        except SystemExit as err:
            if recorder.stopped:
                raise  # by the scheduler: the driver ends the runs (the actor may go now)
            _fail_all(tracker, run_ids, recorder)
            raise TrainerExit(f"the trainer of {context.module} raised "
                              f"SystemExit({err.code!r})") from err
        except Exception:
            _fail_all(tracker, run_ids, recorder)
            raise
        except BaseException:
            recorder.flush()
            for run_id in run_ids:
                tracker.kill(run_id)
            raise
        recorder.flush()
        for j, (i, run_id, result) in enumerate(ended):
            if result.outcome is Outcome.FAILED:
                tracker.fail(run_id, result.error or "", recorder.rows[j])
            results[i] = result
        tracker.finish_all([(run_id, result, recorder.last_step(j), recorder.rows[j])
                            for j, (_, run_id, result) in enumerate(ended)
                            if result.outcome is not Outcome.FAILED])
        forwarded = recorder.last_forwarded
    values = [tracking.metric_value(r.summary, context.metric) for r in results if r]
    final = {context.metric: best(values, context.mode), "configs": len(members),
             "trained": len(todo), "done": True,
             "configs_failed": sum(r is not None and r.outcome is Outcome.FAILED for r in results),
             "member_values": {m["key"]: best([tracking.metric_value(r.summary, context.metric)],
                                              context.mode)
                               for m, r in zip(members, results, strict=True) if r}}
    if context.step_metric is not None:
        final = {context.step_metric: math.nan, "step": 0, **forwarded, **final}
    tune.report(final)
