"""Build MLflow stores for tests through the real :class:`~sweeps.tracking.Tracker` (as
``optuna.testing`` does for Optuna's storages), so that the layout a test reads is the one a
sweep writes: no test writes an ``ortho.*`` tag by hand.

    uri = sqlite_store(tmp_path)
    t = tracking.tracker(uri)
    ref = start_sweep(t, "spec", "s1", profile="smoke", resolved_text=text)
    track(t, ref, "key", {"lr": 0.1}, result=Result(Outcome.SOLVED, {"score": 1.0}),
          rows=[(100, {"loss": 0.5})])
    t.end_sweep(ref, "FINISHED", {})

:func:`track` ends a configuration's run as a trial does (finished, failed, killed, or left
running as by a killed driver). :func:`raced_claims` produces what only a race produces: two
runs of one trial key, from claims that each searched before the other created its run
(possible against a tracking server, where claims take no lock).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from ortho_core.reporting import Result
from sweeps import tracking
from sweeps.tracking.cells import expected_cells

__all__ = ["drive_from", "raced_claims", "sqlite_store", "start_sweep", "track"]

End = Literal["finished", "failed", "killed", "running"]
"""How :func:`track` leaves a run: FINISHED with a result, FAILED with a traceback, KILLED
(an interrupted trial), or RUNNING (its driver was killed with it)."""

@functools.cache
def _template_db() -> Path:
    """An empty, migrated SQLite store, made once per process (creating one runs MLflow's
    migrations, seconds on a busy machine) and removed when the process exits."""
    directory = Path(tempfile.mkdtemp(prefix="ortho-template-"))
    atexit.register(shutil.rmtree, directory, True)
    tracking.Tracker(f"sqlite:///{directory / 'mlflow.db'}")
    return directory / "mlflow.db"


def sqlite_store(directory: Path) -> str:
    """An empty embedded store ``<directory>/mlflow.db`` (created with its directory), laid
    out as the default one (artifacts beside it); its tracking URI."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(_template_db(), directory / "mlflow.db")
    return f"sqlite:///{directory.resolve() / 'mlflow.db'}"


def start_sweep(tracker: tracking.Tracker, spec: str, sweep_id: str, *, profile: str,
                resolved_text: str | None = None, n_configs: int | None = None,
                metric: str = "", mode: str = "max", git_sha: str = "unknown",
                ) -> tracking.SweepRef:
    """Start sweep ``sweep_id`` of ``spec`` (its experiment) with the tags the runner gives a
    parent run. With ``resolved_text``, the resolved spec is kept as the runner keeps it
    (the tracker adds the expected cells) and ``n_configs`` defaults to the configurations
    it defines; without, the sweep has no artifacts, as one tracked before they existed."""
    texts, sha = {}, None
    if resolved_text is not None:
        texts[tracking.RESOLVED_ARTIFACT] = resolved_text
        sha = hashlib.sha256(resolved_text.encode()).hexdigest()
        if n_configs is None:
            n_configs = sum(c[tracking.TRIALS] for c in expected_cells(resolved_text))
    tags = tracking.sweep_tags(spec=spec, profile=profile,
                               code={tracking.GIT_SHA: git_sha}, metric=metric,
                               mode=mode, spec_sha256=sha, n_configs=n_configs)
    return tracker.start_sweep(tracker.experiment_id(spec), sweep_id, tags, texts)


def drive_from(tracker: tracking.Tracker, ref: tracking.SweepRef, driver: str,
               heartbeat: float | None = None) -> None:
    """Make ``driver`` (``host:pid``) the sweep's driver and, with ``heartbeat`` (seconds
    since the epoch), its last sign of life: the tags a driver on another host, or one killed
    since, leaves behind (what :func:`sweeps.tracking.driver_alive` judges)."""
    tracker.call(tracker.client.set_tag, ref.parent_run_id, tracking.DRIVER, driver)
    if heartbeat is not None:
        tracker.call(tracker.client.set_tag, ref.parent_run_id, tracking.HEARTBEAT,
                     f"{heartbeat:.0f}")


def track(tracker: tracking.Tracker, ref: tracking.SweepRef, key: str,
          params: Mapping[str, Any], *, end: End = "finished", result: Result | None = None,
          rows: Sequence[tuple[int, Mapping[str, float]]] = (), step: int | None = None,
          error: str = "Traceback (most recent call last):\nRuntimeError: test failure",
          tags: Mapping[str, str] | None = None) -> str:
    """Claim configuration ``key`` of the sweep with ``params`` (with this process's node
    tags, as a trial claims, and ``tags``), report ``rows`` (step, metrics) as its stepwise
    metrics, then end it by ``end``; the run's id. A finished run logs ``result`` (its summaries at
    ``step``, default the last reported step). Reports are stamped a millisecond apart and
    before the run ends, so that a summary logged at the last step is that step's latest
    value."""
    from mlflow.entities import Metric

    claim = tracker.claim(ref, key, params, {**tracking.node_tags(), **(tags or {})})
    if claim.stored is not None:
        raise ValueError(f"configuration {key} already finished in sweep {ref.sweep_id}")
    now = int(time.time() * 1000) - len(rows) - 1
    tracker.log_metrics(claim.run_id, [Metric(k, float(v), now + i, s)
                                       for i, (s, values) in enumerate(rows)
                                       for k, v in values.items()])
    if end == "finished":
        if result is None:
            raise ValueError("a finished run needs its result")
        last = rows[-1][0] if rows else 0
        tracker.finish(claim.run_id, result, last if step is None else step, rows)
    elif end == "failed":
        tracker.fail(claim.run_id, error, rows)
    elif end == "killed":
        tracker.kill(claim.run_id)
    return claim.run_id


@contextmanager
def raced_claims(tracker: tracking.Tracker) -> Iterator[None]:
    """Claims made inside raced with every claim before them: each searched for its key
    before the others had created their runs, so none is found, kept or replaced, and
    another run of the key is created (what two drivers of one sweep can do against a
    tracking server). Only the tracker's searches are affected (MLflow's, and a claim's
    lookup in the store's tables), and only inside."""
    from mlflow.store.entities import PagedList

    def nothing_yet(*args: Any, **kwargs: Any) -> PagedList[Any]:
        return PagedList([], None)

    tables = tracker.tables
    tracker.client.search_runs = nothing_yet  # type: ignore[method-assign]
    if tables is not None:
        tables.tagged_runs = lambda *args, **kwargs: {}  # type: ignore[method-assign]
    try:
        yield
    finally:
        del tracker.client.search_runs
        if tables is not None:
            del tables.tagged_runs
