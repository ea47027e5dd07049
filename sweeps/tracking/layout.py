"""The one writer of a sweep's MLflow layout (DESIGN.md, "What MLflow holds";
:mod:`sweeps.contract` names its tags and artifacts).

- One experiment per spec, named after it.
- One parent run per sweep (named ``profile · <end of the sweep id>``: :mod:`sweeps.naming`), tagged
  ``ortho.sweep_id``, ``ortho.spec``, ``ortho.profile``, ``ortho.spec_sha256``, and the
  code's ``ortho.git_sha``, ``ortho.git_dirty``, ``ortho.version`` (as is every child run),
  described by ``mlflow.note.content``; the resolved spec
  (``resolved_spec.yaml``), the cells it defines (``expected_cells.json``, for ``analysis``)
  and the spec file it came from (``spec/<name>.yaml``, read back by ``ortho sweep resume``)
  are its artifacts.
- One child run per configuration, named by the keys that vary within the sweep
  (:mod:`sweeps.naming`; the trial key where no name is given): ``mlflow.parentRunId``,
  ``ortho.sweep_id``, ``ortho.trial_key`` and, once it ends, ``ortho.outcome``; ``ortho.node``
  (the Ray node id, distinct even for two nodes on one host), ``ortho.node_ip`` and
  ``ortho.hostname`` say where it ran. Params are the configuration as trained; metrics are
  logged per step and the final summaries as metrics of the same names as in
  ``Result.summary``; ``metrics.csv`` holds every reported step, ``traceback.txt`` the error
  of a failed run.

Exactly once: :meth:`Tracker.claim` looks a configuration up by (sweep id, trial key) before
it is trained. A FINISHED run is kept and its stored result returned, so the configuration
is skipped; any other run of that key (interrupted, killed or failed) is deleted and a fresh
run is created. Replacing rather than reusing keeps the metric history of one attempt per
run; deleted runs go to MLflow's trash (``mlflow gc`` purges them). ``ortho.attempt`` counts
the attempts. A run replaced while still RUNNING lost its trial without a word (its node or
Ray actor died, or its driver was killed): it is ended KILLED first (:meth:`Tracker.retire`),
so that no run, in the trash or not, stays RUNNING once nothing trains it. Concurrent
writers: every call goes through :meth:`Tracker.call` (:mod:`sweeps.tracking.retry`). MLflow
is imported when a tracker is built, not before, and told neither to send telemetry nor to
print a link for every run that ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from ortho_core.errors import ConfigError
from ortho_core.reporting import Outcome, Result
from sweeps import contract
from sweeps.tracking import bootstrap, retry
from sweeps.tracking.liveness import driver_tag
from sweeps.tracking.metrics_csv import metrics_csv
from sweeps.tracking.records import Claim, SweepRecord, SweepRef, stored_result, sweep_record
from sweeps.tracking.tables import (
    StoreTables,
    TaggedRun,
    checked_param,
    is_database,
    store_tables,
)
from sweeps.tracking.uri import artifact_location, local_folder, quote, sqlite_path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# A server store would otherwise print "View run <url>" for every run that ends.
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")

T = TypeVar("T")

SERVED_ARTIFACTS = "mlflow-artifacts:"
"""The scheme of artifacts that only a tracking server (``--serve-artifacts``) stores."""

BATCH = 1000
"""MLflow's limit of metrics per ``log_batch`` call."""
PARAM_BATCH = 100
"""MLflow's limit of params per ``log_batch`` call."""

Rows = Sequence[tuple[int, Mapping[str, float]]]
"""Stepwise metrics: (step, metric name -> value) per report."""
STAGING_PREFIX = ".artifact.uploading."
"""The name MLflow's local artifact repository gives a file it is writing, which its
``list_artifacts`` hides (``_TEMP_ARTIFACT_PREFIX``): a file :func:`write_texts` left half
written, its process killed, is hidden too."""
STATE_TAGS = (contract.TRIAL_KEY, contract.ATTEMPT, contract.OUTCOME, contract.SUMMARY)
"""The tags of a configuration's run that :meth:`Tracker.states` reads: what a sweep's
progress, its end and a resume need of each run."""


def sweep_tags(*, spec: str, profile: str, code: Mapping[str, str], metric: str, mode: str,
               spec_sha256: str | None = None, n_configs: int | None = None,
               note: str = "", name: str = "") -> dict[str, str]:
    """The tags of a sweep's parent run that describe it (DESIGN.md "What MLflow holds"), for
    :meth:`Tracker.start_sweep`, which adds the role, sweep id, driver and heartbeat.
    ``code`` is the provenance of the code (:meth:`sweeps.provenance.Provenance.tags`). The
    resolved spec's hash and the configuration count are left out when not known (a sweep
    tracked before they were); ``note`` is the description MLflow's UI shows, ``name`` the
    run's name (:func:`sweeps.naming.sweep_name`; default the sweep id)."""
    tags = {contract.SPEC: spec, contract.PROFILE: profile, **code,
            contract.METRIC: metric, contract.MODE: mode}
    if spec_sha256 is not None:
        tags[contract.SPEC_SHA256] = spec_sha256
    if n_configs is not None:
        tags[contract.N_CONFIGS] = str(n_configs)
    if note:
        tags[contract.NOTE] = note
    if name:
        tags[contract.RUN_NAME] = name
    return tags


def _now() -> str:
    """Seconds since the epoch, as a tag value."""
    return f"{time.time():.0f}"


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


class Tracker:
    """An ``MlflowClient`` whose calls survive concurrent writers, plus the sweep layout.

    One per process and URI (:func:`tracker`). A SQLite store that does not exist yet is
    made from a template (:mod:`sweeps.tracking.bootstrap`) rather than by MLflow's
    migrations, which cost a second or more. A configuration's params, metric values and
    ending go straight into the tables of a SQLite or PostgreSQL store
    (:mod:`sweeps.tracking.tables`: the rows MLflow's client writes, at a fraction of its
    cost), and through MLflow's client into a server.
    """

    def __init__(self, uri: str) -> None:
        from mlflow import MlflowClient

        self.uri = uri
        self._lock = retry.store_lock(uri)
        db = sqlite_path(uri)
        if db is not None:
            with self._locked():
                bootstrap.create_sqlite_store(db)
        self.client = self.call(MlflowClient, tracking_uri=contract.database_url(uri))
        self.direct = True
        """Whether writes of configuration runs go straight into the store's tables where
        it allows that (:attr:`tables`); False sends every write through MLflow's client."""
        self._tables: StoreTables | None = None
        self._tables_looked = False

    @property
    def tables(self) -> StoreTables | None:
        """The store's tables (:func:`~sweeps.tracking.tables.store_tables`), looked up on
        first use, once MLflow has made them; None for a server, another schema, or when
        not :attr:`direct`."""
        if not self.direct:
            return None
        if not self._tables_looked:
            if is_database(self.uri):
                self.call(self.client.search_experiments, max_results=1)
                self._tables = self.call(store_tables, self.uri)
            self._tables_looked = True
        return self._tables

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` under the SQLite lock, retried while the database is
        locked (:func:`sweeps.tracking.retry.call`)."""
        return retry.call(self._lock, fn, *args, **kwargs)

    def _locked(self) -> Any:
        return retry.held(self._lock)

    # -- experiments and sweeps ---------------------------------------------------------

    def experiment_id(self, name: str, home: Path | None = None) -> str:
        """The id of experiment ``name``, created (artifacts beside a SQLite store, or under
        ``home`` for another database: :func:`~sweeps.tracking.uri.artifact_location`) or
        restored from the trash if need be. ``ConfigError`` (field ``tracking_uri``) where it
        was created through a tracking server that serves its artifacts
        (:data:`SERVED_ARTIFACTS`) and this tracker writes into the database directly: the
        sweep would stop at its first artifact."""
        with self._locked():
            exp = self.call(self.client.get_experiment_by_name, name)
            if exp is None:
                return self.call(self.client.create_experiment, name,
                                 artifact_location=artifact_location(self.uri, name, home))
            if (exp.artifact_location.startswith(SERVED_ARTIFACTS)
                    and not self.uri.startswith(("http://", "https://"))):
                raise ConfigError(
                    "tracking_uri", f"the tracking server's http(s):// address: experiment "
                    f"{name} keeps its artifacts behind a tracking server "
                    f"({exp.artifact_location}), which a run written into the database "
                    "directly cannot reach", contract.redact(self.uri))
            if exp.lifecycle_stage == "deleted":
                self.call(self.client.restore_experiment, exp.experiment_id)
            return exp.experiment_id

    def start_sweep(self, experiment_id: str, sweep_id: str, tags: Mapping[str, str],
                    texts: Mapping[str, str], start_time: float | None = None) -> SweepRef:
        """Create the parent run of a new sweep with ``tags`` (plus role, sweep id, this
        process as its driver and a first heartbeat) and the text artifacts ``texts``
        (artifact path -> content); with a resolved spec among them, also the cells it
        defines (``expected_cells.json``). ``start_time`` (seconds since the epoch; default
        now) is when the sweep began: the command that runs it, Ray's start included."""
        texts = dict(texts)
        if contract.RESOLVED_ARTIFACT in texts:
            from sweeps.tracking.cells import expected_cells_json

            texts.setdefault(contract.EXPECTED_CELLS_ARTIFACT,
                             expected_cells_json(texts[contract.RESOLVED_ARTIFACT]))
        run = self.call(self.client.create_run, experiment_id,
                        start_time=None if start_time is None else int(start_time * 1000),
                        run_name=tags.get(contract.RUN_NAME, sweep_id),
                        tags={**tags, contract.SWEEP_ID: sweep_id,
                              contract.ROLE: contract.ROLE_SWEEP,
                              contract.DRIVER: driver_tag(), contract.HEARTBEAT: _now()})
        run_id = run.info.run_id
        try:
            for path, text in texts.items():
                self.call(self.client.log_text, run_id, text, path)
        except BaseException:  # Ctrl-C included: a parent without its spec cannot resume
            self.call(self.client.delete_run, run_id)
            raise
        return SweepRef(experiment_id, sweep_id, run_id)

    def reopen_sweep(self, ref: SweepRef, done: int,
                     check: Callable[[SweepRecord], None] | None = None) -> None:
        """Mark a resumed sweep's parent run as running again, driven by this process, from
        now with ``done`` configurations finished (:data:`~sweeps.contract.RESUMED`). With
        ``check``, the parent is read again and checked first, all under the store's lock,
        so that of two resumes of one sweep started together only one takes it (``check``
        raises for the other, which finds the first one's driver alive)."""
        with self._locked():
            if check is not None:
                check(sweep_record(self.call(self.client.get_run, ref.parent_run_id)))
            self.call(self.client.update_run, ref.parent_run_id, status="RUNNING")
            self.call(self.client.set_tag, ref.parent_run_id, contract.DRIVER, driver_tag())
            self.call(self.client.set_tag, ref.parent_run_id, contract.RESUMED,
                      json.dumps({"at": round(time.time(), 3), "done": done}))
            self.heartbeat(ref)

    def heartbeat(self, ref: SweepRef) -> None:
        """Say that the sweep's driver is alive now."""
        self.call(self.client.set_tag, ref.parent_run_id, contract.HEARTBEAT, _now())

    def end_sweep(self, ref: SweepRef, status: str, metrics: Mapping[str, float]) -> None:
        """End the parent run with ``status`` (FINISHED or KILLED) and summary ``metrics``,
        logged at step n for the sweep's n-th ending before this one (0 for its first run,
        1 after its first resume...), so that each of its runs is a point of its own."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        step = max((len(self.call(self.client.get_metric_history, ref.parent_run_id, k))
                    for k in metrics), default=0)
        batch = [Metric(k, float(v), now, step) for k, v in metrics.items()]
        self.call(self.client.log_batch, ref.parent_run_id, metrics=batch)
        self.call(self.client.set_terminated, ref.parent_run_id, status)

    def _sweep_runs(self, query: str, limit: int) -> list[Any]:
        from mlflow.entities import ViewType

        exps = self.call(self.client.search_experiments, view_type=ViewType.ACTIVE_ONLY)
        if not exps:
            return []
        return self.call(self.client.search_runs, [e.experiment_id for e in exps],
                         f"tags.`{contract.ROLE}` = '{contract.ROLE_SWEEP}'{query}",
                         max_results=limit,
                         order_by=["attributes.start_time DESC"])

    def find_sweep(self, sweep_id: str | None = None, *, spec: str | None = None,
                   unfinished: bool = False, with_studies: bool = False) -> SweepRecord | None:
        """The sweep ``sweep_id``, or the latest one (of ``spec`` when given; the latest not
        FINISHED when ``unfinished``, the latest with Optuna studies when ``with_studies``),
        or None."""
        query = ""
        if sweep_id is not None:
            query += f" and tags.`{contract.SWEEP_ID}` = {quote(sweep_id)}"
        if spec is not None:
            query += f" and tags.`{contract.SPEC}` = {quote(spec)}"
        if unfinished:
            query += " and attributes.status != 'FINISHED'"
        if with_studies:
            query += f" and tags.`{contract.OPTUNA_STORAGE}` LIKE '%'"
        runs = self._sweep_runs(query, 1)
        return sweep_record(runs[0]) if runs else None

    def list_sweeps(self, limit: int) -> list[SweepRecord]:
        """The latest ``limit`` sweeps, latest first."""
        return [sweep_record(r) for r in self._sweep_runs("", limit)
                if contract.SWEEP_ID in r.data.tags]

    def download_spec(self, ref: SweepRef, dest: Path) -> Path:
        """Download the spec file a sweep was started from into ``dest``; its path."""
        folder = contract.SPEC_ARTIFACT_DIR
        files = self.call(self.client.list_artifacts, ref.parent_run_id, folder)
        if not files:
            raise FileNotFoundError(f"sweep {ref.sweep_id} has no {folder}/ artifact")
        dest.mkdir(parents=True, exist_ok=True)
        local = self.call(self.client.download_artifacts, ref.parent_run_id, files[0].path,
                          str(dest))
        return Path(local)

    def configurations(self, ref: SweepRef) -> list[Any]:
        """Every active child run of the sweep (MLflow ``Run`` objects)."""
        query = (f"tags.`{contract.SWEEP_ID}` = {quote(ref.sweep_id)} "
                 f"and tags.`{contract.ROLE}` = '{contract.ROLE_CONFIGURATION}'")
        runs: list[Any] = []
        token = None
        while True:
            page = self.call(self.client.search_runs, [ref.experiment_id], query,
                             max_results=1000, page_token=token)
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    def states(self, ref: SweepRef) -> list[TaggedRun]:
        """Every active child run of the sweep, oldest first, with its status and its tags
        among :data:`STATE_TAGS`: from the tables in two queries, else from
        :meth:`configurations`, whose ``search_runs`` loads every param, tag and latest
        metric of every run (1.4 s for a sweep of 896 configurations on SQLite on this
        project's CPU machine, 1.9 s on a lent GPU machine: RESULTS.md, ``sweep end on a
        CPU`` and ``trial start on a GPU``)."""
        if self.tables is not None:
            return self.call(self.tables.tagged_runs, ref.experiment_id,
                             {contract.SWEEP_ID: ref.sweep_id}, contract.ROLE,
                             [contract.ROLE_CONFIGURATION], STATE_TAGS
                             ).get(contract.ROLE_CONFIGURATION, [])
        runs = sorted(self.configurations(ref), key=lambda r: (r.info.start_time, r.info.run_id))
        return [TaggedRun(r.info.run_id, r.info.status,
                          {k: v for k, v in r.data.tags.items() if k in STATE_TAGS},
                          contract.epoch_seconds(r.info.end_time))
                for r in runs]

    def running_steps(self, ref: SweepRef) -> list[tuple[str, str | None, int | None]]:
        """Each RUNNING configuration run of the sweep: its id, its
        :data:`~sweeps.contract.BUDGET` tag (None without it) and the largest step of its
        latest metrics (None before its first value): from the tables in one query, else by
        ``search_runs`` of the sweep's running runs."""
        sweep = {contract.SWEEP_ID: ref.sweep_id, contract.ROLE: contract.ROLE_CONFIGURATION}
        if self.tables is not None:
            return self.call(self.tables.running_steps, ref.experiment_id, sweep,
                             contract.BUDGET)
        query = " and ".join([*(f"tags.`{k}` = {quote(v)}" for k, v in sweep.items()),
                              "attributes.status = 'RUNNING'"])
        found: list[tuple[str, str | None, int | None]] = []
        token = None
        while True:
            page = self.call(self.client.search_runs, [ref.experiment_id], query,
                             max_results=1000, page_token=token)
            found.extend((run.info.run_id, run.data.tags.get(contract.BUDGET),
                          max((m.step for m in run.data.to_proto().metrics), default=None))
                         for run in page)
            token = page.token
            if not token:
                return found

    def discard_unfinished(self, runs: Sequence[TaggedRun]) -> int:
        """Delete every run of ``runs`` (a sweep's configuration runs, :meth:`states`) that is
        not FINISHED, before a resume re-runs those configurations; how many."""
        doomed = [r for r in runs if r.status != "FINISHED"]
        for run in doomed:
            self.retire(run.run_id, run.status)
        return len(doomed)

    def retire(self, run_id: str, status: str) -> None:
        """Delete a configuration's run that is being replaced, ending it KILLED first if
        its ``status`` is still RUNNING (its trial is gone: see the module docstring)."""
        if status == "RUNNING":
            self.call(self.client.set_terminated, run_id, "KILLED")
        self.call(self.client.delete_run, run_id)

    def mark_killed(self, runs: Sequence[TaggedRun]) -> int:
        """End every RUNNING run of ``runs`` (an interrupted sweep's configuration runs,
        :meth:`states`) as KILLED; how many."""
        live = [r.run_id for r in runs if r.status == "RUNNING"]
        for run_id in live:
            self.call(self.client.set_terminated, run_id, "KILLED")
        return len(live)

    # -- configuration runs -------------------------------------------------------------

    def claim(self, ref: SweepRef, key: str, params: Mapping[str, Any],
              tags: Mapping[str, str]) -> Claim:
        """Look configuration ``key`` up in the sweep; return its stored result if a run of
        it FINISHED, else replace any other runs of it by a new RUNNING run with ``params``
        and ``tags`` (see the module docstring), named by the tag
        :data:`~sweeps.contract.RUN_NAME` among them, else by ``key``."""
        return self.claim_all(ref, [(key, params, tags)])[0]

    def claim_all(self, ref: SweepRef,
                  items: Sequence[tuple[str, Mapping[str, Any], Mapping[str, str]]]
                  ) -> list[Claim]:
        """:meth:`claim` of each (key, params, tags) of ``items`` (distinct keys), under one
        hold of the store's lock; every param is checked first, so that a param MLflow
        refuses raises before any run is replaced. Into the tables, two queries find the
        keys' runs (:meth:`_runs_of`) and the new runs are made in one transaction."""
        keys = [key for key, _, _ in items]
        if len(set(keys)) != len(keys):
            raise ValueError(f"claims of one configuration twice at once: {keys}")
        texts = [{k: _param_value(v) for k, v in params.items()} for _, params, _ in items]
        for params in texts:  # refused here, before any run is retired for a new one
            for k, v in params.items():
                checked_param(k, v)
        claims: dict[str, Claim] = {}
        new: list[tuple[str, str, dict[str, str], dict[str, str]]] = []
        with self._locked():
            found = self._runs_of(ref, keys)
            for (key, _, tags), params in zip(items, texts, strict=True):
                runs = found.get(key, [])
                active = [r for r in runs if not r.deleted]
                done = [r for r in active if r.status == "FINISHED"]
                for r in active:
                    if not done or r is not done[0]:
                        self.retire(r.run_id, r.status)
                if done:
                    claims[key] = Claim(done[0].run_id, stored_result(done[0].tags))
                    continue
                attempt = 1 + max((int(r.tags.get(contract.ATTEMPT, "1")) for r in runs),
                                  default=0)  # the trash's runs too: a resume discards some
                new.append((key, tags.get(contract.RUN_NAME, key),
                            {**tags, contract.PARENT: ref.parent_run_id,
                             contract.SWEEP_ID: ref.sweep_id, contract.TRIAL_KEY: key,
                             contract.ROLE: contract.ROLE_CONFIGURATION,
                             contract.ATTEMPT: str(attempt)},
                            params))
            if self.tables is not None:
                ids = self.call(self.tables.create_runs, ref.experiment_id,
                                [(name, run_tags, params) for _, name, run_tags, params in new])
            else:
                ids = [self._create_run(ref, name, run_tags, params)
                       for _, name, run_tags, params in new]
            claims.update({key: Claim(run_id, None)
                           for (key, *_), run_id in zip(new, ids, strict=True)})
        return [claims[key] for key in keys]

    def _create_run(self, ref: SweepRef, name: str, tags: Mapping[str, str],
                    params: Mapping[str, str]) -> str:
        """A new run made through MLflow's client, then its params; its id."""
        from mlflow.entities import Param

        run_id = self.call(self.client.create_run, ref.experiment_id, run_name=name,
                           tags=tags).info.run_id
        items = [Param(k, v) for k, v in params.items()]
        for i in range(0, len(items), PARAM_BATCH):
            self.call(self.client.log_batch, run_id, params=items[i:i + PARAM_BATCH])
        return run_id

    def _runs_of(self, ref: SweepRef, keys: Sequence[str]) -> dict[str, list[TaggedRun]]:
        """The runs of each configuration of ``keys`` in the sweep that has any, those in
        the trash included (they count in ``ortho.attempt``), oldest first, with the tags a
        claim reads: from the tables in two queries, else by a ``search_runs`` per key."""
        from mlflow.entities import ViewType

        sweep = {contract.SWEEP_ID: ref.sweep_id, contract.ROLE: contract.ROLE_CONFIGURATION}
        read = (contract.ATTEMPT, contract.SUMMARY, contract.OUTCOME)
        if self.tables is not None:
            return self.call(self.tables.tagged_runs, ref.experiment_id, sweep,
                             contract.TRIAL_KEY, keys, read, with_deleted=True)
        found: dict[str, list[TaggedRun]] = {}
        for key in keys:
            query = " and ".join(f"tags.`{k}` = {quote(v)}"
                                 for k, v in {**sweep, contract.TRIAL_KEY: key}.items())
            runs = self.call(self.client.search_runs, [ref.experiment_id], query,
                             run_view_type=ViewType.ALL, order_by=["attributes.start_time ASC"])
            if runs:
                found[key] = [TaggedRun(r.info.run_id, r.info.status,
                                        {k: v for k, v in r.data.tags.items() if k in read},
                                        contract.epoch_seconds(r.info.end_time),
                                        r.info.lifecycle_stage == "deleted")
                              for r in runs]
        return found

    def log_metrics(self, run_id: str, metrics: Sequence[Any]) -> None:
        """Log MLflow ``Metric`` entities (into the tables, or in batches of
        :data:`BATCH`)."""
        if self.tables is not None:
            self.call(self.tables.write_metrics, {run_id: metrics})
            return
        for i in range(0, len(metrics), BATCH):
            self.call(self.client.log_batch, run_id, metrics=list(metrics[i:i + BATCH]))

    def finish(self, run_id: str, result: Result, step: int, rows: Rows,
               extra_tags: Mapping[str, str] | None = None, at: int | None = None) -> None:
        """End a configuration's run: summaries as metrics at ``step`` (unless a stepwise
        metric of that name already holds the value there), stamped ``at`` (ms since the
        epoch, default now: an ending sent again passes the first attempt's, so that MLflow
        drops the summaries it already holds instead of storing them twice), the metrics
        CSV, the result's artifacts (JSON), the outcome tag, status FINISHED."""
        self.finish_all([(run_id, result, step, rows)], extra_tags, at)

    def finish_all(self, ends: Sequence[tuple[str, Result, int, Rows]],
                   extra_tags: Mapping[str, str] | None = None, at: int | None = None) -> None:
        """:meth:`finish` of each (run id, result, step, rows) of ``ends``; into the tables,
        all in one transaction once every artifact is written. When that fails, each run is
        ended on its own, and one whose ending raises (a summary MLflow refuses, an
        artifact that cannot be written) is failed with that error: one member's ending
        never costs the others theirs. A run that can be neither finished nor failed (deleted
        meanwhile, a store that refuses every write) raises its error once every other run
        has been ended."""
        if not ends:
            return
        at = int(time.time() * 1000) if at is None else at
        try:
            self._finish_all(ends, extra_tags, at)
        except Exception:
            if len(ends) == 1:
                raise
            unended: Exception | None = None
            for run_id, result, step, rows in ends:
                try:
                    self._finish_all([(run_id, result, step, rows)], extra_tags, at)
                except Exception:
                    try:
                        self.fail(run_id, traceback.format_exc(), rows)
                    except Exception as err:
                        unended = unended or err
            if unended is not None:
                raise unended from None

    def _finish_all(self, ends: Sequence[tuple[str, Result, int, Rows]],
                    extra_tags: Mapping[str, str] | None, now: int) -> None:
        from mlflow.entities import Metric

        endings = []
        texts: dict[str, dict[str, str]] = {}
        for run_id, result, step, rows in ends:
            last = rows[-1][1] if rows else {}
            summary = [Metric(k, float(v), now, step) for k, v in result.summary.items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool)
                       and last.get(k) != float(v)]  # no second point for a stepwise metric
            texts[run_id] = {contract.METRICS_CSV: metrics_csv(rows)}
            texts[run_id].update({f"{name}.json": json.dumps(value, default=_jsonable)
                                  for name, value in result.artifacts.items()})
            endings.append((run_id, "FINISHED", summary,
                            {contract.OUTCOME: Outcome(result.outcome).value,
                             contract.SUMMARY: json.dumps(result.summary, default=_jsonable),
                             **(extra_tags or {})}))
        self.log_texts(texts)
        self._end(endings)

    def fail(self, run_id: str, error: str, rows: Rows = ()) -> None:
        """End a configuration's run as failed: ``traceback.txt``, the metrics CSV so far,
        outcome ``failed``, status FAILED."""
        texts = {contract.TRACEBACK: error}
        if rows:
            texts[contract.METRICS_CSV] = metrics_csv(rows)
        self.log_texts({run_id: texts})
        self._end([(run_id, "FAILED", [], {contract.OUTCOME: Outcome.FAILED.value})])

    def _end(self, ends: Sequence[tuple[str, str, Sequence[Any], Mapping[str, str]]]) -> None:
        """For each (run id, status, metrics, tags): log the metrics, set the tags, then the
        status: all in one transaction into the tables, else in MLflow's calls (a run's
        status last)."""
        from mlflow.entities import RunTag

        if self.tables is not None:
            self.call(self.tables.end_runs, ends)
            return
        for run_id, status, metrics, tags in ends:
            if metrics or tags:
                self.call(self.client.log_batch, run_id, metrics=list(metrics[:BATCH]),
                          tags=[RunTag(k, v) for k, v in tags.items()])
                self.log_metrics(run_id, metrics[BATCH:])
            self.call(self.client.set_terminated, run_id, status)

    def log_texts(self, texts: Mapping[str, Mapping[str, str]]) -> None:
        """Log text artifacts (run id -> artifact path -> text): straight into each run's
        artifact location when the tables say where that is (one query for them all, where
        MLflow's ``log_text`` reads each whole run to find it), written as files there when
        it is a folder on this machine (:func:`write_texts`), else by ``log_text``."""
        if self.tables is None:
            for run_id, files in texts.items():
                for path, text in files.items():
                    self.call(self.client.log_text, run_id, text, path)
            return
        from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

        uris = self.call(self.tables.artifact_uris, list(texts))
        with tempfile.TemporaryDirectory(prefix="ortho-artifact-") as tmp:
            for run_id, files in texts.items():
                if run_id not in uris:
                    raise KeyError(f"no run {run_id} in the store")
                folder = local_folder(uris[run_id])
                if folder is not None:
                    write_texts(folder, files)
                    continue
                repo = get_artifact_repository(
                    uris[run_id], tracking_uri=contract.database_url(self.uri))
                for path, text in files.items():
                    file = PurePosixPath(path)
                    local = Path(tmp) / file.name
                    local.write_text(text, encoding="utf-8")
                    parent = str(file.parent)
                    repo.log_artifact(str(local), None if parent == "." else parent)

    def history_rows(self, run_id: str) -> list[tuple[int, dict[str, float]]]:
        """A run's stepwise metrics read back from MLflow, as rows for :func:`metrics_csv`."""
        rows: dict[int, dict[str, float]] = {}
        for name in self.call(self.client.get_run, run_id).data.metrics:
            for m in self.call(self.client.get_metric_history, run_id, name):
                rows.setdefault(m.step, {})[name] = m.value
        return sorted(rows.items())

    def kill(self, run_id: str) -> None:
        """End a run whose trial was interrupted (it is replaced on resume)."""
        self._end([(run_id, "KILLED", [], {})])


def write_texts(folder: Path, files: Mapping[str, str]) -> None:
    """Write text artifacts (relative POSIX path -> text) into ``folder``, a run's artifact
    folder, as MLflow's local artifact repository writes a file (a file under its hidden
    name in the destination folder, :data:`STAGING_PREFIX`, then an atomic rename, so a
    reader never sees half of one; its mode 0o666 less the umask), without its checks of
    every path against the real folder: with them the endings of a pack of 224 (448 files)
    took 0.35 s of the sweep's one writer, without 0.15 s (RESULTS.md, ``tracking_writer,
    packs, artifacts as files``). A path that is absolute or climbs out (``..``) raises
    ValueError."""
    for name, text in files.items():
        path = PurePosixPath(name)
        if path.is_absolute() or not path.parts or ".." in path.parts:
            raise ValueError(f"artifact path {name!r}: expected a relative path inside the "
                             "run's artifacts")
        dest = folder.joinpath(*path.parts)
        dest.parent.mkdir(parents=True, exist_ok=True)
        staged = dest.parent / f"{STAGING_PREFIX}{uuid.uuid4().hex}"
        # mode 0o666 less the umask, as MLflow's repository leaves its files
        handle = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(staged, dest)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.remove(staged)
            raise


_TRACKERS: dict[str, Tracker] = {}


def tracker(uri: str) -> Tracker:
    """The process's :class:`Tracker` for ``uri`` (built once)."""
    if uri not in _TRACKERS:
        _TRACKERS[uri] = Tracker(uri)
    return _TRACKERS[uri]
