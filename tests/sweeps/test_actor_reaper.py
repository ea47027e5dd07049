"""After a Ctrl-C, the actor of a trial that was running is ended once Tune has stopped that
trial, and no other actor is."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
import ray

from sweeps import actor_reaper
from tests.sweeps.helpers import toy_ray

pytestmark = pytest.mark.usefixtures(toy_ray.__name__)


@ray.remote(num_cpus=0, max_concurrency=2)
class _Trainer:
    """Stands in for a trial's actor: ``train`` blocks as a pack between reports does."""

    def train(self) -> None:
        time.sleep(120)

    def ping(self) -> str:
        return "alive"


def _trial(status: str, actor: object) -> SimpleNamespace:
    return SimpleNamespace(status=status, temporary_state=SimpleNamespace(ray_actor=actor))


def _alive(actor: object) -> bool:
    try:
        return ray.get(actor.ping.remote(), timeout=30) == "alive"
    except ray.exceptions.RayActorError:
        return False


def test_only_the_actors_of_trials_running_at_the_interrupt_end_once_stopped():
    stopped, pending, running = (_Trainer.remote() for _ in range(3))
    training = stopped.train.remote()
    assert all(_alive(a) for a in (stopped, pending, running))
    trials = [_trial("RUNNING", stopped), _trial("PENDING", pending),
              _trial("RUNNING", running)]
    fit_ended = threading.Event()
    reaper = actor_reaper.end_when_stopped(trials, fit_ended)
    time.sleep(0.5)
    assert _alive(stopped)  # Tune has not stopped its trial yet
    for trial in trials[:2]:  # as Tune stops a trial: TERMINATED, and its handle let go
        trial.status, trial.temporary_state.ray_actor = "TERMINATED", None
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(training, timeout=30)
    assert _alive(pending)  # it did not run at the interrupt
    assert reaper.is_alive()  # still waiting for Tune to stop the last trial
    fit_ended.set()
    reaper.join(timeout=5)
    assert not reaper.is_alive()
    assert _alive(running)
    for actor in (pending, running):
        ray.kill(actor)
