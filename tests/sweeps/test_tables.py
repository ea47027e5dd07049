"""Metric values written straight into a SQL store's tables (:mod:`sweeps.tracking.
store_tables`) read back exactly as those MLflow's ``log_batch`` writes, on SQLite and on
PostgreSQL: histories, latest values (NaN, infinities, ties and steps out of order
included), a flush sent twice, a deleted run and a key MLflow refuses."""

from __future__ import annotations

import math
import sqlite3
import time
import uuid
from pathlib import Path

import pytest
from mlflow.entities import Metric
from mlflow.exceptions import MlflowException

from ortho_core.reporting import Outcome, Result
from sweeps import contract, tracking
from sweeps.testing import sqlite_store, start_sweep, track
from sweeps.tracking.bootstrap import schema_revision
from sweeps.tracking.layout import Tracker
from sweeps.tracking.tables import REVISIONS, checked_param, store_tables

DATABASES = [pytest.param("sqlite"), pytest.param("postgresql", marks=pytest.mark.cluster)]

FLUSHES = [
    [Metric("loss", 1.0, 1000, 10), Metric("loss", 0.5, 1001, 20),
     Metric("acc", math.nan, 1000, 10), Metric("acc", 0.25, 1001, 20),
     Metric("grad", math.inf, 1000, 10),
     Metric("loss", 0.5, 1001, 20)],  # a value sent twice in one batch
    [Metric("loss", 0.75, 1002, 15),  # an earlier step, later: not the latest
     Metric("acc", math.nan, 1003, 30), Metric("grad", -math.inf, 1003, 30),
     Metric("tie", 2.0, 1004, 5), Metric("tie", 1.0, 1004, 5),  # the larger value is latest
     Metric("same", 0.0, 1005, 7)],
    [Metric("same", math.nan, 1005, 7),  # stored as 0 too: as large, so the first stays
     Metric("loss", 0.125, 1006, 20)],  # same step, later time: the latest
]


@pytest.fixture(scope="module", params=DATABASES)
def database(request, tmp_path_factory):
    """A tracking URI that the writer opens itself: a SQLite file, or a PostgreSQL
    database of the session's server (one for the module: MLflow's migrations take
    seconds; each test writes runs of its own)."""
    if request.param == "sqlite":
        return sqlite_store(tmp_path_factory.mktemp("store"))
    pg = request.getfixturevalue("postgres")
    return pg.create_database(f"store_tables_{uuid.uuid4().hex[:12]}")


def _runs(uri, n, home):
    """``n`` new runs in ``uri`` (artifacts of a PostgreSQL store's experiment under
    ``home``, not in the working directory)."""
    tracker = tracking.tracker(uri)
    exp = tracker.experiment_id("metric-tables", home=home)
    return tracker, [tracker.client.create_run(exp).info.run_id for _ in range(n)]


def _history(client, run_id):
    return {key: sorted((m.step, m.timestamp, repr(m.value))
                        for m in client.get_metric_history(run_id, key))
            for key in client.get_run(run_id).data.metrics}


def _latest(client, run_id):
    metrics = client.get_run(run_id).data.metrics
    return {k: "nan" if math.isnan(v) else v for k, v in metrics.items()}


def test_flushes_read_back_as_those_of_log_batch(database, tmp_path):
    tracker, (by_mlflow, direct, other) = _runs(database, 3, tmp_path)
    tables = store_tables(database)
    assert tables is not None
    for flush in FLUSHES:
        tracker.client.log_batch(by_mlflow, metrics=flush)
        tables.write_metrics({direct: flush, other: flush[:1]})
    client = tracker.client
    assert _history(client, direct) == _history(client, by_mlflow)
    assert _latest(client, direct) == _latest(client, by_mlflow)
    assert _latest(client, direct) == {"loss": 0.125, "acc": "nan", "tie": 2.0, "same": 0.0,
                                       "grad": -1.7976931348623157e308}
    assert len(client.get_metric_history(direct, "loss")) == 4
    assert _latest(client, other) == {"loss": 0.75, "same": "nan"}
    tables.close()


def test_a_flush_sent_twice_is_written_once(database, tmp_path):
    tracker, (run_id,) = _runs(database, 1, tmp_path)
    tables = store_tables(database)
    tables.write_metrics({run_id: FLUSHES[0]})
    tables.write_metrics({run_id: FLUSHES[0]})
    assert len(tracker.client.get_metric_history(run_id, "loss")) == 2
    assert len(tracker.client.get_metric_history(run_id, "acc")) == 2
    tables.close()


def test_a_deleted_or_missing_run_fails_the_flush_and_nothing_is_written(database, tmp_path):
    tracker, (alive, deleted) = _runs(database, 2, tmp_path)
    tracker.client.delete_run(deleted)
    tables = store_tables(database)
    for gone in (deleted, "0" * 32):
        with pytest.raises(MlflowException, match=gone):
            tables.write_metrics({alive: FLUSHES[0], gone: FLUSHES[1]})
    assert tracker.client.get_run(alive).data.metrics == {}
    tables.close()


def test_endings_of_several_runs_are_written_all_or_none(database, tmp_path):
    tracker, (alive, other, deleted) = _runs(database, 3, tmp_path)
    tracker.client.delete_run(deleted)
    tables = store_tables(database)
    ending = ([Metric("score", 1.0, 1000, 3)], {contract.OUTCOME: "solved"})
    with pytest.raises(MlflowException, match=deleted):
        tables.end_runs([(run_id, "FINISHED", *ending) for run_id in (alive, other, deleted)])
    for run_id in (alive, other):
        run = tracker.client.get_run(run_id)
        assert (run.info.status, run.data.metrics, contract.OUTCOME in run.data.tags) \
            == ("RUNNING", {}, False)
    tables.end_runs([(run_id, "FINISHED", *ending) for run_id in (alive, other)])
    assert {tracker.client.get_run(r).info.status for r in (alive, other)} == {"FINISHED"}
    tables.close()


@pytest.mark.parametrize(("metric", "says"), [
    (Metric("../escape", 1.0, 1000, 1), "Names may be treated as files"),
    (Metric("/rooted", 1.0, 1000, 1), "Names may be treated as files"),
    (Metric("k" * 251, 1.0, 1000, 1), "exceeds the maximum length"),
    (Metric("negative-time", 1.0, -5, 1), "Timestamp must be a nonnegative"),
    (Metric("text-step", 1.0, 1000, "1"), "Step must be a valid long"),
])
def test_a_value_mlflow_refuses_is_refused_and_nothing_is_written(database, tmp_path, metric,
                                                                  says):
    tracker, (run_id,) = _runs(database, 1, tmp_path)
    tables = store_tables(database)
    with pytest.raises(MlflowException, match=says):
        tracker.client.log_batch(run_id, metrics=[metric])
    for _ in range(2):  # a name's checks are remembered, a refusal is not
        with pytest.raises(MlflowException, match=says):
            tables.write_metrics({run_id: [Metric("fine", 1.0, 1000, 1), metric]})
    assert tracker.client.get_run(run_id).data.metrics == {}
    tables.close()


def test_a_param_s_check_remembered_is_mlflow_s_and_a_refusal_raises_every_time():
    from mlflow.utils.validation import _validate_param

    long = "v" * 7000
    for _ in range(2):
        expected = _validate_param("note", long)
        assert checked_param("note", long) == (expected.key, expected.value)
        assert len(checked_param("note", long)[1]) == 6000
        with pytest.raises(MlflowException, match="Names may be treated as files"):
            checked_param("../lr", "0.1")


def test_only_stores_of_the_known_tables_are_written_directly(tmp_path):
    uri = sqlite_store(tmp_path / "store")
    tracking.tracker(uri)
    assert store_tables(uri) is not None
    assert store_tables("http://127.0.0.1:5000") is None
    assert store_tables(f"file://{tmp_path}/mlruns") is None
    db = tracking.sqlite_path(uri)
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE metrics ADD COLUMN model_id VARCHAR(32)")
    conn.close()
    assert store_tables(uri) is None
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    assert store_tables(f"sqlite:///{empty}") is None


def test_a_store_of_an_unchecked_schema_revision_is_not_written_directly(tmp_path):
    uri = sqlite_store(tmp_path / "store")
    tracking.tracker(uri)
    with sqlite3.connect(tracking.sqlite_path(uri)) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'later000rev1'")
    conn.close()
    assert store_tables(uri) is None


def test_the_installed_mlflow_s_schema_is_one_whose_rows_were_checked():
    """An MLflow release of another schema makes every store go through MLflow's client
    (slower, not wrong): check this module's rows against it, then add its revision."""
    assert schema_revision() in REVISIONS


@pytest.mark.cluster
def test_a_postgresql_connection_dropped_while_idle_is_opened_again(postgres, tmp_path):
    import psycopg2

    uri = postgres.create_database(f"dropped_{uuid.uuid4().hex[:12]}")
    tracker, (run_id,) = _runs(uri, 1, tmp_path)
    tables = store_tables(uri)
    tables.write_metrics({run_id: FLUSHES[0][:1]})
    conn = psycopg2.connect(host="127.0.0.1", port=postgres.port, user=postgres.user,
                            password=postgres.password, dbname="postgres")
    conn.autocommit = True
    with conn.cursor() as cur:  # what a restart of the database, or a firewall, does
        cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()", (uri.rsplit("/", 1)[1],))
    conn.close()
    tables.write_metrics({run_id: FLUSHES[0][1:2]})
    assert len(tracker.client.get_metric_history(run_id, "loss")) == 2
    tables.close()


def _raw_rows(tables, run_id):
    """The run's rows in ``runs``, ``tags`` and ``params`` as the database holds them, less
    its id, name, key and times (which differ between two runs), the times checked to be
    milliseconds of today."""
    import sqlalchemy as sa

    with tables.engine.connect() as conn:
        [run] = conn.execute(sa.select(tables.runs).where(
            tables.runs.c.run_uuid == run_id)).mappings().all()
        tags = conn.execute(sa.text("SELECT key, value FROM tags WHERE run_uuid = :r "
                                    "ORDER BY key"), {"r": run_id}).all()
        params = conn.execute(sa.text("SELECT key, value FROM params WHERE run_uuid = :r "
                                      "ORDER BY key"), {"r": run_id}).all()
    now = time.time() * 1000
    for column in ("start_time", "end_time"):
        assert run[column] is None or abs(run[column] - now) < 600_000, column
    differ = {"run_uuid", "name", "start_time", "end_time"}
    return ({k: (v.replace(run_id, "<id>") if isinstance(v, str) else v)
             for k, v in run.items() if k not in differ},
            [t for t in tags if t[0] not in (contract.TRIAL_KEY, contract.RUN_NAME)], params)


def _run_as_written(tracker, run_id):
    """What a configuration's run holds, less what differs between two runs of one sweep."""
    run = tracker.client.get_run(run_id)
    tags = {k: v for k, v in run.data.tags.items()
            if k not in (contract.TRIAL_KEY, contract.RUN_NAME)}
    files = {a.path: Path(tracker.client.download_artifacts(run_id, a.path)).read_text()
             for a in tracker.client.list_artifacts(run_id)}
    info = run.info
    return {"status": info.status, "ended": info.end_time is not None,
            "run": (info.lifecycle_stage, info.user_id, info.start_time is not None,
                    info.run_name == run.data.tags[contract.RUN_NAME],
                    info.artifact_uri.replace(run_id, "<id>"), info.experiment_id),
            "params": run.data.params, "tags": tags, "metrics": _latest(tracker.client, run_id),
            "history": {key: [(step, value) for step, _, value in points]  # stamped apart
                        for key, points in _history(tracker.client, run_id).items()},
            "artifacts": files}


@pytest.mark.parametrize("end", ["finished", "failed", "killed"])
def test_a_run_claimed_and_ended_into_the_tables_reads_as_one_written_by_mlflow(database, end,
                                                                              tmp_path):
    """Each run claimed (created with its params) and ended by a :class:`Tracker` writing
    into the tables, and one writing through MLflow's client, on one store."""
    direct, client = Tracker(database), Tracker(database)
    client.direct = False
    assert direct.tables is not None and client.tables is None
    direct.experiment_id("tables", home=tmp_path)  # start_sweep's, artifacts under tmp_path
    ref = start_sweep(direct, "tables", f"s-{end}-{uuid.uuid4().hex[:6]}", profile="smoke")
    long = "x" * 9000  # past MLflow's 6,000 characters of a param and 8,000 of a tag
    params = {"lr": 0.25, "hidden": 8, "note": long, "sizes": [1, 2]}
    rows = [(100, {"loss": 1.0, "acc": math.nan}), (200, {"loss": 0.5, "acc": 0.75})]
    result = Result(Outcome.SOLVED, {"loss": 0.5, "score": 0.875, "text": long},
                    artifacts={"curve": [0.1, 0.2]})
    runs = [track(t, ref, f"k-{name}", params, end=end, result=result, rows=rows,
                  error="Traceback (most recent call last):\nValueError: boom\n")
            for name, t in (("direct", direct), ("client", client))]
    written = [_run_as_written(client, run_id) for run_id in runs]
    assert written[0] == written[1]
    assert _raw_rows(direct.tables, runs[0]) == _raw_rows(direct.tables, runs[1])
    assert written[0]["status"] == end.upper() and written[0]["ended"]
    assert len(written[0]["params"]["note"]) == 6000
    if end == "finished":
        assert written[0]["metrics"]["score"] == 0.875
        assert written[0]["artifacts"]["curve.json"] == "[0.1, 0.2]"
        assert len(written[0]["tags"][contract.SUMMARY]) == 8000
    if end == "failed":
        assert written[0]["tags"][contract.OUTCOME] == "failed"
        assert "ValueError: boom" in written[0]["artifacts"][contract.TRACEBACK]


def test_tagged_runs_are_the_active_runs_of_the_experiment_with_every_tag_oldest_first(
        database, tmp_path):
    tracker = tracking.tracker(database)
    exp, other = (tracker.experiment_id(f"tagged-{uuid.uuid4().hex[:6]}", home=tmp_path)
                  for _ in "ab")
    tables = store_tables(database)
    sweep = {"ortho.sweep_id": "s1"}

    def tagged():
        found = tables.tagged_runs(exp, sweep, "ortho.trial_key", ["k1", "k2", "k3"],
                                   read=["ortho.attempt", "absent"])
        return {key: [(r.run_id, r.status, r.tags, r.end_time) for r in runs]
                for key, runs in found.items()}

    def run(experiment, start_time, **tags):
        return tracker.client.create_run(experiment, start_time=start_time,
                                         tags=tags).info.run_id

    assert tagged() == {}
    run(other, 1, **sweep, **{"ortho.trial_key": "k1"})
    run(exp, 1, **{"ortho.sweep_id": "s2", "ortho.trial_key": "k1"})
    run(exp, 1, **sweep, **{"ortho.trial_key": "k9"})
    run(exp, 1, **sweep)
    assert tagged() == {}
    later = run(exp, 20, **sweep, **{"ortho.trial_key": "k2", "ortho.attempt": "2", "x": "y"})
    earlier = run(exp, 10, **sweep, **{"ortho.trial_key": "k2"})
    deleted = run(exp, 5, **sweep, **{"ortho.trial_key": "k3"})
    tracker.client.set_terminated(earlier, "FAILED", end_time=30_500)
    assert tagged() == {"k2": [(earlier, "FAILED", {}, 30.5),
                               (later, "RUNNING", {"ortho.attempt": "2"}, None)],
                        "k3": [(deleted, "RUNNING", {}, None)]}
    tracker.client.delete_run(deleted)
    assert list(tagged()) == ["k2"]
    [in_trash] = tables.tagged_runs(exp, sweep, "ortho.trial_key", ["k3"], read=[],
                                    with_deleted=True)["k3"]
    assert (in_trash.run_id, in_trash.deleted) == (deleted, True)
    tables.close()
