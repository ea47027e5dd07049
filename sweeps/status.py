"""Progress of a sweep in one line: configurations done, running and failed, the best metric
so far, elapsed and estimated remaining time.

The same :class:`Progress` is filled live from Ray Tune's callbacks while a sweep runs
(:class:`ProgressCallback`, instead of Tune's tables) and from MLflow afterwards, by
``ortho sweep status`` (:func:`from_mlflow`). Counts are of configurations, not of Tune
trials (a trial trains a pack of them)::

    sweep 20261121-070102-ab12 synthetic-max-length/smoke: 12/48 done (1 failed), 4 running,
    best max_seq_len_solved 80, 1m23s elapsed, about 4m10s left
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ray.tune import Callback

from sweeps import tracking


@dataclass
class Progress:
    """Where a sweep stands."""

    sweep_id: str
    label: str
    """``spec/profile``."""
    metric: str
    mode: str
    total: int
    """Configurations in the whole sweep."""
    done: int = 0
    """Configurations that ended (failed ones included)."""
    failed: int = 0
    running: int = 0
    best: float | None = None
    elapsed: float = 0.0
    """Seconds since the sweep started (or was resumed, live)."""
    eta: float | None = None
    """Estimated seconds left, when the rate so far allows an estimate."""
    state: str = "running"
    """``running``, ``finished`` or ``interrupted``."""
    outcomes: Counter[str] = field(default_factory=Counter)
    """Outcome tag -> configurations (from MLflow only)."""

    def offer(self, value: Any) -> None:
        """Keep ``value`` as the best so far if it is finite and better."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return
        if not math.isfinite(value):
            return
        if (self.best is None or (value > self.best if self.mode == "max"
                                  else value < self.best)):
            self.best = float(value)


def duration(seconds: float) -> str:
    """``3725`` -> ``1h02m05s``; ``83`` -> ``1m23s``; ``4.2`` -> ``4s``."""
    s = round(seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h{m:02d}m{sec:02d}s"
    return f"{m}m{sec:02d}s" if m else f"{sec}s"


def format_line(p: Progress) -> str:
    """The one-line summary of ``p``."""
    parts = [f"{p.done}/{p.total} done" + (f" ({p.failed} failed)" if p.failed else "")]
    if p.running:
        parts.append(f"{p.running} running")
    if p.best is not None:
        parts.append(f"best {p.metric} {p.best:g}")
    if p.state == "finished":
        parts.append(f"finished in {duration(p.elapsed)}")
    elif p.state == "interrupted":
        parts.append(f"interrupted after {duration(p.elapsed)}")
    else:
        parts.append(f"{duration(p.elapsed)} elapsed")
        if p.eta is not None:
            parts.append(f"about {duration(p.eta)} left")
    return f"sweep {p.sweep_id} {p.label}: " + ", ".join(parts)


def estimate(done_now: int, seconds: float, remaining: int) -> float | None:
    """Seconds left at the rate of ``done_now`` configurations in ``seconds``."""
    if done_now <= 0 or seconds <= 0:
        return None
    return remaining * seconds / done_now


def _pack_size(trial: Any) -> int:
    return len(trial.config.get("members", ())) or 1


def failure_line(trial: Any) -> str:
    """The last line of a failed trial's error (``RuntimeError: ...``), from the error file
    Tune writes beside the driver."""
    path = trial.error_file
    text = Path(path).read_text() if path and Path(path).exists() else ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "unknown error"


class ProgressCallback(Callback):
    """Prints :func:`format_line` while Tune runs: when trials end (at most every
    ``min_interval`` seconds) and at least every ``print_every`` seconds; calls ``beat`` (the
    driver's heartbeat in MLflow, :meth:`sweeps.tracking.Tracker.heartbeat`) every
    ``beat_interval`` seconds."""

    def __init__(self, progress: Progress, stream: TextIO | None = None,
                 min_interval: float = 2.0, print_every: float = 30.0,
                 beat: Callable[[], None] | None = None,
                 beat_interval: float = tracking.HEARTBEAT_SECONDS) -> None:
        self.progress = progress
        self.stream = stream
        self.min_interval = min_interval
        self.print_every = print_every
        self.beat = beat
        self.beat_interval = beat_interval
        self._beaten_at = time.monotonic()
        self.start = time.monotonic()
        self.done_before = progress.done
        self.trials_ended = 0
        self.stopped_early: list[str] = []
        """Trial keys of the configurations whose trials the scheduler stopped (they ended
        without their final report)."""
        self._printed_at = time.monotonic()
        self._changed = False

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles its callbacks with the experiment state; the stream and the
        heartbeat (which holds the tracker) stay here."""
        return {**self.__dict__, "stream": None, "beat": None}

    def _update(self, trials: list[Any]) -> None:
        p = self.progress
        p.running = sum(_pack_size(t) for t in trials if t.status == "RUNNING")
        p.elapsed = time.monotonic() - self.start
        p.eta = estimate(p.done - self.done_before, p.elapsed, p.total - p.done)

    def print_line(self, trials: list[Any]) -> None:
        """Print the current line now."""
        self._update(trials)
        print(format_line(self.progress), file=self.stream or sys.stdout, flush=True)
        self._printed_at = time.monotonic()
        self._changed = False

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any,
                          **info: Any) -> None:
        result = trial.last_result or {}
        if "configs" not in result:
            self.stopped_early += [m["key"] for m in trial.config.get("members", ())]
        self.progress.done += int(result.get("configs", _pack_size(trial)))
        self.progress.offer(result.get(self.progress.metric))
        self.trials_ended += 1
        self._changed = True

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any,
                       **info: Any) -> None:
        print(f"failed: {failure_line(trial)} ({_pack_size(trial)} configuration(s); the "
              "traceback is their runs' traceback.txt)", file=self.stream or sys.stdout,
              flush=True)
        self.progress.done += _pack_size(trial)
        self.progress.failed += _pack_size(trial)
        self.trials_ended += 1
        self._changed = True

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        now = time.monotonic()
        if self.beat is not None and now - self._beaten_at >= self.beat_interval:
            self.beat()
            self._beaten_at = now
        since = now - self._printed_at
        if (self._changed and since >= self.min_interval) or since >= self.print_every:
            self.print_line(trials)


def state_of(record: tracking.SweepRecord) -> str:
    """``finished``, ``running`` (its driver is alive) or ``interrupted`` (ended KILLED, or
    RUNNING in MLflow after its driver died: :func:`sweeps.tracking.driver_alive`)."""
    if record.status == "FINISHED":
        return "finished"
    return "running" if record.alive else "interrupted"


def from_mlflow(tracker: tracking.Tracker, record: tracking.SweepRecord) -> Progress:
    """The progress of a sweep as MLflow holds it. A sweep whose driver died counts no
    configuration as running and its time up to the driver's last heartbeat."""
    p = Progress(sweep_id=record.ref.sweep_id, label=f"{record.spec}/{record.profile}",
                 metric=record.metric, mode=record.mode, total=record.n_configs)
    for run in tracker.configurations(record.ref):
        status = run.info.status
        outcome = run.data.tags.get(tracking.OUTCOME)
        if outcome:
            p.outcomes[outcome] += 1
        if status == "RUNNING":
            p.running += 1
        elif status == "FINISHED":
            p.done += 1
            summary = json.loads(run.data.tags.get(tracking.SUMMARY, "{}"))
            p.offer(summary.get(record.metric))
        elif status == "FAILED":
            p.done += 1
            p.failed += 1
    p.state = state_of(record)
    if p.state == "running":
        end = time.time()
    elif record.status == "RUNNING":  # the driver died without ending the run
        end = record.heartbeat or record.start_time
        p.running = 0
    else:
        end = record.end_time or record.start_time
    p.elapsed = end - record.start_time
    if p.state == "running":
        p.eta = estimate(p.done, p.elapsed, p.total - p.done)
    return p


def format_status(p: Progress) -> str:
    """``ortho sweep status`` output: the line, then the outcome counts."""
    lines = [format_line(p)]
    if p.outcomes:
        lines.append("  outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(p.outcomes.items())))
    return "\n".join(lines)
