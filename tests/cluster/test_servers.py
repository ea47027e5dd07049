"""The test servers of :mod:`tests.servers`: they work, they listen on 127.0.0.1 only, and
stopping them leaves no process behind."""

from __future__ import annotations

import signal
import subprocess
import sys

import psycopg2
import pytest
from mlflow.tracking import MlflowClient

from tests.servers import (
    Listener,
    MLflowServer,
    Postgres,
    ProcessSet,
    RayCluster,
    listeners,
)


@pytest.mark.parametrize(("address", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.53", True), ("::1", True), ("::ffff:127.0.0.1", True),
    ("0.0.0.0", False), ("::", False), ("*", False), ("192.0.2.2", False),
    ("::ffff:192.0.2.2", False), ("fd00::2", False),
])
def test_listener_loopback(address: str, loopback: bool) -> None:
    assert Listener("tcp", address, 1, 1, "x").loopback is loopback


def test_listeners_reports_own_socket() -> None:
    server = subprocess.Popen(
        [sys.executable, "-c", "import socket, time; s = socket.socket(); "
         "s.bind(('127.0.0.1', 0)); s.listen(); print(s.getsockname()[1], flush=True); "
         "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        found = listeners({server.pid})
        assert [(s.protocol, s.address, s.port, s.loopback) for s in found] == \
            [("tcp", "127.0.0.1", port, True)]
    finally:
        server.kill()
        server.wait()


def test_process_set_stops_descendants_that_ignore_sigterm() -> None:
    # A parent in its own session whose child ignores SIGTERM and leaves the group.
    code = ("import os, signal, subprocess, sys, time; "
            "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True); "
            "time.sleep(60)'], start_new_session=True, stdout=sys.stdout); "
            "time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", code], start_new_session=True,
                              stdout=subprocess.PIPE)
    assert parent.stdout is not None
    parent.stdout.readline()  # the child is up
    processes = ProcessSet({parent.pid})
    pids = processes.pids()
    assert len(pids) == 2 and parent.pid in pids
    processes.stop(grace=0.5)
    parent.wait(5)
    assert processes.pids() == set()
    assert parent.returncode == -signal.SIGTERM


def _assert_loopback_only(pids: set[int], port: int) -> None:
    found = listeners(pids)
    assert port in {s.port for s in found}
    assert [s for s in found if not s.loopback] == []


@pytest.mark.cluster
def test_postgres_loopback_with_password(postgres: Postgres) -> None:
    _assert_loopback_only(ProcessSet({postgres.pid}).pids(), postgres.port)
    assert (postgres.directory / f".s.PGSQL.{postgres.port}").is_socket()
    with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
        psycopg2.connect(host="127.0.0.1", port=postgres.port, user=postgres.user,
                         password="wrong", dbname="postgres", connect_timeout=5)


@pytest.mark.cluster
def test_mlflow_server_loopback_backed_by_postgres(mlflow_server: MLflowServer,
                                                   postgres: Postgres) -> None:
    _assert_loopback_only(ProcessSet({mlflow_server.pid}).pids(), mlflow_server.port)
    client = MlflowClient(mlflow_server.uri)
    experiment = client.create_experiment("servers-roundtrip")
    run = client.create_run(experiment)
    client.log_metric(run.info.run_id, "loss", 0.25, step=3)
    client.log_text(run.info.run_id, "hello", "note.txt")
    assert client.get_metric_history(run.info.run_id, "loss")[0].value == 0.25
    # The run is a row in PostgreSQL, the artifact a file under the server's destination.
    conn = psycopg2.connect(postgres.uri("mlflow").replace("+psycopg2", ""))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT experiment_id FROM runs WHERE run_uuid = %s",
                        (run.info.run_id,))
            assert cur.fetchone() == (int(experiment),)
    finally:
        conn.close()
    stored = list(mlflow_server.artifacts.rglob("note.txt"))
    assert len(stored) == 1 and stored[0].read_text() == "hello"


@pytest.mark.cluster
def test_ray_cluster_two_nodes_loopback_only(ray_cluster: RayCluster) -> None:
    pids = ray_cluster.processes.pids()
    _assert_loopback_only(pids, int(ray_cluster.gcs_address.rsplit(":", 1)[1]))
    _assert_loopback_only(pids, int(ray_cluster.dashboard_url.rsplit(":", 1)[1]))
    nodes = ray_cluster.alive_nodes()
    assert sorted(n["node_ip"] for n in nodes) == ["127.0.0.1", "127.0.0.1"]
    by_resource = {name: n for n in nodes for name in ray_cluster.nodes
                   if name in n["resources_total"]}
    assert set(by_resource) == {"node_a", "node_b"}
    assert by_resource["node_a"]["node_id"] != by_resource["node_b"]["node_id"]
    assert by_resource["node_a"]["is_head_node"] and not by_resource["node_b"]["is_head_node"]
    assert all(n["resources_total"]["CPU"] == 1 for n in nodes)
