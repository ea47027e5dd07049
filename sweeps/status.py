"""Progress of a sweep in one line: configurations done, running and failed, the best metric
so far, elapsed and estimated remaining time.

The same :class:`Progress` is filled live from Ray Tune's callbacks while a sweep runs
(:class:`sweeps.tune_progress.ProgressCallback`, instead of Tune's tables) and from MLflow
afterwards, by ``ortho sweep status`` (:func:`from_mlflow`). Counts are of configurations,
not of Tune trials (a trial trains a pack of them). This module imports neither Ray nor
MLflow (``ortho sweep status`` starts no Ray)::

    sweep 20261121-070102-ab12 ff-mnist/cpu: 12/48 done (1 failed), 4 running (37 % through),
    best test_accuracy 0.97, 1m23s elapsed, about 4m10s left

"37 % through" is the running configurations' mean share of their planned steps
(:class:`InFlight`, from the steps their metrics reached in the store), "at least 37 %" where
their protocol may end them sooner (then the time left counts only ended configurations).

and once it ends, with the figure the project optimises, configurations finished per hour::

    sweep 20261121-070102-ab12 synthetic-max-length/smoke: 48/48 done (1 failed),
    best max_seq_len_solved 80, finished in 5m41s, 496 configurations/h

A resumed sweep's figure is that of the run that ended it, over that run's own wall time,
which the line then names beside the sweep's whole span: ``finished in 32m10s, the last
run's 4m02s: 410 configurations/h``.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sweeps import contract, tracking


@dataclass(frozen=True)
class InFlight:
    """How far the running configurations are through their training (:func:`in_flight`)."""

    share: float
    """The mean over them of the step each has reached over its planned steps (each at
    most 1): the share of their training done."""
    ends_early: bool
    """Whether some of them can end before their planned steps (solved, settled,
    converged): then :attr:`share` is a lower bound, and the time left is not estimated
    from it."""


def in_flight(rows: Sequence[tuple[str, str | None, int | None]]) -> InFlight | None:
    """:class:`InFlight` of the running runs ``rows``
    (:meth:`sweeps.tracking.Tracker.running_steps`: id, :data:`~sweeps.contract.BUDGET` tag,
    largest step logged); None when none of them has the tag (none running, or all claimed
    before the tag existed). A run that has logged nothing yet is at step 0."""
    shares: list[float] = []
    early = False
    for _, budget, step in rows:
        if budget is None:
            continue
        planned = json.loads(budget)
        steps = int(planned["steps"])
        shares.append(1.0 if steps <= 0 else min(1.0, max(step or 0, 0) / steps))
        early = early or bool(planned["ends_early"])
    if not shares:
        return None
    return InFlight(sum(shares) / len(shares), early)


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
    repeats: int = 0
    """Optuna points proposed again and told a known value (or failed) instead of being
    trained: each spent one of :attr:`total`'s trials (:mod:`sweeps.searcher`)."""
    failed: int = 0
    running: int = 0
    in_flight: InFlight | None = None
    """How far the running configurations are (None where not known)."""
    best: float | None = None
    elapsed: float = 0.0
    """Seconds since the sweep started (or was resumed, live)."""
    eta: float | None = None
    """Estimated seconds left, when the rate so far allows an estimate."""
    state: str = "running"
    """``running``, ``finished`` or ``interrupted``."""
    driver_lost: bool = False
    """Whether the sweep's driver died without ending it (killed, or its machine lost):
    :attr:`elapsed` then runs to its last sign of life, and the sweep ran on after it."""
    outcomes: Counter[str] = field(default_factory=Counter)
    """Outcome tag -> configurations (from MLflow only)."""
    studies: str = ""
    """Where the Optuna cells' studies live, credentials masked ("" for a grid sweep;
    from MLflow only)."""
    per_hour: float | None = None
    """Configurations finished per hour of wall time by the run of the driver that ended
    the sweep (a resume counts what it finished itself); None while it runs."""
    run_seconds: float | None = None
    """The wall time of that run (from MLflow only): where it is shorter than
    :attr:`elapsed`, the sweep was resumed and the line names both."""
    others: list[str] = field(default_factory=list)
    """The store's latest other sweeps, ``ID spec/profile state`` (``ortho sweep status``
    without an id: that it shows the latest one of several)."""
    older: bool = False
    """Whether the store holds other sweeps older than those of :attr:`others`."""

    @property
    def settled(self) -> int:
        """Trials of :attr:`total` spent: configurations that ended and repeated points."""
        return self.done + self.repeats

    @property
    def left(self) -> int:
        """Trials of :attr:`total` still to spend."""
        return self.total - self.settled

    def offer(self, value: Any) -> None:
        """Keep ``value`` as the best so far if it is finite and better."""
        value = contract.finite_or_none(value)
        if value is None:
            return
        if (self.best is None or (value > self.best if self.mode == "max"
                                  else value < self.best)):
            self.best = value


FALLBACK_SIZE = (80, 24)
"""Columns and lines of a progress bar's terminal where the terminal reports none."""


def bar_columns(stream: Any) -> dict[str, Any]:
    """``tqdm``'s size settings for a bar on ``stream``: follow the terminal's width as it
    changes, or :data:`FALLBACK_SIZE` where the terminal reports a zero size (a
    pseudo-terminal without one, as ``script`` or ``docker exec -t`` may give), on which
    ``tqdm`` would draw nothing."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return {"dynamic_ncols": True}  # not a file descriptor (a test's stream)
    if size.columns and size.lines:
        return {"dynamic_ncols": True}
    columns, lines = FALLBACK_SIZE
    return {"ncols": size.columns or columns, "nrows": size.lines or lines}


def duration(seconds: float) -> str:
    """``3725`` -> ``1h02m05s``; ``83`` -> ``1m23s``; ``4.2`` -> ``4s``."""
    s = round(seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h{m:02d}m{sec:02d}s"
    return f"{m}m{sec:02d}s" if m else f"{sec}s"


def standing(p: Progress) -> list[str]:
    """Configurations running and the best metric so far, when there are any (``4 running``,
    ``best max_seq_len_solved 80``): the bar's details and part of the line."""
    parts = []
    if p.running:
        through = p.in_flight
        parts.append(f"{p.running} running" if through is None else
                     f"{p.running} running ({'at least ' if through.ends_early else ''}"
                     f"{math.floor(100 * through.share)} % through)")
    if p.best is not None:
        parts.append(f"best {p.metric} {p.best:g}")
    return parts


def count(n: int, noun: str) -> str:
    """``1, "trial"`` -> ``1 trial``; ``2, "trial"`` -> ``2 trials``."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def rate(per_hour: float) -> str:
    """``2057.4`` -> ``2,057 configurations/h``; ``3.42`` -> ``3.4 configurations/h``."""
    value = f"{round(per_hour):,}" if per_hour >= 10 else f"{per_hour:.2g}"
    return f"{value} configurations/h"


RESUMED_GAP_S = 2.0
"""How much longer than the run that ended it a sweep's span must be to show it was resumed:
more than the moments between that run's timing and MLflow's end time, less than any earlier
run (Ray's start alone takes seconds)."""


def format_line(p: Progress) -> str:
    """The one-line summary of ``p``."""
    notes = [f"{p.failed} failed"] if p.failed else []
    if p.repeats:
        notes.append(f"{count(p.repeats, 'repeated point')} not trained")
    parts = [f"{p.settled}/{p.total} done" + (f" ({', '.join(notes)})" if notes else "")]
    parts += standing(p)
    if p.state == "finished":
        parts.append(f"finished in {duration(p.elapsed)}")
    elif p.driver_lost:
        parts.append(f"interrupted (its driver lost) after at least {duration(p.elapsed)}")
    elif p.state == "interrupted":
        parts.append(f"interrupted after {duration(p.elapsed)}")
    else:
        parts.append(f"{duration(p.elapsed)} elapsed")
        if p.eta is not None:
            parts.append(f"about {duration(p.eta)} left")
    if p.per_hour is not None:
        last = p.run_seconds
        resumed = last is not None and p.elapsed - last >= RESUMED_GAP_S
        parts.append(f"the last run's {duration(last)}: {rate(p.per_hour)}" if resumed
                     else rate(p.per_hour))
    return f"sweep {p.sweep_id} {p.label}: " + ", ".join(parts)


def estimate(done_now: float, seconds: float, remaining: float) -> float | None:
    """Seconds left at the rate of ``done_now`` configurations in ``seconds`` (None when
    there is no rate yet, or nothing left: the sweep is only ending)."""
    if done_now <= 0 or seconds <= 0 or remaining <= 0:
        return None
    return remaining * seconds / done_now


def time_left(p: Progress, done_now: int, seconds: float) -> float | None:
    """Seconds left at the rate of this run of the sweep: ``done_now`` configurations ended
    in ``seconds``, and the running ones' share of their steps where none of them can end
    early (:class:`InFlight`), so that a sweep whose packs all run at once has an estimate
    before its first pack ends."""
    trained = 0.0
    if p.in_flight is not None and not p.in_flight.ends_early:
        trained = p.running * p.in_flight.share
    return estimate(done_now + trained, seconds, p.left - trained)


def state_of(record: tracking.SweepRecord) -> str:
    """``finished``, ``running`` (its driver is alive) or ``interrupted`` (ended KILLED, or
    RUNNING in MLflow after its driver died: :func:`sweeps.tracking.driver_alive`)."""
    if record.status == "FINISHED":
        return "finished"
    return "running" if record.alive else "interrupted"


def from_mlflow(tracker: tracking.Tracker, record: tracking.SweepRecord,
                runs: list[tracking.TaggedRun] | None = None) -> Progress:
    """The progress of a sweep as MLflow holds it (``runs``: its configuration runs when
    the caller has just read them, :meth:`~sweeps.tracking.Tracker.states`). A sweep
    whose driver died counts no configuration as running and its time up to the driver's
    last heartbeat or the last end of one of its runs, whichever is later (a heartbeat is
    written every :data:`~sweeps.tracking.liveness.HEARTBEAT_SECONDS`, so a driver killed
    between two had run on after the last)."""
    p = Progress(sweep_id=record.ref.sweep_id, label=f"{record.spec}/{record.profile}",
                 metric=record.metric, mode=record.mode, total=record.n_configs,
                 studies=record.optuna_storage, per_hour=record.per_hour,
                 run_seconds=record.run_seconds, repeats=record.repeats)
    runs = tracker.states(record.ref) if runs is None else runs
    for run in runs:
        status = run.status
        outcome = run.tags.get(tracking.OUTCOME)
        if outcome:
            p.outcomes[outcome] += 1
        if status == "RUNNING":
            p.running += 1
        elif status == "FINISHED":
            p.done += 1
            summary = json.loads(run.tags.get(tracking.SUMMARY, "{}"))
            p.offer(summary.get(record.metric))
        elif status == "FAILED":
            p.done += 1
            p.failed += 1
    p.state = state_of(record)
    if p.state == "running":
        end = time.time()
    elif record.status == "RUNNING":  # the driver died without ending the run
        end = max([record.heartbeat or record.start_time]
                  + [run.end_time for run in runs if run.end_time is not None])
        p.running = 0
        p.driver_lost = True
    else:
        end = record.end_time or record.start_time
    p.elapsed = end - record.start_time
    if p.state == "running":
        if p.running:
            p.in_flight = in_flight(tracker.running_steps(record.ref))
        at, before = record.resumed or (record.start_time, 0)  # the rate of the run going on
        p.eta = time_left(p, p.done - before, end - at)
    return p


def studies_line(url: str, sweep_id: str) -> str:
    """Where a sweep's Optuna studies are and what they are called (``url`` masked)."""
    name = contract.STUDY_NAME.format(sweep_id=sweep_id, cell="N")
    return f"{url}, one study per cell, named {name} for cell N = 0, 1, …"


def format_status(p: Progress) -> str:
    """``ortho sweep status`` output: the line, then the outcome counts and, for a sweep
    with Optuna cells, where their studies are and the command that shows them."""
    lines = [format_line(p)]
    if p.outcomes:
        lines.append("  outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(p.outcomes.items())))
    if p.studies:
        lines.append(f"  Optuna studies: {studies_line(p.studies, p.sweep_id)} (ortho sweep "
                     f"studies {p.sweep_id} shows them)")
    if p.others:
        older = "; older ones too, which ortho ui lists" if p.older else ""
        lines.append(f"  other sweeps here: {'; '.join(p.others)} (ortho sweep status ID "
                     f"shows one{older})")
    return "\n".join(lines)
