"""The trial's reporter (:class:`sweeps.trial.Recorder`): when it hands metrics to the writer.

A pack of K members flushes at K · :data:`~sweeps.trial.FLUSH_METRICS` buffered values, so
each run's ``log_batch`` holds about as many values as one configuration's alone; flushing
at every 1,000 values whatever K made a large pack send a few values per run at every
report, and MLflow's cost per call bound the sweep's writer (``benchmarks/tracking_writer.py
--pack``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from ortho_core.reporting import Report
from sweeps import trial
from sweeps.tracking import SweepRef
from sweeps.trial import Recorder, TrialContext

METRICS = 9
"""Values a member reports at each step (the synthetic trainer's evaluation)."""


class Tracker:
    """What the Recorder calls of a :class:`~sweeps.writer.RemoteTracker`: each batch kept."""

    def __init__(self) -> None:
        self.batches: list[dict[str, list[tuple[str, float, int, int]]]] = []

    def log_metrics(self, batches: Mapping[str, Sequence[tuple[str, float, int, int]]]) -> None:
        """Keep the batch, as the writer would receive it."""
        self.batches.append({run_id: list(rows) for run_id, rows in batches.items()})

    def sync(self) -> None:
        """Nothing in flight."""


def recorder(members: int) -> tuple[Recorder, Tracker]:
    """A Recorder over ``members`` runs (``run-0`` …) and the tracker it sends to."""
    tracker = Tracker()
    context = TrialContext(writer=None, sweep=SweepRef("0", "sweep", "parent"), module="",
                           metric="m0", mode="min")
    runs = [f"run-{m}" for m in range(members)]
    return Recorder(tracker, runs, context), tracker  # type: ignore[arg-type]


def report(rec: Recorder, member: int, step: int) -> None:
    """``member``'s :data:`METRICS` values at ``step``, as a trainer reports them."""
    rec(Report(member=member, step=step,
               metrics={f"m{k}": step + k / 10 for k in range(METRICS)}))


@pytest.mark.parametrize("members", [1, 4, 28])
def test_a_pack_flushes_when_each_member_holds_a_batch(members: int) -> None:
    rec, tracker = recorder(members)
    threshold = members * trial.FLUSH_METRICS
    reported = 0
    while not tracker.batches:
        step, member = divmod(reported // METRICS, members)
        report(rec, member, step)
        reported += METRICS
    # flushed at the first report that reached the threshold, with every value so far
    assert threshold <= reported < threshold + METRICS
    sent = tracker.batches[0]
    assert list(sent) == [f"run-{m}" for m in range(members)]
    assert sum(len(rows) for rows in sent.values()) == reported
    assert min(len(rows) for rows in sent.values()) >= trial.FLUSH_METRICS - METRICS


def test_nothing_is_lost_between_flushes() -> None:
    rec, tracker = recorder(3)
    for step in range(250):
        for member in range(3):
            report(rec, member, step)
    rec.flush()
    for m in range(3):
        rows = [row for batch in tracker.batches for row in batch.get(f"run-{m}", [])]
        assert [(name, step) for name, _, _, step in rows] == [
            (f"m{k}", s) for s in range(250) for k in range(METRICS)]
    assert len(tracker.batches) == 3  # two on reaching 3,000 buffered values, then the rest


def test_a_large_pack_flushes_on_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(trial.time, "monotonic", lambda: clock[0])
    rec, tracker = recorder(28)
    step = 0
    while clock[0] < trial.FLUSH_SECONDS:
        for member in range(28):
            report(rec, member, step)
        assert tracker.batches == []  # 28 · 9 values a step: far below 28,000
        step += 1
        clock[0] += 0.6
    report(rec, 0, step)  # the first report once FLUSH_SECONDS have passed
    assert len(tracker.batches) == 1
    assert sum(map(len, tracker.batches[0].values())) == (28 * step + 1) * METRICS
