"""Progress of a sweep: the progress callback's heartbeat, and what MLflow says of a sweep
whose driver runs, was killed, or ended (``sweeps.status``), without Ray."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import time

import pytest

from ortho_core.reporting import Outcome, Result
from sweeps import tracking
from sweeps.status import Progress, ProgressCallback, format_line, from_mlflow, state_of
from tests.sweeps.helpers import new_home


def _progress() -> Progress:
    return Progress(sweep_id="s", label="toy/smoke", metric="score", mode="max", total=3)


def test_the_progress_callback_beats_every_interval():
    beats: list[float] = []
    callback = ProgressCallback(_progress(), io.StringIO(), beat=lambda: beats.append(1),
                                beat_interval=0.2)
    callback.on_step_end(0, [])
    assert beats == []  # not before an interval has passed
    time.sleep(0.25)
    callback.on_step_end(1, [])
    callback.on_step_end(2, [])
    assert beats == [1]
    assert callback.__getstate__()["beat"] is None  # Tune pickles callbacks: no tracker


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture
def sweep(tmp_path):
    """A sweep of 3 configurations: one finished, one failed, one running."""
    t = tracking.tracker(tracking.tracking_uri(None, new_home(tmp_path)))
    ref = t.start_sweep(t.experiment_id("toy"), "s", {
        tracking.SPEC: "toy", tracking.PROFILE: "smoke", tracking.N_CONFIGS: "3",
        tracking.METRIC: "score", tracking.MODE: "max"}, {})
    done = t.claim(ref, "a", {}, {})
    t.finish(done.run_id, Result(Outcome.SOLVED, {"score": 4.0}), 0, [])
    t.fail(t.claim(ref, "b", {}, {}).run_id, "boom")
    t.claim(ref, "c", {}, {})
    return t, ref


def test_a_sweep_with_a_live_driver_is_running(sweep):
    t, _ = sweep
    record = t.find_sweep("s")
    p = from_mlflow(t, record)
    assert state_of(record) == p.state == "running"
    assert (p.done, p.failed, p.running, p.best) == (2, 1, 1, 4.0)
    assert format_line(p).startswith("sweep s toy/smoke: 2/3 done (1 failed), 1 running, "
                                     "best score 4, ")


def test_a_sweep_whose_driver_died_is_interrupted(sweep):
    t, ref = sweep
    t.client.set_tag(ref.parent_run_id, tracking.DRIVER,
                     f"{socket.gethostname()}:{_dead_pid()}")
    record = t.find_sweep("s")
    t.client.set_tag(ref.parent_run_id, tracking.HEARTBEAT, f"{record.start_time + 95:.0f}")
    record = t.find_sweep("s")
    assert record.status == "RUNNING"  # as the killed driver left it
    p = from_mlflow(t, record)
    assert state_of(record) == p.state == "interrupted"
    assert (p.done, p.running) == (2, 0)
    assert p.elapsed == pytest.approx(95, abs=1)  # up to its last heartbeat
    assert "interrupted after 1m35s" in format_line(p)


def test_a_sweep_elsewhere_is_running_while_its_heartbeat_is_recent(sweep):
    t, ref = sweep
    t.client.set_tag(ref.parent_run_id, tracking.DRIVER, f"not-{socket.gethostname()}:1")
    assert state_of(t.find_sweep("s")) == "running"
    stale = time.time() - tracking.ALIVE_SECONDS - 5
    t.client.set_tag(ref.parent_run_id, tracking.HEARTBEAT, f"{stale:.0f}")
    assert state_of(t.find_sweep("s")) == "interrupted"


def test_an_ended_sweep_is_finished_or_interrupted(sweep):
    t, ref = sweep
    t.end_sweep(ref, "KILLED", {})
    assert state_of(t.find_sweep("s")) == "interrupted"  # even with its driver (us) alive
    t.end_sweep(ref, "FINISHED", {})
    assert state_of(t.find_sweep("s")) == "finished"
    assert os.getpid() == int(t.find_sweep("s").driver.rpartition(":")[2])
