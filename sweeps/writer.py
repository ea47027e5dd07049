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

Calls keep a trial's order (a Ray actor runs one caller's tasks in the order they were
sent). Metrics go out without waiting (:meth:`RemoteTracker.log_metrics`), at most one batch
of a trial in flight, so a trial trains while its last batch is written and a slow store
slows it down rather than letting batches pile up; claims and endings wait for the writer,
and for every batch sent before them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ortho_core.reporting import Result
from sweeps import tracking
from sweeps.tracking.records import Claim, SweepRef

MetricRow = tuple[str, float, int, int]
"""One metric value as a trial sends it: name, value, timestamp (ms), step."""


class TrackerActor:
    """The writer (a Ray actor, one per Tune run): a :class:`~sweeps.tracking.Tracker` of
    ``uri``, reached by Ray calls."""

    def __init__(self, uri: str) -> None:
        self.tracker = tracking.tracker(uri)

    def ready(self) -> str:
        """The node this writer runs on (once its store is open)."""
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def claim(self, ref: SweepRef, key: str, params: Mapping[str, Any],
              tags: Mapping[str, str]) -> Claim:
        """:meth:`~sweeps.tracking.Tracker.claim`."""
        return self.tracker.claim(ref, key, params, tags)

    def log_metrics(self, batches: Mapping[str, Sequence[MetricRow]]) -> None:
        """Log each run's metric rows (run id -> rows)."""
        from mlflow.entities import Metric

        for run_id, rows in batches.items():
            self.tracker.log_metrics(run_id, [Metric(*row) for row in rows])

    def finish(self, run_id: str, result: Result, step: int,
               rows: Sequence[tuple[int, Mapping[str, float]]]) -> None:
        """:meth:`~sweeps.tracking.Tracker.finish`."""
        self.tracker.finish(run_id, result, step, rows)

    def fail(self, run_id: str, error: str,
             rows: Sequence[tuple[int, Mapping[str, float]]] = ()) -> None:
        """:meth:`~sweeps.tracking.Tracker.fail`."""
        self.tracker.fail(run_id, error, rows)

    def kill(self, run_id: str) -> None:
        """:meth:`~sweeps.tracking.Tracker.kill`."""
        self.tracker.kill(run_id)


class StartingWriter:
    """A writer whose actor is starting (:func:`launch_writer`): its handle can be handed
    to trials at once; :meth:`ready` waits until it has opened the store."""

    def __init__(self, actor: Any, node: str) -> None:
        self.actor = actor
        """The writer's actor handle."""
        self.node = node
        """The node it must run on (the driver's)."""
        self._placed = actor.ready.remote()

    def ready(self) -> Any:
        """The actor handle, once the writer runs on :attr:`node` with its store open; the
        error that stopped it otherwise (an unreachable store raises here)."""
        import ray

        placed = ray.get(self._placed)
        if placed != self.node:
            raise RuntimeError(f"the sweep's writer started on node {placed}, not on the "
                               f"driver's {self.node}")
        return self.actor


def launch_writer(uri: str, name: str) -> StartingWriter:
    """Start the writer of ``uri`` on this process's node, named ``name`` in Ray's dashboard,
    without waiting for it: its process starts and opens the store while the driver goes on
    (:meth:`StartingWriter.ready` waits, and raises its errors)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node = ray.get_runtime_context().get_node_id()
    actor = ray.remote(TrackerActor).options(
        name=name, num_cpus=0, max_concurrency=1,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False),
    ).remote(uri)
    return StartingWriter(actor, node)


def start_writer(uri: str, name: str) -> Any:
    """Start the writer of ``uri`` on this process's node, named ``name`` in Ray's dashboard;
    its actor handle, once it runs there and has opened the store (an unreachable store
    raises here, before any trial starts)."""
    return launch_writer(uri, name).ready()


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

    def finish(self, run_id: str, result: Result, step: int,
               rows: Sequence[tuple[int, Mapping[str, float]]]) -> None:
        """:meth:`TrackerActor.finish`."""
        self._call("finish", run_id, result, step, list(rows))

    def fail(self, run_id: str, error: str,
             rows: Sequence[tuple[int, Mapping[str, float]]] = ()) -> None:
        """:meth:`TrackerActor.fail`."""
        self._call("fail", run_id, error, list(rows))

    def kill(self, run_id: str) -> None:
        """:meth:`TrackerActor.kill`."""
        self._call("kill", run_id)
