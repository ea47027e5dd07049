"""The writer's outbox: every write of a sweep's trials, sent to the store one at a time in
the order it arrived, and held through an outage of a tracking server (issue 14).

A write (:class:`Write`) is a claim, a batch of metric values or an ending; into a store the
writer opens itself (which has no outages), also a pack's claims, a flush of every run of a
pack, or a pack's endings. One thread
(the sender) applies the oldest write, then the next. When a tracking server cannot be
reached or cannot answer now (:func:`sweeps.tracking.retry.unreachable`), the write stays
first in line and is tried again (backoff from :data:`RETRY_MIN_S` to :data:`RETRY_MAX_S`)
until the server is back; everything behind it waits in order, so that each run's metrics
arrive in step order and its ending after them. Callers of :meth:`Outbox.put` (metrics,
endings) wait until their writes are applied, or until an outage holds them: trials keep
training through an outage. Callers of :meth:`Outbox.call` (claims, which need the server's
answer: a new run id) wait until it is applied.

Nothing is applied twice: a write tried again after an attempt that may have reached the
server (:func:`~sweeps.tracking.retry.maybe_applied`), or after an attempt of a write of
several calls that may have got part way, is sent by its ``again`` function, which first
asks the store what of it is already there (:mod:`sweeps.writer`).

What an outage may cost is bounded (:class:`Limits`, from the driver's environment): when
the server has been unreachable for longer than ``outage_s`` (:data:`OUTAGE_ENV`, default
10 minutes), or more than ``values`` metric values (:data:`BUFFER_ENV`, default two million,
about 300 MB) wait, the outbox gives up what waits: claims fail
(:class:`TrackingOutage`: the trial fails and Tune retries it), and every run that had a
write dropped is lost: its later writes are dropped too, and once the server answers again
it is marked failed (``ortho.outcome`` ``failed``, its ``traceback.txt`` saying why), so that
``ortho sweep resume`` trains it again. A store that is not a server (SQLite) has no outages:
its errors reach the caller at once.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ortho_core.errors import ConfigError, OrthoError
from sweeps.tracking.retry import maybe_applied, unreachable

OUTAGE_ENV = "ORTHO_TRACKING_OUTAGE_S"
"""Seconds of a tracking server's outage the outbox holds writes for (default 600)."""
BUFFER_ENV = "ORTHO_TRACKING_BUFFER"
"""Metric values the outbox holds at most during an outage (default 2,000,000)."""
DEFAULT_OUTAGE_S = 600.0
DEFAULT_BUFFER = 2_000_000
RETRY_MIN_S = 0.5
"""First pause before a write is tried again during an outage (doubling to the next)."""
RETRY_MAX_S = 5.0
"""Longest pause between two tries: a server back is noticed within this."""

log = logging.getLogger(__name__)


class TrackingOutage(OrthoError):
    """The tracking server was unreachable for longer than the outbox holds writes."""


@dataclass(frozen=True)
class Limits:
    """How long an outage, and how many waiting metric values, the outbox survives."""

    outage_s: float = DEFAULT_OUTAGE_S
    """Seconds the server may stay unreachable before the trial gives up
    (:class:`TrackingOutage`; :data:`OUTAGE_ENV`)."""
    values: int = DEFAULT_BUFFER
    """Metric values held at most while it is (:data:`BUFFER_ENV`)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Limits:
        """The limits :data:`OUTAGE_ENV` and :data:`BUFFER_ENV` set (``ConfigError`` naming
        the variable for a value that is not a positive number)."""
        values = {}
        for name, field, kind in ((OUTAGE_ENV, "outage_s", float),
                                  (BUFFER_ENV, "values", int)):
            text = environ.get(name)
            if not text:
                continue
            try:
                value = kind(text)
            except ValueError:
                value = 0
            if not value > 0:
                raise ConfigError(name, f"a positive {kind.__name__}", text)
            values[field] = value
        return cls(**values)


@dataclass(eq=False)
class Write:
    """One write of the outbox: ``apply()`` does it; ``again()``, when given, does it after
    an attempt that may have applied it, or part of it (checking the store first)."""

    run_id: str | None
    """The run it writes (None for a claim, whose run does not exist yet, and for a write of
    several runs at once into a store that has no outages)."""
    apply: Callable[[], Any]
    again: Callable[[], Any] | None = None
    values: int = 0
    """Metric values it holds (what :attr:`Limits.values` counts)."""
    calls: int = 1
    """Calls to the store it makes: a write of several may stop part way."""
    keep: bool = False
    """Never given up (the mark of a lost run)."""
    done: bool = False
    result: Any = None
    error: BaseException | None = None
    partial: bool = False
    """An attempt failed that may have applied some of it."""
    orphaned: bool = False
    """Its caller stopped waiting (an outage held it)."""


class Outbox:
    """The ordered writes of one writer (the module docstring); ``outages``: whether the
    store is a server whose unreachability is waited out; ``mark_lost(run_id, why)`` marks
    a lost run."""

    def __init__(self, limits: Limits, outages: bool,
                 mark_lost: Callable[[str, str], Any]) -> None:
        self.limits = limits
        self.outages = outages
        self.mark_lost = mark_lost
        """How a lost run is marked failed (run id, why)."""
        self.outage_since: float | None = None
        """When the current outage began (None: the store answers)."""
        self.lost: dict[str, str] = {}
        """Runs whose writes were given up, and why."""
        self.problems: list[str] = []
        """What went wrong with writes nobody waited for (reported by :meth:`drain`)."""
        self.longest_outage = 0.0
        """The longest outage ridden out so far, in seconds."""
        self._queue: deque[Write] = deque()
        self._values = 0
        self._cond = threading.Condition()
        threading.Thread(target=self._send, name="ortho-outbox", daemon=True).start()

    # -- callers ------------------------------------------------------------------------

    def put(self, writes: Sequence[Write]) -> None:
        """Queue ``writes`` (those of a lost run are dropped) and wait until they are
        applied, or held by an outage; the first error of one of them raises."""
        with self._cond:
            queued = [w for w in writes if w.run_id not in self.lost]
            self._enqueue(queued)
            while not all(w.done for w in queued) and self.outage_since is None:
                self._cond.wait()
            for w in queued:
                w.orphaned = not w.done  # held: an error of it is reported by drain()
        for w in queued:
            if w.done and w.error is not None:
                raise w.error

    def call(self, write: Write) -> Any:
        """Queue ``write``, wait until it is applied (through an outage, up to the limit),
        and return its result (its error raises)."""
        with self._cond:
            self._enqueue([write])
            while not write.done:
                self._cond.wait()
        if write.error is not None:
            raise write.error
        return write.result

    def drain(self, timeout: float) -> list[str]:
        """Wait until every write is applied, at most ``timeout`` seconds; what went wrong,
        one line each (empty: nothing)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue and time.monotonic() < deadline:
                self._cond.wait(min(1.0, max(0.0, deadline - time.monotonic())))
            lines = list(self.problems)
            if self.lost:
                lines.append(f"{len(self.lost)} runs lost writes in a tracking outage and are "
                             f"marked failed (`ortho sweep resume` trains them again): "
                             f"{next(iter(self.lost.values()))}")
            if self._queue:
                lines.append(f"{len(self._queue)} writes never reached the store (unreachable "
                             "at the end of the sweep)")
            if self.longest_outage:
                lines.append(f"rode out a tracking outage of {self.longest_outage:.0f} s")
            return lines

    def _enqueue(self, writes: Sequence[Write]) -> None:
        self._queue.extend(writes)
        self._values += sum(w.values for w in writes)
        self._cond.notify_all()

    # -- the sender ---------------------------------------------------------------------

    def _send(self) -> None:
        pause = RETRY_MIN_S
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                write = self._queue[0]
            try:
                fn = write.again if write.partial and write.again is not None else write.apply
                result = fn()
            except Exception as err:
                if not (self.outages and unreachable(err)):
                    self._settle(write, None, err)
                    continue
                self._held(write, err)
                time.sleep(pause)
                pause = min(2 * pause, RETRY_MAX_S)
                continue
            pause = RETRY_MIN_S
            self._settle(write, result, None)

    def _settle(self, write: Write, result: Any, error: BaseException | None) -> None:
        with self._cond:
            if self._queue and self._queue[0] is write:
                self._queue.popleft()
                self._values -= write.values
            answered = error is None or not unreachable(error)  # a refusal is an answer
            if answered and self.outage_since is not None:
                lasted = time.monotonic() - self.outage_since
                self.longest_outage = max(self.longest_outage, lasted)
                log.warning("tracking server back after %.0f s", lasted)
                self.outage_since = None
            write.done, write.result, write.error = True, result, error
            if error is not None and (write.orphaned or write.keep):
                self.problems.append(f"a write of run {write.run_id} failed after an outage: "
                                     f"{str(error).splitlines()[0] if str(error) else error!r}")
            self._cond.notify_all()

    def _held(self, write: Write, err: Exception) -> None:
        with self._cond:
            now = time.monotonic()
            if self.outage_since is None:
                self.outage_since = now
                log.warning("tracking server unreachable, holding writes: %s", err)
                self._cond.notify_all()  # callers of put() return: their writes wait here
            write.partial = write.partial or write.calls > 1 or maybe_applied(err)
            waited = now - self.outage_since
            if waited > self.limits.outage_s or self._values > self.limits.values:
                why = (f"the tracking server was unreachable for more than "
                       f"{self.limits.outage_s:g} s" if waited > self.limits.outage_s else
                       f"more than {self.limits.values} metric values waited for it")
                self._give_up(why, now)

    def _give_up(self, why: str, now: float) -> None:
        """Drop every write but the marks of lost runs: claims fail, runs are lost and a
        mark of each is queued (the module docstring). Called holding the lock."""
        kept: deque[Write] = deque()
        for w in self._queue:
            if w.keep:
                kept.append(w)
                continue
            w.done = True
            if w.run_id is None:
                w.error = TrackingOutage(f"{why}; the claim was given up")
            elif w.run_id not in self.lost:
                self.lost[w.run_id] = why
                kept.append(self._mark(w.run_id, why))
        log.warning("%s: %d runs lost their writes", why, sum(1 for w in kept if w.keep))
        self._queue = kept
        self._values = 0
        self.outage_since = now  # what is kept may wait as long again
        self._cond.notify_all()

    def _mark(self, run_id: str, why: str) -> Write:
        mark = self.mark_lost
        return Write(run_id, lambda: mark(run_id, why), keep=True)
