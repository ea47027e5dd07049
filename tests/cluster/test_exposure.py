"""Exposure (issue 14, item 6): what the project starts listens on 127.0.0.1 only, and no
credential of the environment or of the tracking URI leaks.

One module fixture plays a user whose environment holds cloud keys and tokens and whose
tracking URI names a PostgreSQL database with its password (in ``$ORTHO_TRACKING_URI``, so
that the password is on no command line the user typed): ``ortho report`` before any sweep
(an error that names the store), ``ortho sweep run`` of the smoke profile on an embedded Ray,
``ortho sweep status``, ``ortho report`` and, briefly, ``ortho ui``. While the sweep and the
UI run it lists, every half second, the listening sockets and the command lines of their
process trees: the command's descendants plus every process whose command line names the
test's folder (Ray's session directory there, ``$RAY_TMPDIR``, catches Ray's
processes that do not descend from the driver). Then the tests search for every secret in
what the commands printed (the UI's server log included), those command lines, every
param, tag and metric name of every run, every artifact (downloaded), every row of the
PostgreSQL database, and every file under the test's folder: Ray's session logs (driver,
workers, agents), Tune's state, the report's cache, the artifacts as stored.

The sweep and the UI run as ``python -m sweeps.cli`` subprocesses (a real driver and
server, with their own process trees); status and report run in this process.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from mlflow.tracking import MlflowClient

from sweeps.cli import main
from tests.servers import Listener, Postgres, ProcessSet, free_port, listeners
from tests.sweeps.helpers import DATA_DIR

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SPEC = "synthetic-max-length"
SECRET_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
              "MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD", "DATABRICKS_TOKEN",
              "PGPASSWORD", "HF_TOKEN", "GITHUB_TOKEN")
"""Environment variables planted with fake secrets."""
SAMPLE_EVERY = 0.5
"""Seconds between two looks at a running command's processes (each costs about 0.03 s of
CPU: it reads the sockets of every process)."""
UI_READY = 90.0
"""Seconds ``ortho ui`` may take to answer (about 4 s alone; the machine is shared)."""
UI_STOP = 60.0
"""Seconds ``ortho ui`` may take to stop its server once told to (SIGTERM)."""


@dataclass
class Watch:
    """What the processes of a running command were seen doing."""

    listeners: set[Listener] = field(default_factory=set)
    cmdlines: dict[int, str] = field(default_factory=dict)

    def sample(self, root: int, folder: Path) -> None:
        """Record the listening sockets and command lines of ``root``'s process tree and of
        every process whose command line names ``folder``."""
        pids = {root}
        with contextlib.suppress(psutil.NoSuchProcess):
            pids |= {c.pid for c in psutil.Process(root).children(recursive=True)}
        for proc in psutil.process_iter(["cmdline"]):
            if any(str(folder) in arg for arg in proc.info["cmdline"] or ()):
                pids.add(proc.pid)
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                self.cmdlines[pid] = " ".join(psutil.Process(pid).cmdline())
        self.listeners.update(listeners(pids))


@dataclass
class Observed:
    """Everything the commands of the module fixture printed, started and stored."""

    secrets: dict[str, str]
    """Name (an environment variable, or ``tracking URI password``) → secret value."""
    uri: str
    folder: Path
    printed: dict[str, str]
    sweep: Watch
    ui: Watch
    ui_port: int


def _in_process(*argv: str) -> tuple[int, str]:
    """``ortho ARGV`` in this process: exit status, stdout and stderr together."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = main(list(argv))
    return status, out.getvalue()


def _spawn(argv: list[str], folder: Path, env: dict[str, str],
           started: ProcessSet) -> subprocess.Popen:
    """``ortho ARGV`` in a session of its own (added to ``started``), output to
    ``<folder>/<command>.log``."""
    with (folder / f"{argv[0]}.log").open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "sweeps.cli", *argv], cwd=folder,
                                env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    started.groups.add(proc.pid)
    return proc


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _run_sweep(folder: Path, env: dict[str, str], started: ProcessSet) -> Watch:
    """``ortho sweep run SPEC --profile smoke``, watched until it ends."""
    watch = Watch()
    proc = _spawn(["sweep", "run", SPEC, "--profile", "smoke"], folder, env, started)
    while proc.poll() is None:
        watch.sample(proc.pid, folder)
        time.sleep(SAMPLE_EVERY)
    assert proc.returncode == 0, (folder / "sweep.log").read_text()
    return watch


def _run_ui(folder: Path, env: dict[str, str], port: int, started: ProcessSet) -> Watch:
    """``ortho ui --port PORT``, watched until it answers, then stopped (SIGTERM)."""
    watch = Watch()
    proc = _spawn(["ui", "--port", str(port)], folder, env, started)
    deadline = time.monotonic() + UI_READY
    while not _answers(f"http://127.0.0.1:{port}/health"):
        assert proc.poll() is None and time.monotonic() < deadline, \
            (folder / "ui.log").read_text()
        watch.sample(proc.pid, folder)
        time.sleep(SAMPLE_EVERY)
    watch.sample(proc.pid, folder)
    proc.send_signal(signal.SIGTERM)
    proc.wait(UI_STOP)
    return watch


@pytest.fixture(scope="module")
def observed(postgres: Postgres) -> Iterator[Observed]:
    """Run the commands with secrets planted (module docstring); what they left."""
    folder = Path(tempfile.mkdtemp(prefix="ortho-x-", dir="/tmp"))  # short socket paths
    planted = {name: f"fake-{name.lower()}-{secrets.token_hex(8)}" for name in SECRET_ENV}
    uri = postgres.create_database(f"exposure_{secrets.token_hex(4)}")
    planted["tracking URI password"] = postgres.password
    env = {**os.environ, **{k: v for k, v in planted.items() if k in SECRET_ENV},
           "ORTHO_TRACKING_URI": uri, "ORTHO_HOME": str(folder / "home"),
           "RAY_TMPDIR": str(folder / "r"), "ORTHO_DATA_DIR": DATA_DIR,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                      os.environ.get("PYTHONPATH")]))}
    printed: dict[str, str] = {}
    started, port = ProcessSet(), free_port()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(folder)
            for name in ("ORTHO_TRACKING_URI", "ORTHO_HOME", *SECRET_ENV):
                mp.setenv(name, env[name])
            status, printed["report before any sweep"] = _in_process("report", SPEC)
            assert status == 2, printed
            sweep = _run_sweep(folder, env, started)
            for argv in (("sweep", "status"), ("report", SPEC)):
                status, printed[" ".join(argv)] = _in_process(*argv)
                assert status == 0, printed
            ui = _run_ui(folder, env, port, started)
        printed["sweep run"] = (folder / "sweep.log").read_text()
        printed["ui"] = (folder / "ui.log").read_text()
        yield Observed(planted, uri, folder, printed, sweep, ui, port)
    finally:
        started.stop()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_sweep_listens_on_loopback_only(observed: Observed) -> None:
    """Every socket the sweep's processes listened on (TCP and UDP): 127.0.0.1 or ::1."""
    seen = observed.sweep.listeners
    names = {s.process for s in seen}
    assert {"gcs_server", "raylet"} <= names and any(n.startswith("ray::") for n in names), seen
    assert [s for s in seen if not s.loopback] == [], seen


def test_ortho_ui_listens_on_loopback_only(observed: Observed) -> None:
    seen = observed.ui.listeners
    assert observed.ui_port in {s.port for s in seen}, seen
    assert [s for s in seen if not s.loopback] == [], seen


def _found(text: str | bytes, values: dict[str, str]) -> list[str]:
    """The names of the secrets in ``text``."""
    if isinstance(text, bytes):
        return [name for name, value in values.items() if value.encode() in text]
    return [name for name, value in values.items() if value in text]


def _run_texts(client: MlflowClient, into: Path) -> Iterator[tuple[str, str | bytes]]:
    """(where, text) of every param, tag, metric name and artifact of every run."""
    experiments = client.search_experiments(view_type=3)
    runs = client.search_runs([e.experiment_id for e in experiments], run_view_type=3)
    assert len(runs) == 9, runs  # the sweep's parent and its 8 configurations
    for run in runs:
        where = f"run {run.info.run_id}"
        yield f"{where} params", repr(run.data.params)
        yield f"{where} tags", repr(run.data.tags)
        yield f"{where} metric names", repr(sorted(run.data.metrics))
        local = Path(client.download_artifacts(run.info.run_id, "", str(into / run.info.run_id)))
        files = [p for p in local.rglob("*") if p.is_file()]
        assert files, f"{where} has no artifacts"
        for path in files:
            yield f"{where} artifact {path.relative_to(local)}", path.read_bytes()


def _database_rows(uri: str) -> Iterator[tuple[str, str]]:
    """(table, row as text) of every row of the store's PostgreSQL database."""
    import psycopg2

    conn = psycopg2.connect(uri.replace("+psycopg2", ""))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            for (table,) in cur.fetchall():
                cur.execute(f'SELECT t::text FROM "{table}" t')
                for (row,) in cur.fetchall():
                    yield table, row
    finally:
        conn.close()


def test_no_secret_in_output_command_lines_logs_or_the_store(observed: Observed,
                                                             tmp_path: Path) -> None:
    values = observed.secrets
    # The commands did name the store and the Ray session did log: a search of nothing
    # would pass too.
    store = observed.uri.rsplit("@", 1)[1]  # 127.0.0.1:PORT/DATABASE
    for command in ("report before any sweep", "sweep run", "ui"):
        assert store in observed.printed[command], observed.printed[command]
    ray_logs = list(observed.folder.glob("r/ray/session_*/logs/*.log"))
    assert len(ray_logs) >= 5 and len(observed.sweep.cmdlines) >= 5, ray_logs

    leaks = [(f"output of ortho {command}", name) for command, text in observed.printed.items()
             for name in _found(text, values)]
    leaks += [(f"command line {cmd[:200]}", name)
              for watch in (observed.sweep, observed.ui) for cmd in watch.cmdlines.values()
              for name in _found(cmd, values)]
    leaks += [(where, name) for where, text in
              _run_texts(MlflowClient(observed.uri), tmp_path) for name in _found(text, values)]
    leaks += [(f"database table {table}", name)
              for table, row in _database_rows(observed.uri) for name in _found(row, values)]
    leaks += [(f"file {path.relative_to(observed.folder)}", name)
              for path in observed.folder.rglob("*") if path.is_file() and not path.is_symlink()
              for name in _found(path.read_bytes(), values)]
    assert leaks == [], "\n".join(f"{name} in {where}" for where, name in leaks)
