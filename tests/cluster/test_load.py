"""Load (issue 14, item 3): 64 trials at once, each reporting every step, into one sweep's
writer (:mod:`sweeps.writer`), in each kind of store (the embedded SQLite store and the
MLflow server on PostgreSQL: the ``store`` fixture): no run is lost or corrupt. Every run
ends FINISHED with its outcome and summary, and every metric's history holds each step
exactly once, with the value reported, in the order reported.

The trials are :func:`benchmarks.tracking_writer.load_trial`: the claim, the
:class:`~sweeps.trial.Recorder` and the finish of a real trial, through the real
:class:`~sweeps.writer.RemoteTracker` into the real writer actor, without a trainer. They run
as threads, 16 in each of 4 Ray actors (processes of their own, as trials are): the writer
sees 64 concurrent callers, each with its own tracker, as it would from 64 trial
processes, while 64 Ray workers would cost this 2-core machine a minute to start. The
throughput (metric values logged per second) is printed (``pytest -s``);
``python benchmarks/tracking_writer.py --trials 64`` measures the same load alone.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from benchmarks.tracking_writer import concurrent_load, load_value
from sweeps import tracking
from sweeps.testing import start_sweep
from sweeps.writer import start_writer
from tests.conftest import Store
from tests.sweeps.helpers import toy_ray

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures(toy_ray.__name__)]

TRIALS, PROCESSES = 64, 4
STEPS, METRICS, FLUSH_EVERY = 200, 3, 100
"""Each trial reports 3 values at each of 200 steps, sent in 2 batches (as a trial slower
than these sends a batch every :data:`sweeps.trial.FLUSH_SECONDS`), so that the batches of
every trial interleave at the writer with those of the others."""


def history(t: tracking.Tracker, run_id: str, key: str) -> list[tuple[int, int, float]]:
    """(timestamp, step, value) of every value of metric ``key`` of a run, as stored."""
    return [(m.timestamp, m.step, m.value)
            for m in t.call(t.client.get_metric_history, run_id, key)]


def test_64_concurrent_trials_lose_nothing(store: Store) -> None:
    t = tracking.tracker(store.uri)
    ref = start_sweep(t, "load", f"load-{store.kind}", profile="smoke")
    writer = start_writer(store.uri, f"ortho-writer-load-{store.kind}")
    values, elapsed = concurrent_load(writer, ref, TRIALS, STEPS, METRICS, FLUSH_EVERY,
                                      PROCESSES)
    print(f"\n{store.kind}: {values} metric values from {TRIALS} concurrent trials in "
          f"{elapsed:.1f} s: {values / elapsed:,.0f} values/s")
    assert values == TRIALS * STEPS * METRICS

    runs = {r.data.tags[tracking.TRIAL_KEY]: r for r in t.configurations(ref)}
    assert sorted(runs) == sorted(f"load-{i}" for i in range(TRIALS))
    for key, run in runs.items():
        trial = int(key.removeprefix("load-"))
        assert run.info.status == "FINISHED", key
        assert run.data.tags[tracking.OUTCOME] == "solved"
        assert run.data.tags[tracking.ATTEMPT] == "1"
        assert run.data.params == {"trial": str(trial)}
        assert run.data.metrics["score"] == trial
        assert run.data.metrics["m0"] == load_value(trial, STEPS - 1, 0)

    def check(key: str, k: int) -> list[str]:
        trial, run_id = int(key.removeprefix("load-")), runs[key].info.run_id
        stored = history(t, run_id, f"m{k}")
        in_order = sorted(stored)  # as reported: by time, then step
        expected = [(step, load_value(trial, step, k)) for step in range(STEPS)]
        problems = []
        if [(s, v) for _, s, v in in_order] != expected:
            problems.append(f"{key} m{k}: {len(stored)} values, steps "
                            f"{[s for _, s, _ in in_order][:5]}...")
        return problems

    began = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        jobs = [pool.submit(check, key, k) for key in runs for k in range(METRICS)]
        problems: list[Any] = [p for job in jobs for p in job.result()]
    assert problems == []
    print(f"{store.kind}: histories read back and checked in {time.monotonic() - began:.1f} s")
    t.end_sweep(ref, "FINISHED", {})
