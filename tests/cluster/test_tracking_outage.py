"""Issue 14, item 2: the tracking server (MLflow on PostgreSQL) stops for about 20 s in the
middle of a sweep and starts again on the same port; PostgreSQL stays up.

The toy sweep (4 configurations, 2 at a time, every step logged) goes on training through
the outage: what its trials log meanwhile waits in the writer's outbox
(:mod:`sweeps.tracking.outbox`) and arrives when the server is back, the endings of the
trials that ended during the outage after their metrics, and the claims of the trials that
started during it once the server answers. Afterwards every run is FINISHED with its whole
metric history, in step order, each value once, some of it logged while the server was
down, and the sweep is FINISHED.
"""

from __future__ import annotations

import io
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg2
import pytest

from sweeps import tracking
from sweeps.runner import run_sweep
from tests.servers import Postgres, ProcessSet, _http_ok, _wait_until, free_port, spawn_mlflow
from tests.sweeps.helpers import toy_ray, write_spec

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.usefixtures(toy_ray.__name__)]

STEPS = 1500
"""Steps of each configuration (each logs ``loss`` and ``value``): 1000 values, a batch of
the trial, every 500 steps."""
OUTAGE_S = 20.0
"""How long the server is down."""


@dataclass
class Restartable:
    """An ``mlflow server`` on a fixed port that can be stopped and started again."""

    backend: str
    directory: Path
    port: int = field(default_factory=free_port)
    server: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        """The tracking URI."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the server (as :func:`tests.servers.start_mlflow` does) and wait for it."""
        self.server = spawn_mlflow(self.port, self.directory, self.backend)
        server = self.server
        _wait_until(lambda: _http_ok(f"{self.uri}/health"), "mlflow server",
                    alive=lambda: server.poll() is None, log=self.directory / "mlflow.log")

    def stop(self) -> None:
        """Stop every process of the server (killed if it is not gone within half a second:
        the outage must begin while the trials train)."""
        if self.server is not None:
            ProcessSet({self.server.pid}).stop(grace=0.5)
            self.server.wait()
            self.server = None


@contextmanager
def restartable_mlflow(backend: str, directory: Path) -> Iterator[Restartable]:
    """A started :class:`Restartable`, stopped at the end."""
    directory.mkdir()
    server = Restartable(backend, directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _metric_rows(postgres: Postgres, database: str) -> int:
    conn = psycopg2.connect(host="127.0.0.1", port=postgres.port, user=postgres.user,
                            password=postgres.password, dbname=database)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM metrics")
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def _outage(server: Restartable, postgres: Postgres, database: str,
            window: list[float]) -> None:
    """Once the first metrics are stored, stop the server for :data:`OUTAGE_S` seconds;
    ``window`` gets when it stopped and when it answered again (ms since the epoch)."""
    deadline = time.monotonic() + 60
    while _metric_rows(postgres, database) == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    server.stop()
    window.append(time.time() * 1000)
    time.sleep(OUTAGE_S)
    server.start()
    window.append(time.time() * 1000)


def test_a_sweep_rides_out_a_restart_of_its_tracking_server(postgres: Postgres,
                                                            tmp_path: Path) -> None:
    spec = write_spec(tmp_path, fixed={"steps": STEPS, "sleep": 0.006})
    database = "outage"
    with restartable_mlflow(postgres.create_database(database), tmp_path / "mlflow") as server:
        window: list[float] = []
        outage = threading.Thread(target=_outage, args=(server, postgres, database, window))
        outage.start()
        out = io.StringIO()
        progress = run_sweep(str(spec), "smoke", tracking_uri=server.uri,
                             home=tmp_path / "home", stream=out)
        outage.join()
        assert len(window) == 2, "the server was not stopped during the sweep"
        assert progress.state == "finished" and progress.failed == 0, out.getvalue()
        assert "rode out a tracking outage" in out.getvalue()

        tracker = tracking.tracker(server.uri)
        record = tracker.find_sweep(progress.sweep_id)
        assert record is not None and record.status == "FINISHED"
        runs = tracker.configurations(record.ref)
        assert sorted(float(r.data.params["x"]) for r in runs) == [0.1, 0.4, 0.7, 0.9]
        during = 0
        for run in runs:
            assert run.info.status == "FINISHED"
            assert run.data.tags[tracking.OUTCOME] in {"solved", "unsolved"}
            x = float(run.data.params["x"])
            for name, expected in (("loss", lambda s, x=x: x / (s + 1)),
                                   ("value", lambda s, x=x: x)):
                history = tracker.client.get_metric_history(run.info.run_id, name)
                by_time = sorted(history, key=lambda m: (m.timestamp, m.step))
                assert [m.step for m in by_time] == list(range(STEPS))  # in order, once each
                assert all(m.value == pytest.approx(expected(m.step)) for m in history)
                during += sum(window[0] < m.timestamp < window[1] for m in history)
        assert during > 0, "nothing was logged while the server was down"
