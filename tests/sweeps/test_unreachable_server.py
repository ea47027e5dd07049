"""A tracking server that cannot be reached, or answers only errors, stops ``ortho sweep run``,
``resume`` and ``status`` with one line naming ``tracking_uri`` and exit status 2 (issue 14,
item 5), after one connection or a few quick tries (the failing server counts them), not with
a traceback after MLflow's minutes of retries; no Ray is
started for it. So does a database server whose port is closed or that refuses the password,
a tracking server ``ortho report`` cannot reach, and a Ray cluster address where nothing
answers or whose job server refuses this machine's token (naming ``address``). Run in this
process (``sweeps.cli.main``)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ortho_core import experiments
from ortho_core.errors import ConfigError
from sweeps.cli import main
from sweeps.ray_session import check_address
from sweeps.tracking.liveness import CHECK_RETRIES
from tests.servers import free_port
from tests.sweeps.helpers import TOY_MODULE, write_spec


class _Failing(BaseHTTPRequestHandler):
    """A server that answers every request with 503, and counts them."""

    requests = 0

    def do_GET(self) -> None:
        type(self).requests += 1
        self.send_response(503)
        self.end_headers()
        self.wfile.write(b"down for maintenance")

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def failing_server() -> Iterator[str]:
    """The URI (with a password, which must not be printed) of a server answering 503."""
    _Failing.requests = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://user:hunter2@127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _Unauthorized(BaseHTTPRequestHandler):
    """A job server with token authentication that this client has no token for: 401."""

    def do_GET(self) -> None:
        self.send_response(401)
        self.end_headers()
        self.wfile.write(b"Unauthorized: Missing authentication token")

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def toy_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A valid toy spec (so that only the server can be at fault)."""
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)
    return write_spec(tmp_path)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    status = main(argv)
    return status, capsys.readouterr().err.splitlines()


@pytest.mark.parametrize("command", ["run", "resume", "status"])
def test_a_closed_port_is_one_line_and_exit_2_without_retries(
        command: str, toy_spec: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    argv = {"run": ["sweep", "run", str(toy_spec), "--profile", "smoke"],
            "resume": ["sweep", "resume"], "status": ["sweep", "status"]}[command]
    status, err = _run([*argv, "--tracking-uri", uri, "--home", str(tmp_path)], capsys)
    assert status == 2
    assert len(err) == 1, err
    assert err[0].startswith(f"ortho sweep {command}: invalid tracking_uri:")
    assert "connection refused" in err[0] and uri in err[0]
    assert not (tmp_path / "ray").exists()


def test_a_server_answering_errors_is_one_line_without_its_password(
        toy_spec: Path, tmp_path: Path, failing_server: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    status, err = _run(["sweep", "run", str(toy_spec), "--profile", "smoke",
                                 "--tracking-uri", failing_server, "--home", str(tmp_path)],
                                capsys)
    assert status == 2
    assert len(err) == 1, err
    assert "invalid tracking_uri" in err[0] and "server errors" in err[0]
    assert "hunter2" not in err[0] and "user:***@127.0.0.1" in err[0]
    assert _Failing.requests == 1 + CHECK_RETRIES  # a few quick tries, not MLflow's minutes


@pytest.mark.parametrize("command", ["run", "resume", "status"])
def test_a_database_server_that_does_not_answer_is_one_line_and_exit_2(
        command: str, toy_spec: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A PostgreSQL URI whose port is closed: SQLAlchemy would retry for about a minute."""
    port = free_port()
    uri = f"postgresql://user:hunter2@127.0.0.1:{port}/mlflow"
    argv = {"run": ["sweep", "run", str(toy_spec), "--profile", "smoke"],
            "resume": ["sweep", "resume"], "status": ["sweep", "status"]}[command]
    status, err = _run([*argv, "--tracking-uri", uri, "--home", str(tmp_path)], capsys)
    assert status == 2
    assert err == [f"ortho sweep {command}: invalid tracking_uri: expected a database "
                   f"server that answers (connection refused at 127.0.0.1:{port}) (got "
                   f"'postgresql://user:***@127.0.0.1:{port}/mlflow')"]
    assert not (tmp_path / "ray").exists()


@pytest.mark.cluster
@pytest.mark.parametrize("command", ["run", "status"])
def test_a_database_that_refuses_the_password_is_one_line_and_exit_2(
        command: str, toy_spec: Path, tmp_path: Path, postgres,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A PostgreSQL URI with a wrong password: MLflow would retry it for about two minutes
    and end in a traceback; the command says what the server said, in one line."""
    uri = postgres.create_database(f"refused_{command}").replace(postgres.password,
                                                                "wrong-password")
    argv = {"run": ["sweep", "run", str(toy_spec), "--profile", "smoke"],
            "status": ["sweep", "status"]}[command]
    status, err = _run([*argv, "--tracking-uri", uri, "--home", str(tmp_path)], capsys)
    assert status == 2
    assert err == [f"ortho sweep {command}: invalid tracking_uri: expected a database server "
                   f"that accepts this connection (it said: connection to server at "
                   f"\"127.0.0.1\", port {postgres.port} failed: FATAL:  password "
                   f"authentication failed for "
                   f"user \"{postgres.user}\") (got '{uri.replace('wrong-password', '***')}')"]
    assert not (tmp_path / "ray").exists()


def test_a_report_of_a_server_that_takes_no_connection_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``ortho report`` (of ``analysis``, which reads MLflow only) checks the server too,
    instead of MLflow's four minutes of retries and a traceback."""
    port = free_port()
    status, err = _run(["report", "synthetic-max-length", "--tracking-uri",
                        f"http://user:hunter2@127.0.0.1:{port}"], capsys)
    assert status == 2
    assert err == [f"ortho report: invalid tracking_uri: expected a server that answers "
                   f"(connection refused at 127.0.0.1:{port}) (got "
                   f"'http://user:***@127.0.0.1:{port}')"]


@pytest.mark.parametrize("form", ["{host}:{port}", "ray://{host}:{port}"])
def test_a_cluster_address_where_nothing_answers_is_one_line_and_exit_2(
        form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Ray itself would retry the address for about a minute, printing its own warnings."""
    port = free_port()
    address = form.format(host="127.0.0.1", port=port)
    with pytest.raises(ConfigError) as err:
        check_address(address)
    assert str(err.value) == (f"address: expected a running Ray cluster's address that answers "
                              f"(connection refused at 127.0.0.1:{port}) (got {address!r})")
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)
    status, lines = _run(["sweep", "run", str(write_spec(tmp_path)), "--profile",
                                   "smoke", "--address", f"127.0.0.1:{port}", "--home",
                                   str(tmp_path / "home")], capsys)
    assert status == 2
    assert lines == [f"ortho sweep run: invalid {err.value}".replace(address, f"127.0.0.1:{port}")]
    assert not (tmp_path / "home").exists()


def test_a_job_server_that_refuses_the_token_is_one_line_and_exit_2(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``ortho sweep submit`` to a cluster that answers 401: bad input naming the address and
    where a token comes from, not exit status 1, which says the job failed."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Unauthorized)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        status, err = _run(["sweep", "submit", "orth-pretrain-convergence", "--profile",
                            "smoke", "--address", address], capsys)
    finally:
        server.shutdown()
        server.server_close()
    assert status == 2
    assert err == [f"ortho sweep submit: invalid address: expected a cluster that accepts this "
                   f"machine's Ray token (RAY_AUTH_MODE=token with RAY_AUTH_TOKEN, "
                   f"RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token; it said: Authentication "
                   f"required: Unauthorized: Missing authentication token) (got '{address}')"]


def test_a_job_server_address_without_its_scheme_is_refused_at_once(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``--address HEAD:8265``: Ray would take it for the GCS and wait 40 s."""
    status, err = _run(["sweep", "submit", "orth-pretrain-convergence", "--profile", "smoke",
                        "--address", "127.0.0.1:8265"], capsys)
    assert status == 2
    assert err == ["ortho sweep submit: invalid address: expected the job server's URL, "
                   "http://HOST:PORT (the cluster's dashboard, port 8265 by default) (got "
                   "'127.0.0.1:8265')"]


def test_a_database_whose_driver_is_missing_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A MySQL URI (a scheme MLflow takes) where this machine has no MySQL driver: said before
    MLflow's traceback, once a server takes the connection; and a port that is not a number."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        status, err = _run(["sweep", "status", "--tracking-uri",
                            f"mysql://user:hunter2@127.0.0.1:{port}/mlflow", "--home",
                            str(tmp_path)], capsys)
    assert status == 2
    assert err == [f"ortho sweep status: invalid tracking_uri: expected a database whose driver "
                   f"is installed here (No module named 'MySQLdb') (got "
                   f"'mysql://user:***@127.0.0.1:{port}/mlflow')"]
    status, err = _run(["report", "synthetic-max-length", "--tracking-uri",
                        "http://user:hunter2@127.0.0.1:http"], capsys)
    assert (status, err) == (2, ["ortho report: invalid tracking_uri: expected a URI whose port "
                                 "is a number (got 'http://user:***@127.0.0.1:http')"])
