"""The writes of a configuration's run made straight in the tables of a SQL store that
this process opens itself (SQLite or PostgreSQL), one transaction each, rather than through
MLflow's client: params at a claim, metric values, and a run's ending.

MLflow's SQL store builds an ORM object for every value it logs and updates each run's
latest values through ORM objects too: 150-200 µs a value on this project's 2-core machine,
so the sweep's one writer took about 5,000 values a second, fewer than packs on a GPU report;
and each client call opens a session, loads the run and commits (4-8 ms), three or four of
them to end a run (``benchmarks/tracking_writer.py --pack``). :class:`StoreTables` writes the
rows those calls write (``tests/sweeps/test_tables.py`` compares both stores, row by row, on
SQLite and PostgreSQL):

- metric values (:meth:`StoreTables.write_metrics`, ``log_batch``): a row of ``metrics``
  each, NaN stored as 0 with ``is_nan`` and infinities as the largest finite floats
  (MLflow's ``sanitize_metric_value``); a value already there (same key, step, timestamp and
  value: the table's primary key) is not written again, as MLflow drops it too, so a batch
  sent twice is written once. ``latest_metrics`` holds, per run and key, the row of the
  largest (step, timestamp, value), kept when the stored one is as large (MLflow's
  ``_update_latest_metrics_if_necessary``). All runs of a flush go in one transaction;
- new runs (:meth:`StoreTables.create_runs`: ``create_run``, then ``log_batch`` of its
  params, for each): its ``runs`` row as MLflow fills it (artifacts under the experiment's
  location), its tags, its run name tag, and a row of ``params`` per param, values truncated
  as MLflow truncates them;
- endings (:meth:`StoreTables.end_runs`: ``log_batch`` of a run's summaries and tags, then
  ``set_terminated``, for each): metric values as above, tags set (replacing a tag of the same key;
  values truncated as MLflow truncates them), then the run's status and end time;
- only into active runs: a missing or deleted run fails the whole write, as MLflow fails on
  it (a flush of a pack's metrics is one write: a run deleted while its trial trains, which
  only a second driver of the sweep does, costs the flush of its whole pack); every metric
  value, param and tag is checked, and truncated, by MLflow's own rules.

It also finds the runs a pack's claims look up and those whose states a sweep's progress, end
and resume read (:meth:`StoreTables.tagged_runs`: a sweep's runs of given trial keys, or all
of its configuration runs), in two queries rather than ``search_runs``, which loads all of
every run it finds. A pack's new runs are made in one transaction, and its endings in one.

Used only where the tables have exactly the columns written here (:func:`store_tables`;
otherwise None, and the caller goes through MLflow's client as before), so that a later
MLflow whose schema differs falls back rather than getting a wrong row. A tracking server is
never written this way: its database is the server's.
"""

from __future__ import annotations

import functools
import logging
import math
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sweeps.contract import (
    RUN_NAME,
    STORED_INFINITY,
    database_url,
    epoch_seconds,
    redact,
    sqlite_path,
)

log = logging.getLogger(__name__)

MLFLOW_USER = "mlflow.user"
"""The tag MLflow takes a new run's ``user_id`` from."""

COLUMNS = {
    "runs": {"run_uuid", "name", "source_type", "source_name", "entry_point_name", "user_id",
             "status", "start_time", "end_time", "source_version", "lifecycle_stage",
             "artifact_uri", "experiment_id", "deleted_time"},
    "metrics": {"key", "value", "timestamp", "run_uuid", "step", "is_nan"},
    "latest_metrics": {"key", "value", "timestamp", "run_uuid", "step", "is_nan"},
    "params": {"key", "value", "run_uuid"},
    "tags": {"key", "value", "run_uuid"},
}
"""The tables written here and their columns, all of them (MLflow 2.x and 3.x)."""
EXPERIMENT_COLUMNS = {"experiment_id", "artifact_location", "lifecycle_stage"}
"""The columns of ``experiments`` read here (it has more)."""
REVISIONS = frozenset({"dc11669786a5"})
"""The schema revisions (MLflow's ``alembic_version``) whose tables, keys and constraints
this module's rows were checked against (``tests/sweeps/test_tables.py``): MLflow 3.17's.
A store of another revision is written through MLflow's client until its rows are checked
and its revision added here."""
DIALECTS = ("sqlite", "postgresql")
"""Databases whose upsert (``INSERT … ON CONFLICT``) this module writes."""


def sanitize(value: float) -> tuple[float, bool]:
    """A metric value as MLflow's SQL store keeps it: NaN as 0 with its flag set, infinities
    as the largest finite floats of their sign."""
    if math.isnan(value):
        return 0.0, True
    if math.isinf(value):
        return math.copysign(STORED_INFINITY, value), False
    return value, False


PARAMS_CHECKED = 65_536
"""Distinct (name, value) params whose check :func:`checked_param` remembers."""
IDS_PER_QUERY = 10_000
"""Run ids a query of :meth:`StoreTables.tagged_runs` names at most: a sweep's states name
every run of it, and SQLite allows 32,766 variables a statement by default."""


@functools.lru_cache(maxsize=PARAMS_CHECKED)
def checked_param(key: str, value: str) -> tuple[str, str]:
    """A param as MLflow checks it (``_validate_param``: the name's characters and path, both
    lengths; a long value truncated where ``MLFLOW_TRUNCATE_LONG_VALUES`` says so, as it says
    when the value is first checked), or MLflow's ``MlflowException``: the members of a pack
    share most of their params, so each distinct one's check is remembered (a refusal is
    not), for the claims that check every param before any run is replaced and again as the
    rows are made (RESULTS.md, ``pack_claims``)."""
    from mlflow.utils.validation import _validate_param

    param = _validate_param(key, value)
    return param.key, param.value


@functools.lru_cache(maxsize=PARAMS_CHECKED)
def _checked_metric_name(key: str) -> None:
    """MLflow's checks of a metric's name (``_validate_metric`` of it with a value, time and
    step that pass), remembered: a pack reports the same few names for every member at every
    evaluation."""
    from mlflow.utils.validation import _validate_metric

    _validate_metric(key, 0.0, 0, 0)


def check_metric(metric: Any) -> None:
    """``MlflowException`` where MLflow's ``_validate_metric`` refuses the ``Metric``: its name
    checked once per process (:func:`_checked_metric_name`), the rest by MLflow unless the
    value is a float and the timestamp and step are ints, the timestamp ≥ 0, which every one
    of those checks accepts: 0.3 µs a value where MLflow's whole check takes 1.6 µs
    (RESULTS.md, ``pack_claims``)."""
    _checked_metric_name(metric.key)
    if not (type(metric.value) is float and type(metric.step) is int
            and type(metric.timestamp) is int and metric.timestamp >= 0):
        from mlflow.utils.validation import _validate_metric

        _validate_metric(metric.key, metric.value, metric.timestamp, metric.step)


@dataclass(frozen=True)
class TaggedRun:
    """A run :meth:`StoreTables.tagged_runs` found (or one of ``search_runs`` cut to the
    same: :meth:`sweeps.tracking.Tracker.states`)."""

    run_id: str
    status: str
    """MLflow's status of the run: ``RUNNING``, ``FINISHED``, ``FAILED``, ``KILLED``..."""
    tags: dict[str, str]
    """Those of its tags that were asked for."""
    end_time: float | None = None
    """When it ended, in seconds since the epoch (None while it runs)."""
    deleted: bool = False
    """In MLflow's trash (a run replaced by a later attempt, or discarded by a resume)."""


class StoreTables:
    """Writes into the tables of one SQL store (see the module docstring); built by
    :func:`store_tables`."""

    def __init__(self, engine: Any, tables: Mapping[str, Any]) -> None:
        import sqlalchemy as sa
        from sqlalchemy.dialects import postgresql, sqlite

        self.engine = engine
        self.runs = tables["runs"]
        self.tags = tables["tags"]
        self.experiments = tables["experiments"]
        self.latest = tables["latest_metrics"]
        insert = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}[engine.dialect.name]
        self._insert_metrics = insert(tables["metrics"]).on_conflict_do_nothing()
        latest = insert(tables["latest_metrics"])
        new, old = latest.excluded, tables["latest_metrics"].c
        self._upsert_latest = latest.on_conflict_do_update(
            index_elements=["key", "run_uuid"],
            set_={"value": new.value, "timestamp": new.timestamp, "step": new.step,
                  "is_nan": new.is_nan},
            where=sa.tuple_(new.step, new.timestamp, new.value)
            > sa.tuple_(old.step, old.timestamp, old.value))
        self._insert_params = insert(tables["params"])
        self._insert_run = insert(self.runs)
        self._insert_tags = insert(self.tags)
        tags = insert(tables["tags"])
        self._upsert_tags = tags.on_conflict_do_update(
            index_elements=["key", "run_uuid"], set_={"value": tags.excluded.value})
        self._compiled: dict[tuple[Any, tuple[str, ...]], Any] = {}

    # -- writes -------------------------------------------------------------------------

    def write_metrics(self, batches: Mapping[str, Sequence[Any]]) -> None:
        """Write each run's MLflow ``Metric`` entities (run id -> metrics), all in one
        transaction. ``MlflowException`` for a missing or deleted run, or a key MLflow
        refuses; nothing is written then."""
        rows, latest = self._metric_rows(batches)
        if not rows:
            return
        with self.engine.begin() as conn:
            self._check_active(conn, list(batches))
            self._write_metric_rows(conn, rows, latest)

    def create_runs(self, experiment_id: str,
                    runs: Sequence[tuple[str, Mapping[str, str], Mapping[str, str]]]
                    ) -> list[str]:
        """Create a RUNNING run in the active experiment ``experiment_id`` for each (run
        name, tags, params as text) of ``runs``, all in one transaction, as
        ``MlflowClient.create_run`` then ``log_batch`` of its params would; their ids.
        ``MlflowException`` for an experiment that is missing or deleted."""
        import sqlalchemy as sa
        from mlflow.exceptions import MlflowException
        from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE
        from mlflow.utils.uri import append_to_uri_path

        now = int(time.time() * 1000)
        ids, run_rows, tag_rows, param_rows = [], [], [], []
        for name, tags, params in runs:
            if tags.get(RUN_NAME, name) != name:
                raise MlflowException(f"Both 'run_name' argument and 'mlflow.runName' tag are "
                                      f"specified, but with different values ({name!r}, "
                                      f"{tags[RUN_NAME]!r}).", INVALID_PARAMETER_VALUE)
            run_id = uuid.uuid4().hex
            tags = {**tags, RUN_NAME: name}
            ids.append(run_id)
            run_rows.append({
                "run_uuid": run_id, "name": name, "source_type": "UNKNOWN", "source_name": "",
                "entry_point_name": "", "user_id": tags.get(MLFLOW_USER, "unknown"),
                "status": "RUNNING", "start_time": now, "end_time": None,
                "source_version": "", "lifecycle_stage": "active",
                "experiment_id": int(experiment_id), "deleted_time": None})
            tag_rows += [{"key": k, "value": v, "run_uuid": run_id} for k, v in tags.items()]
            param_rows += self._param_rows(run_id, params)
        if not ids:
            return ids
        with self.engine.begin() as conn:
            found = conn.execute(sa.select(self.experiments.c.artifact_location).where(
                self.experiments.c.experiment_id == int(experiment_id),
                self.experiments.c.lifecycle_stage == "active")).first()
            if found is None:
                raise MlflowException(f"The experiment {experiment_id} must exist and be in "
                                      "the 'active' state.", INVALID_PARAMETER_VALUE)
            for row in run_rows:
                row["artifact_uri"] = append_to_uri_path(found[0], row["run_uuid"],
                                                         "artifacts")
            self._many(conn, self._insert_run, run_rows)
            self._many(conn, self._insert_tags, tag_rows)
            if param_rows:
                self._many(conn, self._insert_params, param_rows)
        return ids

    def end_runs(self, ends: Sequence[tuple[str, str, Sequence[Any], Mapping[str, str]]]
                 ) -> None:
        """End each active run of ``ends`` (run id, status, MLflow ``Metric`` entities to
        log, tags to set), all in one transaction: its metrics, its tags, then its status
        and end time (now). ``MlflowException`` for a run
        that is missing or deleted; nothing is written then."""
        import sqlalchemy as sa
        from mlflow.entities import RunStatus
        from mlflow.utils.validation import _validate_tag

        if not ends:
            return
        rows, latest = self._metric_rows({run_id: metrics for run_id, _, metrics, _ in ends})

        tag_rows = [{"key": t.key, "value": t.value, "run_uuid": run_id}
                    for run_id, _, _, tags in ends
                    for t in (_validate_tag(k, v) for k, v in tags.items())]
        names = {row["run_uuid"]: row["value"] for row in tag_rows if row["key"] == RUN_NAME}
        ended = int(time.time() * 1000)
        updates = [{"b_id": run_id, "b_status": RunStatus.to_string(RunStatus.from_string(status)),
                    "b_end": ended, "b_name": names.get(run_id)} for run_id, status, _, _ in ends]
        with self.engine.begin() as conn:
            self._check_active(conn, [run_id for run_id, *_ in ends])
            if rows:
                self._write_metric_rows(conn, rows, latest)
            if tag_rows:
                self._many(conn, self._upsert_tags, tag_rows)
            runs = self.runs.c
            conn.execute(sa.update(self.runs).where(runs.run_uuid == sa.bindparam("b_id"))
                         .values(status=sa.bindparam("b_status"),
                                 end_time=sa.bindparam("b_end"),
                                 name=sa.func.coalesce(sa.bindparam("b_name"), runs.name)),
                         updates)

    # -- reads --------------------------------------------------------------------------

    def tagged_runs(self, experiment_id: str, tags: Mapping[str, str], key: str,
                    values: Sequence[str], read: Sequence[str],
                    with_deleted: bool = False) -> dict[str, list[TaggedRun]]:
        """The active runs of experiment ``experiment_id`` (and those in the trash too, with
        ``with_deleted``) that have every tag of ``tags`` (name -> value) and one of
        ``values`` as tag ``key``: for each value that has any, its runs, oldest first, with
        their tags among ``read``. Two queries, where MLflow's
        ``search_runs`` would take one per value and load every tag, param and latest metric
        of every run it finds (at tens of thousands of runs in the store, a few hundred
        milliseconds each)."""
        import sqlalchemy as sa

        runs = self.runs.c
        wanted = self.tags.alias()
        query = sa.select(wanted.c.value, runs.run_uuid, runs.status, runs.end_time,
                          runs.lifecycle_stage).join(
            self.runs, runs.run_uuid == wanted.c.run_uuid).where(
            wanted.c.key == key, wanted.c.value.in_(list(values)),
            runs.experiment_id == int(experiment_id)
        ).order_by(runs.start_time, runs.run_uuid)
        if not with_deleted:
            query = query.where(runs.lifecycle_stage == "active")
        for name, value in tags.items():
            tag = self.tags.alias()
            query = query.where(sa.exists().where(tag.c.run_uuid == runs.run_uuid,
                                                  tag.c.key == name, tag.c.value == value))
        with self.engine.connect() as conn:
            found = conn.execute(query).all()
            held: dict[str, dict[str, str]] = {row.run_uuid: {} for row in found}
            ids = list(held) if read else []
            for i in range(0, len(ids), IDS_PER_QUERY):
                for run_id, name, value in conn.execute(
                        sa.select(self.tags.c.run_uuid, self.tags.c.key, self.tags.c.value)
                        .where(self.tags.c.run_uuid.in_(ids[i:i + IDS_PER_QUERY]),
                               self.tags.c.key.in_(list(read)))):
                    held[run_id][name] = value
        out: dict[str, list[TaggedRun]] = {}
        for value, run_id, status, end, stage in found:
            out.setdefault(value, []).append(
                TaggedRun(run_id, status, held[run_id], epoch_seconds(end), stage == "deleted"))
        return out

    def running_steps(self, experiment_id: str, tags: Mapping[str, str],
                      read: str) -> list[tuple[str, str | None, int | None]]:
        """Each RUNNING active run of experiment ``experiment_id`` that has every tag of
        ``tags``: its id, its tag ``read`` (None without it) and the largest step of its
        latest metrics (None before its first value), in one query."""
        import sqlalchemy as sa

        runs = self.runs.c
        wanted = self.tags.alias()
        step = (sa.select(sa.func.max(self.latest.c.step))
                .where(self.latest.c.run_uuid == runs.run_uuid).scalar_subquery())
        query = sa.select(runs.run_uuid, wanted.c.value, step).outerjoin(
            wanted, sa.and_(wanted.c.run_uuid == runs.run_uuid, wanted.c.key == read)).where(
            runs.experiment_id == int(experiment_id), runs.lifecycle_stage == "active",
            runs.status == "RUNNING")
        for name, value in tags.items():
            tag = self.tags.alias()
            query = query.where(sa.exists().where(tag.c.run_uuid == runs.run_uuid,
                                                  tag.c.key == name, tag.c.value == value))
        with self.engine.connect() as conn:
            return [(run_id, value, None if last is None else int(last))
                    for run_id, value, last in conn.execute(query)]

    def artifact_uris(self, run_ids: Sequence[str]) -> dict[str, str]:
        """Where each run of ``run_ids`` keeps its artifacts (run id -> URI; a run that does
        not exist is left out)."""
        import sqlalchemy as sa

        with self.engine.connect() as conn:
            return dict(conn.execute(sa.select(self.runs.c.run_uuid, self.runs.c.artifact_uri)
                                     .where(self.runs.c.run_uuid.in_(list(run_ids)))).all())

    def close(self) -> None:
        """Release the database connections."""
        self.engine.dispose()

    # -- helpers ------------------------------------------------------------------------

    @staticmethod
    def _param_rows(run_id: str, params: Mapping[str, str]) -> list[dict[str, Any]]:
        """The ``params`` rows of ``params``, checked and truncated as MLflow does."""
        return [{"key": key, "value": value, "run_uuid": run_id}
                for key, value in (checked_param(k, v) for k, v in params.items())]

    def _metric_rows(self, batches: Mapping[str, Sequence[Any]]
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The ``metrics`` rows of ``batches`` and the newest row of each run and key."""
        rows: list[dict[str, Any]] = []
        latest: dict[tuple[str, str], dict[str, Any]] = {}
        for run_id, metrics in batches.items():
            for m in metrics:
                check_metric(m)
                value, is_nan = sanitize(float(m.value))
                row = {"key": m.key, "value": value, "timestamp": int(m.timestamp),
                       "run_uuid": run_id, "step": int(m.step), "is_nan": is_nan}
                rows.append(row)
                best = latest.get((run_id, m.key))
                if best is None or ((row["step"], row["timestamp"], value)
                                    > (best["step"], best["timestamp"], best["value"])):
                    latest[(run_id, m.key)] = row
        return rows, list(latest.values())

    def _write_metric_rows(self, conn: Any, rows: list[dict[str, Any]],
                           latest: list[dict[str, Any]]) -> None:
        self._many(conn, self._insert_metrics, rows)
        self._many(conn, self._upsert_latest, latest)

    def _many(self, conn: Any, insert: Any, rows: Sequence[Mapping[str, Any]]) -> None:
        """Execute ``insert`` for each of ``rows`` (dicts of the same columns). On SQLite the
        statement is compiled once and the rows handed to the driver's ``executemany``, where
        SQLAlchemy's ``execute`` would build each row's parameters anew (a pack of 896's
        claims write 41,000 rows of runs, tags and params: RESULTS.md, ``pack_claims``).
        Elsewhere ``execute``, which batches PostgreSQL's rows into multi-row ``VALUES``."""
        if not rows:
            return
        if self.engine.dialect.name != "sqlite":
            conn.execute(insert, rows)
            return
        columns = tuple(rows[0])
        compiled = self._compiled.get((insert, columns))
        if compiled is None:
            compiled = insert.compile(dialect=self.engine.dialect, column_keys=list(columns))
            self._compiled[(insert, columns)] = compiled
        order = compiled.positiontup
        conn.exec_driver_sql(compiled.string, [tuple(row[c] for c in order) for row in rows])

    def _check_active(self, conn: Any, run_ids: Sequence[str]) -> None:
        """``MlflowException`` unless every run of ``run_ids`` exists and is active."""
        import sqlalchemy as sa
        from mlflow.exceptions import MlflowException
        from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

        active = set(conn.execute(sa.select(self.runs.c.run_uuid).where(
            self.runs.c.run_uuid.in_(run_ids),
            self.runs.c.lifecycle_stage == "active")).scalars())
        missing = [r for r in run_ids if r not in active]
        if missing:
            raise MlflowException(f"The run {missing[0]} must exist and be in the 'active' "
                                  f"state ({len(missing)} such runs in this write).",
                                  INVALID_PARAMETER_VALUE)


def is_database(uri: str) -> bool:
    """Whether ``uri`` names a SQLite or PostgreSQL database (the stores written here)."""
    scheme = database_url(uri).partition("://")[0].partition("+")[0]
    return scheme in DIALECTS and (scheme != "sqlite" or sqlite_path(uri) is not None)


def store_tables(uri: str) -> StoreTables | None:
    """A :class:`StoreTables` of the store at ``uri``, or None where writes must go through
    MLflow's client: a tracking server, a file store, a database other than SQLite (3.32 or
    later: its upsert, and 32,766 values a statement for a pack's) and PostgreSQL, a schema
    of a revision other than :data:`REVISIONS`, or tables other than :data:`COLUMNS` (and
    :data:`EXPERIMENT_COLUMNS`). ``uri``'s store must exist (MLflow has opened it). Its
    connections are opened as MLflow opens its own: checked before each use (a database
    restarted, or a connection dropped while idle, is reconnected), and a SQLite database
    waited for up to 20 s while another process writes, with its foreign keys enforced."""
    import sqlite3

    import sqlalchemy as sa

    if not is_database(uri) or (sqlite_path(uri) is not None
                                and sqlite3.sqlite_version_info < (3, 32)):
        return None
    engine = sa.create_engine(database_url(uri), pool_pre_ping=True)
    if engine.dialect.name == "sqlite":
        sa.event.listen(engine, "connect", _sqlite_pragmas)
    names = ["alembic_version", "experiments", *COLUMNS]
    present = set(sa.inspect(engine).get_table_names())
    if not present.issuperset(names):
        log.info("%s is not MLflow's schema: runs are written and read through MLflow's "
                 "client", redact(uri))
        engine.dispose()
        return None
    with engine.connect() as conn:
        revision = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    metadata = sa.MetaData()
    metadata.reflect(engine, only=names)
    tables = metadata.tables
    if (revision in REVISIONS
            and all({c.name for c in tables[name].columns} == columns
                    for name, columns in COLUMNS.items())
            and {c.name for c in tables["experiments"].columns} >= EXPERIMENT_COLUMNS):
        return StoreTables(engine, tables)
    log.warning("the store's schema (revision %s) is not one whose rows sweeps/tracking/"
                "tables.py was checked against: runs are written and read through MLflow's "
                "client (slower)", revision)
    engine.dispose()
    return None


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    """What MLflow sets on each of its SQLite sessions (``mlflow.store.db.utils``)."""
    cursor = connection.cursor()
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.execute("PRAGMA busy_timeout = 20000")
    cursor.close()
