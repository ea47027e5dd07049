"""The MLflow layout of a sweep (DESIGN.md, "What MLflow holds"), written exactly once.

- One experiment per spec, named after it.
- One parent run per sweep (run name = sweep id), tagged ``ortho.sweep_id``, ``ortho.spec``,
  ``ortho.profile``, ``ortho.spec_sha256``, ``ortho.git_sha``; the resolved spec
  (``resolved_spec.yaml``) and the spec file it came from (``spec/<name>.yaml``, read back by
  ``ortho sweep resume``) are its artifacts.
- One child run per configuration: ``mlflow.parentRunId``, ``ortho.sweep_id``,
  ``ortho.trial_key`` and, once it ends, ``ortho.outcome``; ``ortho.node`` (the Ray node id,
  distinct even for two nodes on one host), ``ortho.node_ip`` and ``ortho.hostname`` say where
  it ran. Params are the configuration as trained; metrics are logged per step and the final
  summaries as metrics of the same names as in ``Result.summary``; ``metrics.csv`` holds
  every reported step, ``traceback.txt`` the error of a failed run.

Exactly once: :meth:`Tracker.claim` looks a configuration up by (sweep id, trial key) before
it is trained. A FINISHED run is kept and its stored result returned, so the configuration
is skipped; any other run of that key (interrupted, killed or failed) is deleted and a fresh
run is created. Replacing rather than reusing keeps the metric history of one attempt per
run; deleted runs go to MLflow's trash (``mlflow gc`` purges them). ``ortho.attempt`` counts
the attempts.

Concurrent writers: every call goes through :meth:`Tracker.call`, which retries "database
is locked" with exponential backoff and, for a SQLite store, also holds an exclusive lock on
``<db>.lock`` so that the trial processes of one machine write one at a time (SQLite has a
single writer anyway). No environment variables or credentials are ever logged: a URI
printed by ``sweeps`` goes through :func:`redact` first, and values put into a search filter
through :func:`quote`.

Liveness: the parent run of a sweep names its driver (``ortho.driver`` = ``host:pid``) and
carries a heartbeat (``ortho.heartbeat``, seconds since the epoch, refreshed every
:data:`HEARTBEAT_SECONDS` while Tune runs). A RUNNING sweep is alive when its driver's
process exists on this host, or, driven from another host, when its heartbeat is younger
than :data:`ALIVE_SECONDS` (:func:`driver_alive`); one that is not was killed without ending
its run (SIGKILL, a lost node) and may be resumed.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import math
import os
import random
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

from ortho_core.reporting import Outcome, Result

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

T = TypeVar("T")

SWEEP_ID = "ortho.sweep_id"
SPEC = "ortho.spec"
PROFILE = "ortho.profile"
SPEC_SHA256 = "ortho.spec_sha256"
GIT_SHA = "ortho.git_sha"
ROLE = "ortho.role"
"""``sweep`` on a parent run, ``configuration`` on a child run (what searches filter on)."""
N_CONFIGS = "ortho.n_configs"
"""Parent: how many configurations the sweep has in all."""
METRIC = "ortho.metric"
MODE = "ortho.mode"
TRIAL_KEY = "ortho.trial_key"
OUTCOME = "ortho.outcome"
NODE = "ortho.node"
NODE_IP = "ortho.node_ip"
HOSTNAME = "ortho.hostname"
ATTEMPT = "ortho.attempt"
CELL = "ortho.cell"
"""Child: index of the spec cell the configuration belongs to."""
OPTUNA_PARAMS = "ortho.optuna_params"
"""Child of an Optuna cell: JSON of the values Optuna chose (read back on resume)."""
SUMMARY = "ortho.summary"
"""Child: JSON of ``Result.summary`` (exact types; also logged as metrics)."""
STOPPED_EARLY = "ortho.stopped_early"
"""Child: ``true`` when the early-stopping scheduler ended it."""
DRIVER = "ortho.driver"
"""Parent: ``host:pid`` of the process that drives the sweep (set again by a resume)."""
HEARTBEAT = "ortho.heartbeat"
"""Parent: when the driver last said it was alive (seconds since the epoch)."""
PARENT = "mlflow.parentRunId"

RESOLVED_ARTIFACT = "resolved_spec.yaml"
SPEC_ARTIFACT_DIR = "spec"
METRICS_CSV = "metrics.csv"
TRACEBACK = "traceback.txt"

BATCH = 1000
"""MLflow's limit of metrics per ``log_batch`` call."""
PARAM_BATCH = 100
"""MLflow's limit of params per ``log_batch`` call."""
RETRIES = 12
"""Attempts of one call on a locked database: backoff 0.05 s doubling to 2 s, about 15 s."""
HEARTBEAT_SECONDS = 30.0
"""How often a running driver refreshes its heartbeat."""
ALIVE_SECONDS = 120.0
"""A driver on another host whose heartbeat is younger than this counts as alive (four
heartbeats, for a busy driver and clocks a little apart)."""

_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)([^\s/?#@:]*):(\S*)@")
"""``scheme://user:password@``; the password runs to the last ``@`` of the word, so that one
written with a raw ``@``, ``/`` or ``?`` in it is masked whole."""
_SECRET_QUERY = re.compile(r"([?&][^\s=&#]*(?:password|passwd|pwd|secret|token)[^\s=&#]*=)"
                           r"[^\s&#]*", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with the credentials of every URI in it masked: the password of
    ``scheme://user:password@host`` and the values of query parameters that name a password,
    secret or token (``postgresql://u:***@db/mlflow``, ``...?sslpassword=***``)."""
    return _SECRET_QUERY.sub(r"\1***", _USERINFO.sub(r"\1\2:***@", text))


def quote(value: str) -> str:
    """``value`` as a string literal of an MLflow search filter.

    MLflow strips the quotes of a literal and unescapes nothing, so a value is quoted with
    the quote it does not contain; one with both quotes or a backslash cannot be written
    (``ValueError``)."""
    if "\\" in value or ("'" in value and '"' in value):
        raise ValueError(f"cannot search MLflow for {value!r}: quotes of both kinds or a "
                         "backslash")
    return f'"{value}"' if "'" in value else f"'{value}'"


def home_dir(home: str | os.PathLike[str] | None = None) -> Path:
    """The sweeps' home: ``home``, else ``$ORTHO_HOME``, else ``./ortho-runs``; absolute."""
    raw = home if home is not None else os.environ.get("ORTHO_HOME") or "ortho-runs"
    return Path(raw).expanduser().resolve()


def tracking_uri(uri: str | None, home: Path) -> str:
    """The tracking URI, absolute, so that trials in other working directories agree.

    ``uri`` None falls back to ``$ORTHO_TRACKING_URI``, then to the embedded store
    ``sqlite:///<home>/mlflow.db`` (``$MLFLOW_TRACKING_URI`` is not consulted: with no flags
    everything stays under ``home``). A relative SQLite path or a plain path is made absolute
    against this process's working directory; server URIs (``http://``, ``https://``,
    ``postgresql://``, ...) pass unchanged.
    """
    uri = uri or os.environ.get("ORTHO_TRACKING_URI") or None
    if uri is None:
        return f"sqlite:///{home / 'mlflow.db'}"
    if uri.startswith("sqlite:///"):
        path = uri[len("sqlite:///"):]
        return f"sqlite:///{Path(path).expanduser().resolve()}"
    if uri.startswith("file:"):
        return Path(urlparse(uri).path).expanduser().resolve().as_uri()
    if "://" not in uri:
        return str(Path(uri).expanduser().resolve())
    return uri


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, else None."""
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


def artifact_location(uri: str, experiment: str) -> str | None:
    """Where a new experiment keeps its artifacts: beside a SQLite database
    (``<dir>/artifacts/<experiment>``); a server decides for itself (None)."""
    db = sqlite_path(uri)
    return (db.parent / "artifacts" / experiment).as_uri() if db is not None else None


def git_sha(root: Path) -> str:
    """``git rev-parse HEAD`` of ``root``, or ``unknown`` outside git or before a commit."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and sha else "unknown"


def node_tags() -> dict[str, str]:
    """Where this process runs: Ray node id (when inside Ray), IP and hostname."""
    tags = {HOSTNAME: socket.gethostname()}
    try:
        import ray

        if ray.is_initialized():
            tags[NODE] = ray.get_runtime_context().get_node_id()
            tags[NODE_IP] = ray.util.get_node_ip_address()
    except ImportError:
        pass
    tags.setdefault(NODE, tags[HOSTNAME])
    return tags


def driver_tag() -> str:
    """``host:pid`` of this process (the :data:`DRIVER` tag)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _pid_exists(pid: int) -> bool:
    """Whether process ``pid`` exists on this host and is not a zombie (a killed process
    that its parent has not reaped yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (not Linux), or it just ended: trust kill()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def driver_alive(driver: str, heartbeat: float | None, now: float | None = None) -> bool:
    """Whether the driver ``host:pid`` still runs: its process exists, when ``host`` is this
    host; its ``heartbeat`` is younger than :data:`ALIVE_SECONDS`, when it is another."""
    host, _, pid = driver.rpartition(":")
    if not host or not pid.isdigit():
        return False
    if host == socket.gethostname():
        return _pid_exists(int(pid))
    now = time.time() if now is None else now
    return heartbeat is not None and now - heartbeat < ALIVE_SECONDS


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

    @property
    def alive(self) -> bool:
        """Whether it is RUNNING and its driver alive (:func:`driver_alive`)."""
        return self.status == "RUNNING" and driver_alive(self.driver, self.heartbeat)


def _sweep_record(run: Any) -> SweepRecord:
    tags = run.data.tags
    beat = tags.get(HEARTBEAT)
    return SweepRecord(
        ref=SweepRef(run.info.experiment_id, tags[SWEEP_ID], run.info.run_id),
        spec=tags.get(SPEC, ""), profile=tags.get(PROFILE, ""),
        spec_sha256=tags.get(SPEC_SHA256, ""), status=run.info.status,
        start_time=run.info.start_time / 1000,
        end_time=run.info.end_time / 1000 if run.info.end_time else None,
        n_configs=int(tags.get(N_CONFIGS, "0")), metric=tags.get(METRIC, ""),
        mode=tags.get(MODE, "max"), driver=tags.get(DRIVER, ""),
        heartbeat=float(beat) if beat else None)


@dataclass(frozen=True)
class Claim:
    """The outcome of :meth:`Tracker.claim` for one configuration."""

    run_id: str
    stored: Result | None
    """The result of an earlier FINISHED run (then nothing is to be trained), else None."""


class _FileLock:
    """An exclusive, re-entrant lock: ``flock`` on a file between the processes of this
    machine, a thread lock between the threads of this process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._thread_lock = threading.RLock()
        self._fd: int | None = None
        self._depth = 0

    @contextmanager
    def held(self) -> Any:
        with self._thread_lock:
            if self._depth == 0:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fd is not None:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
                    os.close(self._fd)
                    self._fd = None


@contextmanager
def _no_lock() -> Any:
    yield


def _now() -> str:
    """Seconds since the epoch, as a tag value."""
    return f"{time.time():.0f}"


def _is_transient(err: Exception) -> bool:
    text = str(err).lower()
    return "database is locked" in text or "database is busy" in text


def _param_value(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


def _jsonable(value: Any) -> Any:
    """numpy arrays, tensors and their scalars as plain lists and numbers."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def metrics_csv(rows: Sequence[tuple[int, Mapping[str, float]]]) -> str:
    """Stepwise metrics as CSV: a ``step`` column, then one column per metric name in the
    order first reported; one row per report (empty where a metric was not reported)."""
    names: dict[str, None] = {}
    for _, metrics in rows:
        names.update(dict.fromkeys(metrics))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["step", *names])
    for step, metrics in rows:
        writer.writerow([step, *(metrics.get(n, "") for n in names)])
    return out.getvalue()


class Tracker:
    """An ``MlflowClient`` whose calls survive concurrent writers, plus the sweep layout.

    One per process and URI (:func:`tracker`): building a SQLite store checks the schema,
    which costs a second the first time.
    """

    def __init__(self, uri: str) -> None:
        from mlflow import MlflowClient

        self.uri = uri
        db = sqlite_path(uri)
        self._lock = _FileLock(db.with_name(db.name + ".lock")) if db is not None else None
        if db is not None:
            db.parent.mkdir(parents=True, exist_ok=True)
        self.client = self.call(MlflowClient, tracking_uri=uri)

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` under the SQLite lock, retried while the database is
        locked (backoff with jitter)."""
        delay = 0.05
        for attempt in range(RETRIES):
            try:
                with self._locked():
                    return fn(*args, **kwargs)
            except Exception as err:
                if not _is_transient(err) or attempt == RETRIES - 1:
                    raise
            time.sleep(delay * (1 + random.random()))
            delay = min(2 * delay, 2.0)
        raise AssertionError("unreachable")

    def _locked(self) -> Any:
        return self._lock.held() if self._lock is not None else _no_lock()

    # -- experiments and sweeps ---------------------------------------------------------

    def experiment_id(self, name: str) -> str:
        """The id of experiment ``name``, created (artifacts beside a SQLite store) or
        restored from the trash if need be."""
        with self._locked():
            exp = self.call(self.client.get_experiment_by_name, name)
            if exp is None:
                return self.call(self.client.create_experiment, name,
                                 artifact_location=artifact_location(self.uri, name))
            if exp.lifecycle_stage == "deleted":
                self.call(self.client.restore_experiment, exp.experiment_id)
            return exp.experiment_id

    def start_sweep(self, experiment_id: str, sweep_id: str, tags: Mapping[str, str],
                    texts: Mapping[str, str]) -> SweepRef:
        """Create the parent run of a new sweep with ``tags`` (plus role, sweep id, this
        process as its driver and a first heartbeat) and the text artifacts ``texts``
        (artifact path -> content)."""
        run = self.call(self.client.create_run, experiment_id, run_name=sweep_id,
                        tags={**tags, SWEEP_ID: sweep_id, ROLE: "sweep",
                              DRIVER: driver_tag(), HEARTBEAT: _now()})
        run_id = run.info.run_id
        for path, text in texts.items():
            self.call(self.client.log_text, run_id, text, path)
        return SweepRef(experiment_id, sweep_id, run_id)

    def reopen_sweep(self, ref: SweepRef) -> None:
        """Mark a resumed sweep's parent run as running again, driven by this process."""
        self.call(self.client.update_run, ref.parent_run_id, status="RUNNING")
        self.call(self.client.set_tag, ref.parent_run_id, DRIVER, driver_tag())
        self.heartbeat(ref)

    def heartbeat(self, ref: SweepRef) -> None:
        """Say that the sweep's driver is alive now."""
        self.call(self.client.set_tag, ref.parent_run_id, HEARTBEAT, _now())

    def end_sweep(self, ref: SweepRef, status: str, metrics: Mapping[str, float]) -> None:
        """End the parent run with ``status`` (FINISHED or KILLED) and summary ``metrics``."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(k, float(v), now, 0) for k, v in metrics.items()]
        self.call(self.client.log_batch, ref.parent_run_id, metrics=batch)
        self.call(self.client.set_terminated, ref.parent_run_id, status)

    def _sweep_runs(self, query: str, limit: int) -> list[Any]:
        from mlflow.entities import ViewType

        exps = self.call(self.client.search_experiments, view_type=ViewType.ACTIVE_ONLY)
        if not exps:
            return []
        return self.call(self.client.search_runs, [e.experiment_id for e in exps],
                         f"tags.`{ROLE}` = 'sweep'{query}", max_results=limit,
                         order_by=["attributes.start_time DESC"])

    def find_sweep(self, sweep_id: str | None = None, *,
                   unfinished: bool = False) -> SweepRecord | None:
        """The sweep ``sweep_id``, or the latest one (the latest not FINISHED when
        ``unfinished``), or None."""
        query = ""
        if sweep_id is not None:
            query += f" and tags.`{SWEEP_ID}` = {quote(sweep_id)}"
        if unfinished:
            query += " and attributes.status != 'FINISHED'"
        runs = self._sweep_runs(query, 1)
        return _sweep_record(runs[0]) if runs else None

    def list_sweeps(self, limit: int) -> list[SweepRecord]:
        """The latest ``limit`` sweeps, latest first."""
        return [_sweep_record(r) for r in self._sweep_runs("", limit)
                if SWEEP_ID in r.data.tags]

    def download_spec(self, ref: SweepRef, dest: Path) -> Path:
        """Download the spec file a sweep was started from into ``dest``; its path."""
        files = self.call(self.client.list_artifacts, ref.parent_run_id, SPEC_ARTIFACT_DIR)
        if not files:
            raise FileNotFoundError(f"sweep {ref.sweep_id} has no {SPEC_ARTIFACT_DIR}/ artifact")
        dest.mkdir(parents=True, exist_ok=True)
        local = self.call(self.client.download_artifacts, ref.parent_run_id, files[0].path,
                          str(dest))
        return Path(local)

    def configurations(self, ref: SweepRef) -> list[Any]:
        """Every active child run of the sweep (MLflow ``Run`` objects)."""
        query = (f"tags.`{SWEEP_ID}` = {quote(ref.sweep_id)} "
                 f"and tags.`{ROLE}` = 'configuration'")
        runs: list[Any] = []
        token = None
        while True:
            page = self.call(self.client.search_runs, [ref.experiment_id], query,
                             max_results=1000, page_token=token)
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    def discard_unfinished(self, ref: SweepRef) -> int:
        """Delete every child run of the sweep that is not FINISHED (before a resume
        re-runs those configurations); how many."""
        doomed = [r.info.run_id for r in self.configurations(ref) if r.info.status != "FINISHED"]
        for run_id in doomed:
            self.call(self.client.delete_run, run_id)
        return len(doomed)

    def mark_killed(self, ref: SweepRef) -> int:
        """End every RUNNING child run of an interrupted sweep as KILLED; how many."""
        live = [r.info.run_id for r in self.configurations(ref) if r.info.status == "RUNNING"]
        for run_id in live:
            self.call(self.client.set_terminated, run_id, "KILLED")
        return len(live)

    # -- configuration runs -------------------------------------------------------------

    def claim(self, ref: SweepRef, key: str, params: Mapping[str, Any],
              tags: Mapping[str, str]) -> Claim:
        """Look configuration ``key`` up in the sweep; return its stored result if a run of
        it FINISHED, else replace any other runs of it by a new RUNNING run with ``params``
        and ``tags`` (see the module docstring)."""
        from mlflow.entities import Param

        query = (f"tags.`{SWEEP_ID}` = {quote(ref.sweep_id)} and tags.`{TRIAL_KEY}` = "
                 f"{quote(key)} and tags.`{ROLE}` = 'configuration'")
        with self._locked():
            runs = self.call(self.client.search_runs, [ref.experiment_id], query,
                             order_by=["attributes.start_time ASC"])
            done = [r for r in runs if r.info.status == "FINISHED"]
            for r in runs:
                if not done or r is not done[0]:
                    self.call(self.client.delete_run, r.info.run_id)
            if done:
                return Claim(done[0].info.run_id, stored_result(done[0]))
            attempt = 1 + max((int(r.data.tags.get(ATTEMPT, "1")) for r in runs), default=0)
            run = self.call(self.client.create_run, ref.experiment_id, run_name=key,
                            tags={**tags, PARENT: ref.parent_run_id, SWEEP_ID: ref.sweep_id,
                                  TRIAL_KEY: key, ROLE: "configuration",
                                  ATTEMPT: str(attempt)})
        run_id = run.info.run_id
        items = [Param(k, _param_value(v)) for k, v in params.items()]
        for i in range(0, len(items), PARAM_BATCH):
            self.call(self.client.log_batch, run_id, params=items[i:i + PARAM_BATCH])
        return Claim(run_id, None)

    def log_metrics(self, run_id: str, metrics: Sequence[Any]) -> None:
        """Log MLflow ``Metric`` entities in batches of :data:`BATCH`."""
        for i in range(0, len(metrics), BATCH):
            self.call(self.client.log_batch, run_id, metrics=list(metrics[i:i + BATCH]))

    def finish(self, run_id: str, result: Result, step: int,
               rows: Sequence[tuple[int, Mapping[str, float]]],
               extra_tags: Mapping[str, str] | None = None) -> None:
        """End a configuration's run: summaries as metrics at ``step`` (unless a stepwise
        metric of that name already holds the value there), the metrics CSV,
        the result's artifacts (JSON), the outcome tag, status FINISHED."""
        from mlflow.entities import Metric, RunTag

        now = int(time.time() * 1000)
        last = rows[-1][1] if rows else {}
        summary = [Metric(k, float(v), now, step) for k, v in result.summary.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)
                   and last.get(k) != float(v)]  # no second point for a stepwise metric
        self.call(self.client.log_text, run_id, metrics_csv(rows), METRICS_CSV)
        for name, value in result.artifacts.items():
            self.call(self.client.log_text, run_id, json.dumps(value, default=_jsonable),
                      f"{name}.json")
        tags = {OUTCOME: Outcome(result.outcome).value,
                SUMMARY: json.dumps(result.summary, default=_jsonable), **(extra_tags or {})}
        self.call(self.client.log_batch, run_id, metrics=summary[:BATCH],
                  tags=[RunTag(k, v) for k, v in tags.items()])
        self.log_metrics(run_id, summary[BATCH:])
        self.call(self.client.set_terminated, run_id, "FINISHED")

    def fail(self, run_id: str, error: str,
             rows: Sequence[tuple[int, Mapping[str, float]]] = ()) -> None:
        """End a configuration's run as failed: ``traceback.txt``, the metrics CSV so far,
        outcome ``failed``, status FAILED."""
        self.call(self.client.log_text, run_id, error, TRACEBACK)
        if rows:
            self.call(self.client.log_text, run_id, metrics_csv(rows), METRICS_CSV)
        self.call(self.client.set_tag, run_id, OUTCOME, Outcome.FAILED.value)
        self.call(self.client.set_terminated, run_id, "FAILED")

    def history_rows(self, run_id: str) -> list[tuple[int, dict[str, float]]]:
        """A run's stepwise metrics read back from MLflow, as rows for :func:`metrics_csv`."""
        rows: dict[int, dict[str, float]] = {}
        for name in self.call(self.client.get_run, run_id).data.metrics:
            for m in self.call(self.client.get_metric_history, run_id, name):
                rows.setdefault(m.step, {})[name] = m.value
        return sorted(rows.items())

    def kill(self, run_id: str) -> None:
        """End a run whose trial was interrupted (it is replaced on resume)."""
        self.call(self.client.set_terminated, run_id, "KILLED")


def stored_result(run: Any) -> Result:
    """The :class:`Result` a FINISHED configuration run holds."""
    tags = run.data.tags
    summary = json.loads(tags[SUMMARY]) if SUMMARY in tags else {}
    return Result(outcome=Outcome(tags.get(OUTCOME, Outcome.UNSOLVED.value)), summary=summary)


def metric_value(summary: Mapping[str, Any], metric: str) -> float | None:
    """``summary[metric]`` as a finite float, or None when absent or not finite."""
    value = summary.get(metric)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


_TRACKERS: dict[str, Tracker] = {}


def tracker(uri: str) -> Tracker:
    """The process's :class:`Tracker` for ``uri`` (built once)."""
    if uri not in _TRACKERS:
        _TRACKERS[uri] = Tracker(uri)
    return _TRACKERS[uri]
