"""The live progress of a sweep while Ray Tune runs it: a ``tqdm`` bar on a terminal, one
plain line at a time elsewhere (CI logs, pipes), the driver's heartbeat in MLflow, and the
check that the sweep's writer opened the store (:class:`WriterStarted`).

On a terminal (``tqdm`` decides, as with its ``disable=None``) the bar, below the line that
names the sweep, shows its ``spec/profile``, configurations done of its total, failures,
configurations running, the best metric so far, elapsed time and the time left at the
average rate since this run started; a failed trial's error is written above the bar. A
terminal that reports no size (a pseudo-terminal without one) gets a bar of
:data:`~sweeps.status.FALLBACK_SIZE`, instead of none.
Elsewhere :func:`sweeps.status.format_line` is printed when trials end (at most every
``min_interval`` seconds, and :data:`SETTLE` seconds after the last end, once Tune has started
the next trial in the slot that freed, or ``min_interval`` seconds after the first end it
shows where trials end in quick succession) and at least every ``print_every`` seconds.
Counts are of configurations, not of Tune trials (a trial trains a pack of them). A Ctrl-C is
answered at once with :data:`STOPPING` (Tune stops its trials, and its own message is among
the logs a sweep keeps quiet); the running trials' actors are ended as soon as Tune has
stopped their trials (:mod:`sweeps.actor_reaper`).

This is the one module of the progress display that imports Ray (it subclasses Tune's
``Callback``); the formatting and ``ortho sweep status`` live in :mod:`sweeps.status`.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TextIO

from ray.tune import Callback
from tqdm import tqdm

from sweeps.actor_reaper import end_when_stopped
from sweeps.status import (
    InFlight,
    Progress,
    bar_columns,
    format_line,
    in_flight,
    standing,
    time_left,
)
from sweeps.tracking import HEARTBEAT_SECONDS, redact
from sweeps.writer import StartingWriter

BAR_REFRESH = 1.0
"""Seconds between redraws of the bar while nothing ends (so that its clock moves)."""

SETTLE = 0.5
"""Seconds a line waits after a trial ends. Tune starts the next trial on the ended one's
actor within milliseconds (``reuse_actors``), so that a line printed at once counted one slot
as idle: "12/18 done, 1 running" while both of a 2-core machine's trials ran."""


def _pack_size(trial: Any) -> int:
    return len(trial.config.get("members", ())) or 1


def failure_line(trial: Any) -> str:
    """The last line of a failed trial's error (``RuntimeError: ...``), from the error file
    Tune writes beside the driver."""
    path = trial.error_file
    text = Path(path).read_text() if path and Path(path).exists() else ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "unknown error"


STOPPING = ("stopping: the trials in flight end now (a few seconds); what did not finish "
            "can be resumed")
"""What a sweep prints the moment it is interrupted."""


GAUGE_SECONDS = 10.0
"""Seconds between the reads of how far the running configurations are
(:class:`InFlightGauge`): about as often as a trial sends its metrics to the store
(:data:`sweeps.trial.FLUSH_SECONDS`)."""


READ_SHARE = 0.1
"""The most of the writer's time :class:`InFlightGauge`'s reads take."""


class Gauge(Protocol):
    """How far the running configurations are, as :class:`ProgressCallback` asks it."""

    def __call__(self) -> InFlight | None:
        """The latest figure (None where none is known)."""

    def invalidate(self) -> None:
        """The running configurations changed (a trial ended): forget the figure."""


class InFlightGauge:
    """How far the running configurations of sweep ``ref`` are (:class:`InFlight`), asked
    of the sweep's writer (:meth:`sweeps.writer.TrackerActor.running_steps`) and never
    waited for: Tune's loop does not wait on the store (an outage holds the answer, not the
    loop). It asks again ``interval`` seconds after an answer, or :data:`READ_SHARE`'s
    inverse times as long as that read took, whichever is longer (a tracking server reads
    every running run whole: a large sweep's reads must not load it); the first read, which
    waits for the writer's start, sets no such pause. Each call returns the latest answer
    (None before the first, and after :meth:`invalidate` until a read asked after it)."""

    def __init__(self, writer: Any, ref: Any, interval: float = GAUGE_SECONDS) -> None:
        self.writer = writer
        self.ref = ref
        self.interval = interval
        self.latest: InFlight | None = None
        self._pending: Any = None
        self._stale = False
        """Whether the read in flight was asked before the running configurations changed."""
        self._asked_at = 0.0
        self._next_at = -float("inf")
        self._paused_until = -float("inf")
        """The earliest next read that :data:`READ_SHARE` allows."""

    def __call__(self) -> InFlight | None:
        import ray

        now = time.monotonic()
        if self._pending is not None and ray.wait([self._pending], timeout=0)[0]:
            try:
                answer = in_flight(ray.get(self._pending))
                if not self._stale:
                    self.latest = answer
            except Exception as error:  # a progress figure must not end the sweep
                logging.getLogger(__name__).warning("progress of the running configurations "
                                                    "not read: %s", redact(str(error)))
            first = self._paused_until == -float("inf")
            self._paused_until = now + (0.0 if first else (now - self._asked_at) / READ_SHARE)
            self._next_at = (self._paused_until if self._stale
                             else max(now + self.interval, self._paused_until))
            self._pending, self._stale = None, False
        if self._pending is None and now >= self._next_at:
            self._pending = self.writer.running_steps.remote(self.ref)
            self._asked_at = now
        return self.latest

    def invalidate(self) -> None:
        """Forget the latest answer: a trial ended, and the figure was of the configurations
        running before. The next read is asked as soon as :data:`READ_SHARE` allows (one
        in flight is dropped when it comes)."""
        self.latest = None
        self._stale = self._pending is not None
        self._next_at = self._paused_until


class ProgressCallback(Callback):
    """Shows ``progress`` while Tune runs (the module docstring) and calls ``beat`` (the
    driver's heartbeat in MLflow, :meth:`sweeps.tracking.Tracker.heartbeat`) every
    ``beat_interval`` seconds; ``gauge`` says how far the running configurations are
    (:class:`InFlightGauge`, called at each of Tune's steps); ``repeats`` counts the Optuna
    points proposed again so far (:attr:`sweeps.status.Progress.repeats`). ``stream``
    defaults to stdout; :meth:`close` ends the bar."""

    def __init__(self, progress: Progress, stream: TextIO | None = None,
                 min_interval: float = 2.0, print_every: float = 30.0,
                 beat: Callable[[], None] | None = None,
                 beat_interval: float = HEARTBEAT_SECONDS,
                 gauge: Gauge | None = None,
                 repeats: Callable[[], int] | None = None, start: float | None = None) -> None:
        self.progress = progress
        self.gauge = gauge
        self.repeats = repeats
        self.stream = stream
        self.min_interval = min_interval
        self.print_every = print_every
        self.beat = beat
        self.beat_interval = beat_interval
        self._beaten_at = time.monotonic()
        self.start = time.monotonic() if start is None else start
        """When the command started (``time.monotonic()``; default: now), so that the time
        elapsed counts Ray's start as the final line and ``ortho sweep status`` do."""
        self.done_before = progress.done
        self.trials_ended = 0
        self.stopped_early: list[str] = []
        """Trial keys of the configurations whose trials the scheduler stopped (they ended
        without their final report)."""
        self._printed_at = time.monotonic()
        self._changed = False
        self._ended_at = -float("inf")
        self._changed_at = -float("inf")
        """When the first trial ended that no line has shown yet."""
        self.fit_ended = threading.Event()
        """Set when Tune's fit ends: a Ctrl-C then stops nothing (no :data:`STOPPING`), and
        the reaper of an earlier one stops looking."""
        self._trials: list[Any] = []
        """Tune's trials as of its last step (whose actors a Ctrl-C ends)."""
        bar = tqdm(total=progress.total, initial=progress.settled, unit="config",
                   desc=progress.label, file=self._out, smoothing=0, leave=False,
                   disable=None, **bar_columns(self._out))
        self.bar: tqdm | None = None if bar.disable else bar
        """The bar on a terminal; None where lines are printed instead."""
        if self.bar is not None:
            self.bar.start_t -= time.monotonic() - self.start

    @property
    def _out(self) -> TextIO:
        return self.stream or sys.stdout

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles its callbacks with the experiment state; the stream, the bar and the
        heartbeat (which holds the tracker), the repeats' count (the searcher's), the trials
        and the fit's end event stay here."""
        return {**self.__dict__, "stream": None, "beat": None, "bar": None, "repeats": None,
                "gauge": None, "_trials": [], "fit_ended": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A copy (Tune's, through Ray Client) gets an event of its own."""
        self.__dict__.update(state)
        self.fit_ended = threading.Event()

    def _update(self, trials: list[Any], ended: Any = None) -> None:
        p = self.progress
        p.running = sum(_pack_size(t) for t in trials
                        if t.status == "RUNNING" and t is not ended)
        p.elapsed = time.monotonic() - self.start
        if self.repeats is not None:
            p.repeats = self.repeats()
        p.eta = time_left(p, p.done - self.done_before, p.elapsed)

    def print_line(self, trials: list[Any], ended: Any = None) -> None:
        """Show the current state now: redraw the bar, or print the line. ``ended`` is a
        trial that has just ended, which Tune still lists as running."""
        self._update(trials, ended)
        p = self.progress
        if self.bar is not None:
            self.bar.n = p.settled
            self.bar.set_postfix_str(", ".join(
                ([f"{p.failed} failed"] if p.failed else []) + standing(p)), refresh=False)
            self.bar.refresh()
        else:
            print(format_line(p), file=self._out, flush=True)
        self._printed_at = time.monotonic()
        self._changed = False

    def setup(self, **info: Any) -> None:
        """Answer the first Ctrl-C at once (:data:`STOPPING`), let Tune's handler, which Tune
        installed before this runs, stop the sweep as it does, and end the running trials'
        actors once Tune has stopped their trials (:mod:`sweeps.actor_reaper`)."""
        tune_handler = signal.getsignal(signal.SIGINT)
        if (not callable(tune_handler) or tune_handler is signal.default_int_handler
                or threading.current_thread() is not threading.main_thread()):
            return  # no graceful stop to announce (TUNE_DISABLE_SIGINT_HANDLER), or no signals

        def announce(signum: int, frame: Any) -> None:
            try:
                if not self.fit_ended.is_set():  # Tune leaves its handler installed after fit
                    if self.bar is not None:
                        self.bar.write(STOPPING, file=self._out)
                    else:
                        print(STOPPING, file=self._out, flush=True)
            except (OSError, RuntimeError):  # a closed pipe; a write this signal interrupted
                pass
            finally:
                tune_handler(signum, frame)
                if not self.fit_ended.is_set():
                    end_when_stopped(self._trials, self.fit_ended)

        signal.signal(signal.SIGINT, announce)

    def close(self) -> None:
        """Take the bar off the terminal (the caller prints the final line)."""
        if self.bar is not None:
            self.bar.close()

    def _ended(self) -> None:
        """Count a trial that ended, for the line that follows, whose running configurations
        are no longer those the gauge measured."""
        self.trials_ended += 1
        if self.gauge is not None:
            self.gauge.invalidate()
            self.progress.in_flight = None
        self._ended_at = time.monotonic()
        if not self._changed:
            self._changed, self._changed_at = True, self._ended_at

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any,
                          **info: Any) -> None:
        result = trial.last_result or {}
        if "configs" not in result:  # stopped at a step: its metric there is no summary
            self.stopped_early += [m["key"] for m in trial.config.get("members", ())]
        else:
            self.progress.offer(result.get(self.progress.metric))
        self.progress.done += int(result.get("configs", _pack_size(trial)))
        self.progress.failed += int(result.get("configs_failed", 0))
        self._ended()
        if self.bar is not None:
            self.print_line(trials, ended=trial)

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any,
                       **info: Any) -> None:
        line = (f"failed: {failure_line(trial)} ({_pack_size(trial)} configuration(s); the "
                "traceback is their runs' traceback.txt)")
        if self.bar is not None:
            self.bar.write(line, file=self._out)
        else:
            print(line, file=self._out, flush=True)
        self.progress.done += _pack_size(trial)
        self.progress.failed += _pack_size(trial)
        self._ended()
        if self.bar is not None:
            self.print_line(trials, ended=trial)

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self._trials = trials
        if self.gauge is not None:
            self.progress.in_flight = self.gauge()
        now = time.monotonic()
        if self.beat is not None and now - self._beaten_at >= self.beat_interval:
            try:
                self.beat()
            except Exception as error:  # a missed heartbeat must not end the sweep
                logging.getLogger(__name__).warning("heartbeat not recorded: %s",
                                                    redact(str(error)))
            self._beaten_at = now
        since = now - self._printed_at
        if self.bar is not None:
            if since >= BAR_REFRESH:
                self.print_line(trials)
        elif ((self._changed and since >= self.min_interval
               and (now - self._ended_at >= SETTLE
                    or now - self._changed_at >= self.min_interval))
              or since >= self.print_every):
            self.print_line(trials)

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        self.fit_ended.set()
        self.close()


class WriterStarted(Callback):
    """Raises, at Tune's first step after it, the error that kept the sweep's ``writer``
    from opening the store (:meth:`sweeps.writer.StartingWriter.ready`), which ends the fit.

    Tune starts the trials while the writer starts (on a 2-core CPU its process takes about
    2 s to import MLflow and open the store, the trials' processes about 3 s to start and
    import torch: RESULTS.md, ``sweep start on a CPU``), rather than after it; a trial's
    first call, its claim, waits in the writer's queue until the writer has started, and
    fails, so that no configuration trains, when it cannot. Through Ray Client (``ray://``)
    Tune runs remotely with a pickled copy of this callback, which holds no writer and checks
    nothing: there the error is raised after the fit, once the trials have failed."""

    def __init__(self, writer: StartingWriter) -> None:
        self.writer: StartingWriter | None = writer
        self.started = False

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles its callbacks with the experiment state; the writer stays here."""
        return {**self.__dict__, "writer": None}

    def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
        if self.started or self.writer is None or not self.writer.settled():
            return
        self.writer.ready()
        self.started = True
