"""The sweep's one writer: a Ray actor on the driver's node through which every trial tracks
its runs (cluster/README.md, "What an operator provides, and what is refused").

Trials never open the tracking store. Each trial holds a :class:`RemoteTracker`, which
forwards the trial's claims, metrics and endings to a :class:`TrackerActor` that the driver
starts on its own node (:func:`start_writer`: hard node affinity, no CPU), where it is the one
:class:`~sweeps.tracking.Tracker` of the trials. So:

- the embedded SQLite default works on any cluster: the database is written on the driver's
  node only, and a worker's own disk never receives a run (``mlflow.db`` of a worker's home
  would be a store the driver never reads);
- workers need no route to a tracking server and no credentials for it, and do not import
  MLflow;
- claims of one sweep are serialised in one process, so two trials can never both create a
  run of one configuration, whatever the store;
- a tracking outage touches one process.

Into a SQLite or PostgreSQL store, the writer writes params, metric values and endings
straight into MLflow's tables (:mod:`sweeps.tracking.tables`: the rows MLflow's client
writes, at a fraction of its cost), all metric values of a flush in one transaction; into a
tracking server, through MLflow's client.

Every write goes through the writer's outbox (:mod:`sweeps.tracking.outbox`), applied
one at a time in the order it arrived; a trial has at most one call in flight (each waits
for the one before it), so its writes keep its order. Metrics go out without waiting
(:meth:`RemoteTracker.log_metrics`): the trial trains while its last batch is written, and
a slow store slows it down rather than letting batches pile up. Claims wait until they are
applied; endings until they are applied or held. During an outage of a tracking server the
outbox holds what the trials send, in order, and sends it when the server is back, so trials
keep training and a claim waits for the server (up to the outbox's limit,
``$ORTHO_TRACKING_OUTAGE_S``, 10 minutes by default; beyond it, see the outbox's docstring).
The driver drains the outbox before it reads the runs back (:func:`drain_writer`).

A write tried again after an attempt that may have reached the server is sent so that
nothing is applied twice: a metric batch (one ``log_batch``, which MLflow applies whole or
not at all) only if the last of its values is not in the run's history yet
(:meth:`TrackerActor.logged`); an ending only for the part not done yet
(:meth:`TrackerActor.finish_again`). MLflow's own retries are off in the writer's process
(:data:`WRITER_HTTP_ENV`), whose outbox retries instead: they would re-send a request whose
answer was lost without that check, and block every trial for minutes.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, TextIO

from ortho_core.reporting import Result
from sweeps import contract, tracking
from sweeps.tracking.layout import BATCH, Rows
from sweeps.tracking.outbox import OUTAGE_ENV, RETRY_MAX_S, Limits, Outbox, Write
from sweeps.tracking.records import Claim, SweepRef

MetricRow = tuple[str, float, int, int]
"""One metric value as a trial sends it: name, value, timestamp (ms), step."""

WRITER_HTTP_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "60"}
"""MLflow's HTTP settings in the writer's process (for a tracking server): no retries of its
own (the outbox retries), and an attempt given up after a minute."""

MAX_CALLERS = 256
"""Calls the writer serves at once (trials waiting for their writes; more wait in line)."""


def is_server(uri: str) -> bool:
    """Whether ``uri`` names a tracking server (``http(s)://``), whose outages are waited
    out, rather than a store the writer opens itself."""
    return uri.startswith(("http://", "https://"))


def _same(stored: float, sent: float) -> bool:
    """Whether a value MLflow returns is the one sent (it stores NaN as a flag, infinities
    as the largest finite floats)."""
    if math.isnan(sent):
        return math.isnan(stored)
    if math.isinf(sent):
        return abs(stored) >= contract.STORED_INFINITY and (stored > 0) == (sent > 0)
    return stored == sent


class TrackerActor:
    """The writer (a Ray actor, one per Tune run): a :class:`~sweeps.tracking.Tracker` of
    ``uri`` behind an :class:`~sweeps.tracking.outbox.Outbox` with ``limits``, reached by
    Ray calls; ``http_env`` is set in its process first (:data:`WRITER_HTTP_ENV`);
    ``direct=False`` writes every run through MLflow's client, never straight into the
    store's tables (:attr:`~sweeps.tracking.Tracker.direct`)."""

    def __init__(self, uri: str, limits: Limits | None = None,
                 http_env: Mapping[str, str] | None = None, direct: bool = True) -> None:
        os.environ.update(http_env or {})
        self.tracker = tracking.tracker(uri)
        self.tracker.direct = direct
        self.outbox = Outbox(limits or Limits(), outages=is_server(uri), mark_lost=self.mark_lost)

    def ready(self) -> str:
        """The node this writer runs on (once its store is open)."""
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def claim(self, ref: SweepRef, key: str, params: Mapping[str, Any],
              tags: Mapping[str, str]) -> Claim:
        """:meth:`~sweeps.tracking.Tracker.claim` (a claim tried again finds the run an
        earlier attempt may have made and replaces it, as any claim does)."""
        return self.claim_all(ref, [(key, params, tags)])[0]

    def claim_all(self, ref: SweepRef,
                  items: Sequence[tuple[str, Mapping[str, Any], Mapping[str, str]]]
                  ) -> list[Claim]:
        """:meth:`~sweeps.tracking.Tracker.claim_all`: a pack's claims in one write into
        the tables; through a server, a write per claim (each kept once applied, so that a
        request refused for a moment repeats one claim, not the pack's)."""
        if self.tracker.tables is not None:
            return self.outbox.call(Write(None, partial(self.tracker.claim_all, ref, items)))
        return [self.outbox.call(Write(None, partial(self.tracker.claim, ref, *item)))
                for item in items]

    def log_metrics(self, batches: Mapping[str, Sequence[MetricRow]]) -> None:
        """Log each run's metric rows (run id -> rows): into the tables of a database the
        writer opens itself (:attr:`~sweeps.tracking.Tracker.tables`), all in one write;
        else in ``log_batch`` calls of at most :data:`~sweeps.tracking.layout.BATCH`
        values."""
        from mlflow.entities import Metric

        tables = self.tracker.tables
        if tables is not None:
            entities = {run_id: [Metric(*row) for row in rows]
                        for run_id, rows in batches.items()}
            self.outbox.put([Write(None, partial(self.tracker.call, tables.write_metrics,
                                                 entities),
                                   values=sum(map(len, entities.values())))])
            return
        writes = []
        for run_id, rows in batches.items():
            metrics = [Metric(*row) for row in rows]
            for i in range(0, len(metrics), BATCH):
                chunk = metrics[i:i + BATCH]
                writes.append(Write(run_id, partial(self.log_batch, run_id, chunk),
                                    again=partial(self.log_batch_again, run_id, chunk),
                                    values=len(chunk)))
        self.outbox.put(writes)

    def log_batch(self, run_id: str, metrics: Sequence[Any]) -> None:
        """One ``log_batch`` of MLflow ``Metric`` entities."""
        self.tracker.call(self.tracker.client.log_batch, run_id, metrics=list(metrics))

    def logged(self, run_id: str, metric: Any) -> bool:
        """Whether the run's history holds ``metric`` (same step, timestamp and value)."""
        history = self.tracker.call(self.tracker.client.get_metric_history, run_id, metric.key)
        return any(m.step == metric.step and m.timestamp == metric.timestamp
                   and _same(m.value, metric.value) for m in history)

    def log_batch_again(self, run_id: str, metrics: Sequence[Any]) -> None:
        """:meth:`log_batch` unless an earlier attempt applied it (its last value is there:
        a batch is applied whole or not at all)."""
        if not self.logged(run_id, metrics[-1]):
            self.log_batch(run_id, metrics)

    def finish(self, run_id: str, result: Result, step: int,
               rows: Sequence[tuple[int, Mapping[str, float]]]) -> None:
        """:meth:`~sweeps.tracking.Tracker.finish`."""
        self.outbox.put([self._ending(run_id, result, step, rows)])

    def _ending(self, run_id: str, result: Result, step: int,
                rows: Sequence[tuple[int, Mapping[str, float]]]) -> Write:
        at = int(time.time() * 1000)  # one stamp for every attempt: see finish_again
        return Write(run_id, partial(self.tracker.finish, run_id, result, step, rows, at=at),
                     again=partial(self.finish_again, run_id, result, step, rows, at), calls=2)

    def finish_all(self, ends: Sequence[tuple[str, Result, int, Rows]]) -> None:
        """:meth:`finish` of each (run id, result, step, rows): into the tables, one write;
        else a write per run, all queued before any is waited for, so that a run whose
        ending the server refuses (its error raises once all are applied) costs the others
        nothing."""
        if self.tracker.tables is None:
            self.outbox.put([self._ending(*end) for end in ends])
            return
        self.outbox.put([Write(None, partial(self.tracker.finish_all, ends))])

    def finish_again(self, run_id: str, result: Result, step: int,
                     rows: Sequence[tuple[int, Mapping[str, float]]], at: int) -> None:
        """The rest of a :meth:`finish` that may have got part way: nothing for a FINISHED
        run; only its status once its outcome is set (the summaries and the outcome are one
        ``log_batch``, the status the last call); all of it otherwise (its artifacts are
        overwritten, not doubled). A server applies a ``log_batch``'s metrics and its tags in
        transactions of their own, so the summaries may be stored without the outcome: they
        are sent again stamped ``at`` as the first attempt was, identical rows that MLflow
        drops, not a second point at the same step."""
        run = self.tracker.call(self.tracker.client.get_run, run_id)
        if run.info.status == "FINISHED":
            return
        if contract.OUTCOME in run.data.tags:
            self.tracker.call(self.tracker.client.set_terminated, run_id, "FINISHED")
            return
        self.tracker.finish(run_id, result, step, rows, at=at)

    def fail(self, run_id: str, error: str,
             rows: Sequence[tuple[int, Mapping[str, float]]] = ()) -> None:
        """:meth:`~sweeps.tracking.Tracker.fail` (its calls overwrite: done twice, it is
        done once)."""
        self.outbox.put([Write(run_id, partial(self.tracker.fail, run_id, error, rows))])

    def kill(self, run_id: str) -> None:
        """:meth:`~sweeps.tracking.Tracker.kill`."""
        self.outbox.put([Write(run_id, partial(self.tracker.kill, run_id))])

    def heartbeat(self, ref: SweepRef) -> None:
        """:meth:`~sweeps.tracking.Tracker.heartbeat` of the driver, in line with the trials'
        writes (the driver does not wait for it: an outage holds it, not the driver)."""
        self.outbox.put([Write(None, partial(self.tracker.heartbeat, ref))])

    def running_steps(self, ref: SweepRef) -> list[tuple[str, str | None, int | None]]:
        """:meth:`~sweeps.tracking.Tracker.running_steps`, read at once (a read: not in the
        outbox's order), for the driver's progress line, which does not wait for it."""
        return self.tracker.running_steps(ref)

    def mark_lost(self, run_id: str, why: str) -> None:
        """Mark a run whose writes an outage cost as failed, saying why."""
        self.tracker.fail(run_id, f"TrackingOutage: {why}, so writes of this run were dropped; "
                          "`ortho sweep resume` trains it again.\n")

    def drain(self, timeout: float | None = None) -> list[str]:
        """Wait until every write is applied (at most ``timeout`` seconds, default the
        outbox's outage limit and a little); what went wrong, one line each."""
        limit = self.outbox.limits.outage_s + 2 * RETRY_MAX_S
        return self.outbox.drain(limit if timeout is None else timeout)


class StartingWriter:
    """A writer whose actor is starting (:func:`launch_writer`): its handle can be handed
    to trials at once; :meth:`ready` waits until it has opened the store."""

    def __init__(self, actor: Any, node: str) -> None:
        self.actor = actor
        """The writer's actor handle."""
        self.node = node
        """The node it must run on (the driver's)."""
        self._placed = actor.ready.remote()

    def settled(self) -> bool:
        """Whether the writer has started or failed to (:meth:`ready` would not wait)."""
        import ray

        done, _ = ray.wait([self._placed], timeout=0)
        return bool(done)

    def ready(self) -> Any:
        """The actor handle, once the writer runs on :attr:`node` with its store open; the
        error that stopped it otherwise (an unreachable store raises here)."""
        import ray

        placed = ray.get(self._placed)
        if placed != self.node:
            raise RuntimeError(f"the sweep's writer started on node {placed}, not on the "
                               f"driver's {self.node}")
        return self.actor


def launch_writer(uri: str, name: str, direct: bool = True) -> StartingWriter:
    """Start the writer of ``uri`` on this process's node, named ``name`` in Ray's dashboard,
    without waiting for it: its process starts and opens the store while the driver goes on
    (:meth:`StartingWriter.ready` waits, and raises its errors). Its outage limits are this
    process's (:meth:`~sweeps.tracking.outbox.Limits.from_env`: a bad value is a
    ``ConfigError``); ``direct``: see :class:`TrackerActor`."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node = ray.get_runtime_context().get_node_id()
    actor = ray.remote(TrackerActor).options(
        name=name, num_cpus=0, max_concurrency=MAX_CALLERS,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False),
    ).remote(uri, Limits.from_env(), WRITER_HTTP_ENV if is_server(uri) else {}, direct)
    return StartingWriter(actor, node)


def start_writer(uri: str, name: str, direct: bool = True) -> Any:
    """Start the writer of ``uri`` on this process's node, named ``name`` in Ray's dashboard;
    its actor handle, once it runs there and has opened the store (an unreachable store
    raises here, before any trial starts); ``direct``: see :class:`TrackerActor`."""
    return launch_writer(uri, name, direct).ready()


class RemoteTracker:
    """What a trial tracks with: the writer's calls (see the module docstring)."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self._in_flight: Any = None

    def sync(self) -> None:
        """Wait until the metrics sent so far are written (their error, if any, raises)."""
        import ray

        if self._in_flight is not None:
            pending, self._in_flight = self._in_flight, None
            ray.get(pending)

    def _call(self, method: str, *args: Any) -> Any:
        import ray

        self.sync()
        return ray.get(getattr(self.actor, method).remote(*args))

    def claim(self, ref: SweepRef, key: str, params: Mapping[str, Any],
              tags: Mapping[str, str]) -> Claim:
        """:meth:`TrackerActor.claim`."""
        return self._call("claim", ref, key, dict(params), dict(tags))

    def log_metrics(self, batches: Mapping[str, Sequence[MetricRow]]) -> None:
        """Send each run's metric rows, once the previous batch is written."""
        self.sync()
        self._in_flight = self.actor.log_metrics.remote(
            {run_id: list(rows) for run_id, rows in batches.items() if rows})

    def claim_all(self, ref: SweepRef,
                  items: Sequence[tuple[str, Mapping[str, Any], Mapping[str, str]]]
                  ) -> list[Claim]:
        """:meth:`TrackerActor.claim_all`."""
        return self._call("claim_all", ref, [(k, dict(p), dict(t)) for k, p, t in items])

    def finish(self, run_id: str, result: Result, step: int,
               rows: Sequence[tuple[int, Mapping[str, float]]]) -> None:
        """:meth:`TrackerActor.finish`."""
        self._call("finish", run_id, result, step, list(rows))

    def finish_all(self, ends: Sequence[tuple[str, Result, int, Rows]]) -> None:
        """:meth:`TrackerActor.finish_all` (nothing to send for no runs)."""
        if ends:
            self._call("finish_all",
                       [(r, res, step, list(rows)) for r, res, step, rows in ends])

    def fail(self, run_id: str, error: str,
             rows: Sequence[tuple[int, Mapping[str, float]]] = ()) -> None:
        """:meth:`TrackerActor.fail`."""
        self._call("fail", run_id, error, list(rows))

    def kill(self, run_id: str) -> None:
        """:meth:`TrackerActor.kill`."""
        self._call("kill", run_id)


DRAIN_NOTICE_S = 3.0
"""How long the end of a sweep waits for its writer before it says why it waits."""


def drain_writer(actor: Any, stream: TextIO) -> None:
    """Wait until the writer has applied every write (:meth:`TrackerActor.drain`), and print
    to ``stream`` what went wrong, if anything (credentials masked). A wait longer than
    :data:`DRAIN_NOTICE_S` (writes held by a tracking outage, up to its limit) is announced,
    with what a second Ctrl-C would cost."""
    import ray

    drained = actor.drain.remote()
    if not ray.wait([drained], timeout=DRAIN_NOTICE_S)[0]:
        print(f"tracking: waiting for the store to take the writes the writer still holds "
              f"(through a tracking outage, at most ${OUTAGE_ENV} seconds); a second Ctrl-C "
              "leaves them unwritten, and `ortho sweep resume` trains their runs again",
              file=stream, flush=True)
    for line in ray.get(drained):
        print(f"tracking: {tracking.redact(line)}", file=stream, flush=True)
