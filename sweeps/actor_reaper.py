"""Ends the Ray actors of the trials a Ctrl-C stopped, as soon as Tune has stopped them.

Tune stops a trial by queueing ``stop`` on its actor, which runs only once the actor's
``train`` call returns; a function trainable's ``train`` returns at the next
``ray.tune.report``, which a pack makes only at its end (at every evaluation only under an
early-stopping scheduler). Tune then gives the actor 10 s
(``TuneController._actor_force_cleanup_timeout``, which no setting changes) before it kills
it, so a Ctrl-C took 11 to 15 s to end a sweep of synthetic-max-length's ``cpu`` profile
(RESULTS.md). Ending the actor at once costs only a pack that would have ended its runs
within those seconds: it is now KILLED and a resume trains it again, as it does every pack
in flight. Nothing tracked is lost: a configuration still training is left RUNNING in MLflow
either way and the driver ends it KILLED, and what a pack ended before is in MLflow already.

Only the actors of trials running at the Ctrl-C are ended, each once Tune has marked its
trial TERMINATED or ERROR: Tune then no longer waits for that trial's results, and it starts
no new trial after a Ctrl-C, so no actor is ended under a trial Tune still runs. The handles
are taken at the Ctrl-C, since Tune lets go of a trial's handle when it stops the trial.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from typing import Any

POLL_SECONDS = 0.05
"""How often the reaper looks at the trials' states."""
LIMIT_SECONDS = 60.0
"""How long the reaper waits for Tune to stop the trials before it leaves them to Tune."""
STOPPED = ("TERMINATED", "ERROR")
"""Tune's states of a trial whose actor Tune has let go."""


def end_when_stopped(trials: Sequence[Any], done: threading.Event) -> threading.Thread:
    """Start a daemon thread that kills the actor of each of ``trials`` (Tune's ``Trial``)
    that runs now, once Tune has marked that trial stopped (:data:`STOPPED`); it ends when
    none is left, when ``done`` is set (Tune's fit has ended) or after
    :data:`LIMIT_SECONDS`."""
    running = [(trial, trial.temporary_state.ray_actor) for trial in trials
               if trial.status == "RUNNING" and trial.temporary_state.ray_actor is not None]
    thread = threading.Thread(target=_reap, args=(running, done), name="ortho-actor-reaper",
                              daemon=True)
    thread.start()
    return thread


def _reap(running: list[tuple[Any, Any]], done: threading.Event) -> None:
    import ray

    deadline = time.monotonic() + LIMIT_SECONDS
    while running and not done.is_set() and time.monotonic() < deadline:
        left = []
        for trial, actor in running:
            if trial.status not in STOPPED:
                left.append((trial, actor))
                continue
            with contextlib.suppress(Exception):  # it ended by itself, or Ray is shutting down
                ray.kill(actor, no_restart=True)
        running = left
        done.wait(POLL_SECONDS)
