"""The start of a sweep made cheaper without changing what it makes: a new embedded store
copied from a template is the database MLflow itself creates and opens without migrating;
the store opens beside Ray's start; the writer starts while Tune sets up and starts the
trials, and its errors still stop the sweep before any configuration trains; Ray's node comes
up while another process holds the dashboard agent's default port."""

from __future__ import annotations

import io
import json
import pickle
import socket
import sqlite3
import time
from pathlib import Path

import pytest
import ray

from sweeps import tracking, tune_run
from sweeps.ray_session import beside_ray_start
from sweeps.runner import run_sweep
from sweeps.tracking import bootstrap
from sweeps.tune_progress import WriterStarted
from sweeps.writer import StartingWriter, launch_writer
from tests.sweeps.helpers import new_home, toy_ray, write_spec

AGENT_PORT = 52365
"""Ray's default port of the dashboard agent (``ray_constants``)."""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty template cache for this test."""
    monkeypatch.setenv(bootstrap.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _mlflow_store(path) -> str:
    """A store created by MLflow alone (its migrations), as before templates; its URI."""
    from mlflow import MlflowClient

    path.parent.mkdir(parents=True)
    uri = f"sqlite:///{path}"
    MlflowClient(tracking_uri=uri).search_experiments()
    return uri


def _experiments(path) -> list[tuple[int, str, str, str]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT experiment_id, name, artifact_location, lifecycle_stage "
                            "FROM experiments ORDER BY experiment_id").fetchall()
    conn.close()
    return rows


def _schema(db: Path) -> tuple[list[tuple[str, str, str]], list[str]]:
    """What MLflow checks and uses of a store: its tables, indexes and triggers (type, name,
    SQL, sorted) and its ``alembic_version`` rows. Each statement's lines (a table's columns
    and constraints) are sorted: MLflow's migrations emit a table's constraints in an order
    that varies from one process to the next (two stores MLflow made itself differ so)."""
    with sqlite3.connect(db) as conn:
        objects = sorted((kind, name, "\n".join(sorted(
            line.strip().rstrip(",") for line in sql.splitlines())))
            for kind, name, sql in conn.execute(
                "SELECT type, name, COALESCE(sql, '') FROM sqlite_master "
                "WHERE name NOT LIKE 'sqlite_%'"))
        versions = [row[0] for row in conn.execute("SELECT version_num FROM alembic_version")]
    conn.close()
    return objects, versions


def test_a_new_store_is_the_database_mlflow_makes(tmp_path, cache, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MLflow puts the Default experiment's artifacts under it
    theirs = tmp_path / "mlflow" / "mlflow.db"
    _mlflow_store(theirs)
    ours = tmp_path / "home" / "mlflow.db"
    t = tracking.Tracker(f"sqlite:///{ours}")
    assert [e.name for e in t.client.search_experiments()] == ["Default"]

    assert _schema(ours) == _schema(theirs)
    objects, versions = _schema(ours)
    assert versions == [bootstrap.schema_revision()]
    assert {name for kind, name, _ in objects if kind == "table"} >= {
        "experiments", "runs", "metrics", "params", "tags", "alembic_version"}
    assert _experiments(ours) == _experiments(theirs) == [
        (0, "Default", str(tmp_path / "mlruns" / "0"), "active")]
    assert [p.name for p in cache.iterdir()] == [
        f"mlflow-{__import__('mlflow').__version__}-{versions[0]}.db"]
    assert _experiments(next(cache.iterdir())) == []  # the template has no Default


def test_mlflow_opens_a_copy_without_migrating(tmp_path, cache, monkeypatch):
    import mlflow.store.db.utils as db_utils

    bootstrap.template()  # built by MLflow, migrations and all, before they are forbidden

    def no_migrations(*args, **kwargs):
        raise AssertionError("MLflow migrated the store")

    monkeypatch.setattr(db_utils, "_upgrade_db", no_migrations)
    monkeypatch.setattr(db_utils, "_initialize_tables", no_migrations)
    with pytest.raises(AssertionError, match="migrated"):  # MLflow's own way migrates
        _mlflow_store(tmp_path / "plain" / "mlflow.db")

    db = tmp_path / "copy" / "mlflow.db"
    assert bootstrap.create_sqlite_store(db)
    t = tracking.Tracker(f"sqlite:///{db}")
    exp = t.experiment_id("spec")
    run = t.client.create_run(exp, run_name="r")
    t.client.log_metric(run.info.run_id, "loss", 0.5)
    assert t.client.get_run(run.info.run_id).data.metrics == {"loss": 0.5}


def test_an_existing_store_is_never_replaced(tmp_path, cache):
    db = tmp_path / "home" / "mlflow.db"
    assert bootstrap.create_sqlite_store(db)
    t = tracking.Tracker(f"sqlite:///{db}")
    exp = t.experiment_id("kept")
    assert not bootstrap.create_sqlite_store(db)
    assert tracking.Tracker(f"sqlite:///{db}").client.get_experiment(exp).name == "kept"
    assert [p.name for p in db.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_without_a_writable_cache_mlflow_builds_the_store(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv(bootstrap.CACHE_ENV, str(blocker / "cache"))
    db = tmp_path / "home" / "mlflow.db"
    assert not bootstrap.create_sqlite_store(db)
    assert not db.exists()
    t = tracking.Tracker(f"sqlite:///{db}")
    assert [e.name for e in t.client.search_experiments()] == ["Default"]


def test_the_store_opens_in_a_thread_beside_ray_start(tmp_path):
    import threading

    def whose() -> str:
        return threading.current_thread().name

    assert beside_ray_start(whose).result().startswith("ortho-store")

    def broken() -> None:
        raise OSError("store unreachable")

    with pytest.raises(OSError, match="store unreachable"):
        beside_ray_start(broken).result()


def test_ray_starts_while_another_process_holds_the_agents_port(tmp_path):
    if ray.is_initialized():
        pytest.skip("needs a Ray of its own")
    from sweeps.ray_session import start_embedded_ray

    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", AGENT_PORT))
        holder.listen()
    except OSError:
        pass  # held already (another Ray on this machine): the same situation
    try:
        start_embedded_ray(num_cpus=1)
        try:
            node = ray.get_runtime_context().get_node_id()
            from ray._private import ray_constants
            from ray.dashboard import consts
            from ray.experimental import internal_kv

            deadline = time.monotonic() + 30
            value = None
            while value is None and time.monotonic() < deadline:
                value = internal_kv._internal_kv_get(
                    f"{consts.DASHBOARD_AGENT_ADDR_NODE_ID_PREFIX}{node}",
                    namespace=ray_constants.KV_NAMESPACE_DASHBOARD)
                time.sleep(0.1)
            assert value is not None
            _, http_port, _ = json.loads(value)
            assert http_port not in (-1, AGENT_PORT)  # its HTTP service is up elsewhere
        finally:
            ray.shutdown()
    finally:
        holder.close()


@pytest.mark.usefixtures(toy_ray.__name__)
def test_a_writer_is_launched_at_once_and_its_errors_raise_when_awaited(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")

    def waits(*args, **kwargs):
        raise AssertionError("launch_writer waited for the writer")

    with monkeypatch.context() as m:  # no wait for a process or a store
        m.setattr(ray, "get", waits)
        m.setattr(ray, "wait", waits)
        starting = launch_writer(f"sqlite:///{blocker}/home/mlflow.db", "ortho-writer-broken")
    deadline = time.monotonic() + 60
    while not starting.settled() and time.monotonic() < deadline:  # never blocks
        time.sleep(0.05)
    assert starting.settled()
    with pytest.raises(ray.exceptions.RayActorError, match="NotADirectoryError"):
        starting.ready()


class FakeWriter:
    """A :class:`~sweeps.writer.StartingWriter` that starts when told to, failing with
    ``error`` if one is given."""

    def __init__(self) -> None:
        self.up = False
        self.error: Exception | None = None
        self.waits = 0

    def settled(self) -> bool:
        return self.up

    def ready(self) -> str:
        self.waits += 1
        if self.error is not None:
            raise self.error
        return "actor"


def test_writer_started_never_waits_and_raises_the_writers_error_once_settled():
    starting = FakeWriter()
    callback = WriterStarted(starting)
    callback.on_step_begin(0, [])
    assert starting.waits == 0  # still starting: Tune goes on
    starting.up, starting.error = True, RuntimeError("the store cannot be opened")
    with pytest.raises(RuntimeError, match="the store cannot be opened"):
        callback.on_step_begin(1, [])


def test_writer_started_asks_once_and_its_pickled_copy_does_nothing():
    starting = FakeWriter()
    starting.up = True
    callback = WriterStarted(starting)
    for step in range(3):
        callback.on_step_begin(step, [])
    assert starting.waits == 1 and callback.started
    starting.error = RuntimeError("not asked again")
    copy = pickle.loads(pickle.dumps(WriterStarted(starting)))  # Tune's experiment state
    copy.on_step_begin(0, [])
    assert copy.writer is None and not copy.started


@pytest.mark.usefixtures(toy_ray.__name__)
def test_a_writer_that_cannot_open_the_store_stops_the_sweep_before_any_training(
        tmp_path, monkeypatch):
    """Trials start while the writer starts (``WriterStarted``); their claims wait for it
    and fail with it, so nothing trains, and the writer's own error ends the sweep."""
    home = new_home(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("")
    broken = f"sqlite:///{blocker}/home/mlflow.db"  # no process can open it

    def writer_of_a_broken_store(uri: str, name: str) -> StartingWriter:
        return launch_writer(broken, name)

    monkeypatch.setattr(tune_run, "launch_writer", writer_of_a_broken_store)
    counters = tmp_path / "counters"
    spec = write_spec(tmp_path, fixed={"steps": 1, "counter_dir": str(counters)})
    with pytest.raises(ray.exceptions.RayActorError, match="NotADirectoryError"):
        run_sweep(str(spec), "smoke", home=home, stream=io.StringIO())
    assert not counters.exists()  # no configuration was trained
