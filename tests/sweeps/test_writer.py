"""The sweep's one writer: trials in other processes track through it, what they send is
what MLflow holds, its errors reach the trial, and claims of one configuration from trials
racing each other leave one run (on every kind of store)."""

from __future__ import annotations

import io
import sys
import time

import pytest
import ray

from ortho_core.reporting import Outcome, Result
from sweeps import tracking
from sweeps.testing import start_sweep
from sweeps.writer import RemoteTracker, drain_writer, start_writer
from tests.sweeps.helpers import toy_ray

pytestmark = pytest.mark.usefixtures(toy_ray.__name__)


@ray.remote(num_cpus=0, max_calls=1)
def _trial(writer, ref, key):
    """A trial in a fresh worker process: claim, two batches without waiting, finish."""
    tracker = RemoteTracker(writer)
    claim = tracker.claim(ref, key, {"lr": 0.25, "hidden": 8}, {tracking.CELL: "3"})
    tracker.log_metrics({claim.run_id: [("loss", 1.0, 1000, 10), ("loss", 0.5, 1001, 20)]})
    tracker.log_metrics({claim.run_id: [("loss", 0.25, 1002, 30)]})
    rows = [(10, {"loss": 1.0}), (20, {"loss": 0.5}), (30, {"loss": 0.25})]
    tracker.finish(claim.run_id, Result(Outcome.SOLVED, {"score": 0.75}), 30, rows)
    return claim.run_id, "mlflow" in sys.modules


def test_a_trial_tracks_through_the_writer_without_opening_the_store(store):
    tracker = tracking.tracker(store.uri)
    ref = start_sweep(tracker, "writer", "s-1", profile="smoke")
    writer = start_writer(store.uri, "ortho-writer-test-1")
    try:
        assert ray.get(writer.ready.remote()) == ray.get_runtime_context().get_node_id()
        run_id, imported_mlflow = ray.get(_trial.remote(writer, ref, "k1"))
    finally:
        ray.kill(writer)
    assert not imported_mlflow
    run = tracker.client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params == {"lr": "0.25", "hidden": "8"}
    assert run.data.tags[tracking.CELL] == "3"
    assert run.data.tags[tracking.OUTCOME] == "solved"
    history = tracker.client.get_metric_history(run_id, "loss")
    assert sorted((m.step, m.value) for m in history) == [(10, 1.0), (20, 0.5), (30, 0.25)]
    assert run.data.metrics["score"] == 0.75
    assert tracker.history_rows(run_id)[-1] == (30, {"loss": 0.25, "score": 0.75})


def test_an_error_of_the_store_reaches_the_trial(store):
    tracker = tracking.tracker(store.uri)
    ref = start_sweep(tracker, "writer", "s-2", profile="smoke")
    writer = start_writer(store.uri, "ortho-writer-test-2")
    remote = RemoteTracker(writer)
    try:
        remote.log_metrics({"0" * 32: [("loss", 1.0, 1000, 1)]})  # no such run
        with pytest.raises(ray.exceptions.RayTaskError, match="0" * 32):
            remote.sync()
        claim = remote.claim(ref, "k", {}, {})
        remote.log_metrics({"0" * 32: [("loss", 1.0, 1000, 1)]})
        # an ending waits for earlier batches, and raises their error
        with pytest.raises(ray.exceptions.RayTaskError, match="0" * 32):
            remote.kill(claim.run_id)
    finally:
        ray.kill(writer)


@ray.remote(num_cpus=0)
def _claim(writer, ref, key):
    return RemoteTracker(writer).claim(ref, key, {"x": 1}, {}).run_id


def test_racing_claims_of_one_configuration_leave_one_run(store):
    tracker = tracking.tracker(store.uri)
    ref = start_sweep(tracker, "writer", "s-3", profile="smoke")
    writer = start_writer(store.uri, "ortho-writer-test-3")
    try:
        claimed = ray.get([_claim.remote(writer, ref, "same-key") for _ in range(6)])
    finally:
        ray.kill(writer)
    runs = tracker.configurations(ref)
    assert len(set(claimed)) == 6  # each claim replaced the run before it ...
    assert len(runs) == 1 and runs[0].info.run_id in claimed  # ... and one is left,
    assert runs[0].data.tags[tracking.ATTEMPT] == "6"  # having seen the five before it


def test_a_pack_s_endings_all_reach_the_store_though_one_is_refused(store):
    """A member's run deleted meanwhile (from the UI): its ending's error reaches the trial,
    after the other members' endings are written, on every kind of store."""
    tracker = tracking.tracker(store.uri)
    ref = start_sweep(tracker, "writer", "s-4", profile="smoke")
    writer = start_writer(store.uri, "ortho-writer-test-4")
    remote = RemoteTracker(writer)
    try:
        claims = remote.claim_all(ref, [(f"k{i}", {"i": i}, {}) for i in range(3)])
        tracker.client.delete_run(claims[0].run_id)
        with pytest.raises(ray.exceptions.RayTaskError):
            remote.finish_all([(c.run_id, Result(Outcome.SOLVED, {"score": float(i)}), 1, [])
                               for i, c in enumerate(claims)])
    finally:
        ray.kill(writer)
    assert [tracker.client.get_run(c.run_id).info.status for c in claims[1:]] == ["FINISHED"] * 2


@ray.remote(num_cpus=0)
class _SlowDrain:
    """A writer whose writes take a while to drain, as through a tracking outage."""

    def drain(self) -> list[str]:
        time.sleep(1.0)
        return ["rode out a tracking outage of 1 s"]


def test_a_long_drain_at_the_end_of_a_sweep_says_why_it_waits(monkeypatch):
    monkeypatch.setattr("sweeps.writer.DRAIN_NOTICE_S", 0.2)
    out = io.StringIO()
    actor = _SlowDrain.remote()
    try:
        drain_writer(actor, out)
    finally:
        ray.kill(actor)
    waiting, said = out.getvalue().splitlines()
    assert waiting.startswith("tracking: waiting for the store to take the writes")
    assert "a second Ctrl-C leaves them unwritten" in waiting
    assert said == "tracking: rode out a tracking outage of 1 s"


def test_the_gauge_reads_how_far_the_running_configurations_are_without_waiting(store):
    """The driver's gauge asks the writer and returns at once: None until the answer is in,
    then the running configurations' share of their planned steps (one at step 30 of 40, one
    at 10 of 40: 50 %), on every kind of store; a second ask waits for its interval, unless a
    trial's end invalidates the figure."""
    from mlflow.entities import Metric

    from sweeps import contract
    from sweeps.status import InFlight
    from sweeps.tune_progress import InFlightGauge

    tracker = tracking.tracker(store.uri)
    ref = start_sweep(tracker, "writer", "s-5", profile="smoke")
    budget = '{"steps": 40, "ends_early": false}'
    runs = [tracker.claim(ref, k, {}, {contract.BUDGET: budget}).run_id for k in "ab"]
    for run_id, step in zip(runs, (30, 10), strict=True):
        tracker.client.log_batch(run_id, metrics=[Metric("loss", 1.0, 0, step)])
    writer = start_writer(store.uri, "ortho-writer-test-5")
    try:
        gauge = InFlightGauge(writer, ref, interval=3600.0)
        asked = time.monotonic()
        assert gauge() is None  # asked, not waited for
        assert time.monotonic() - asked < 0.5
        deadline = time.monotonic() + 60
        while gauge() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gauge.latest == InFlight(0.5, False)
        tracker.client.log_batch(runs[1], metrics=[Metric("loss", 1.0, 1, 30)])
        time.sleep(0.5)
        assert gauge() == InFlight(0.5, False)  # not asked again within its interval
        gauge.invalidate()  # a trial ended: asked again at once, the old figure forgotten
        assert gauge() is None
        while gauge() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gauge.latest == InFlight(0.75, False)
    finally:
        ray.kill(writer)
