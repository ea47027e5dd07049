"""What the tracker reads back from a store: a sweep (its parent run), a claimed
configuration, and a finished configuration's result."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ortho_core.reporting import Outcome, Result
from sweeps.contract import (
    CONFIGS_PER_HOUR,
    DRIVER,
    HEARTBEAT,
    METRIC,
    MODE,
    N_CONFIGS,
    OPTUNA_REPEATS,
    OPTUNA_STORAGE,
    OUTCOME,
    PROFILE,
    RESUMED,
    RUN_SECONDS,
    SPEC,
    SPEC_SHA256,
    SUMMARY,
    SWEEP_ID,
    epoch_seconds,
    finite_or_none,
)
from sweeps.tracking.liveness import driver_alive


@dataclass(frozen=True)
class SweepRef:
    """What a trial needs to find its sweep in MLflow."""

    experiment_id: str
    sweep_id: str
    parent_run_id: str


@dataclass(frozen=True)
class SweepRecord:
    """A sweep as MLflow holds it (its parent run)."""

    ref: SweepRef
    spec: str
    profile: str
    spec_sha256: str
    status: str
    """The parent run's status: RUNNING while it runs (or after its driver was killed),
    FINISHED when it ran to the end, KILLED when interrupted."""
    start_time: float
    """Seconds since the epoch."""
    end_time: float | None
    n_configs: int
    metric: str
    mode: str
    driver: str = ""
    """``host:pid`` of the driver that last ran it ("" when unknown)."""
    heartbeat: float | None = None
    """When that driver last said it was alive (seconds since the epoch)."""
    optuna_storage: str = ""
    """Where its Optuna cells' studies live, credentials masked ("" for a grid sweep)."""
    per_hour: float | None = None
    """Configurations finished per hour by the run of its driver that ended it
    (:data:`~sweeps.contract.CONFIGS_PER_HOUR`); None while it is RUNNING (a value logged then
    would be an earlier run's) or when no driver ended it."""
    run_seconds: float | None = None
    """The wall time of that run (:data:`~sweeps.contract.RUN_SECONDS`), which
    :attr:`per_hour` is over: shorter than the sweep's span once it was resumed."""
    resumed: tuple[float, int] | None = None
    """When its latest resume started (seconds since the epoch) and the configurations done
    then (:data:`~sweeps.contract.RESUMED`); None if it was never resumed."""
    repeats: int = 0
    """Optuna points proposed again and not trained, as its driver last counted them
    (:data:`~sweeps.contract.OPTUNA_REPEATS`)."""

    @property
    def alive(self) -> bool:
        """Whether it is RUNNING and its driver alive (:func:`driver_alive`)."""
        return self.status == "RUNNING" and driver_alive(self.driver, self.heartbeat)


def sweep_record(run: Any) -> SweepRecord:
    """The :class:`SweepRecord` of a sweep's parent run (an MLflow ``Run``)."""
    tags = run.data.tags
    beat = tags.get(HEARTBEAT)
    ended = run.data.metrics if run.info.status != "RUNNING" else {}
    return SweepRecord(
        ref=SweepRef(run.info.experiment_id, tags[SWEEP_ID], run.info.run_id),
        spec=tags.get(SPEC, ""), profile=tags.get(PROFILE, ""),
        spec_sha256=tags.get(SPEC_SHA256, ""), status=run.info.status,
        start_time=run.info.start_time / 1000,
        end_time=epoch_seconds(run.info.end_time),
        n_configs=int(tags.get(N_CONFIGS, "0")), metric=tags.get(METRIC, ""),
        mode=tags.get(MODE, "max"), driver=tags.get(DRIVER, ""),
        heartbeat=float(beat) if beat else None,
        optuna_storage=tags.get(OPTUNA_STORAGE, ""),
        per_hour=ended.get(CONFIGS_PER_HOUR), run_seconds=ended.get(RUN_SECONDS),
        repeats=int(run.data.metrics.get(OPTUNA_REPEATS, 0)), resumed=_resumed(tags))


def _resumed(tags: Mapping[str, str]) -> tuple[float, int] | None:
    """The :data:`~sweeps.contract.RESUMED` tag as (start, configurations done then)."""
    if RESUMED not in tags:
        return None
    resumed = json.loads(tags[RESUMED])
    return float(resumed["at"]), int(resumed["done"])


@dataclass(frozen=True)
class Claim:
    """The outcome of :meth:`~sweeps.tracking.layout.Tracker.claim` for one configuration."""

    run_id: str
    stored: Result | None
    """The result of an earlier FINISHED run (then nothing is to be trained), else None."""


def stored_result(tags: Mapping[str, str]) -> Result:
    """The :class:`Result` a FINISHED configuration run holds, from its tags."""
    summary = json.loads(tags[SUMMARY]) if SUMMARY in tags else {}
    return Result(outcome=Outcome(tags.get(OUTCOME, Outcome.UNSOLVED.value)), summary=summary)


def metric_value(summary: Mapping[str, Any], metric: str) -> float | None:
    """``summary[metric]`` as a finite float, or None when absent or not finite."""
    return finite_or_none(summary.get(metric))
