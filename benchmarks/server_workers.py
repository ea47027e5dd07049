"""What the number of uvicorn workers of an ``mlflow server`` costs the sweep's writer: two
servers on 127.0.0.1, one started with ``--workers 1`` (what ``cluster/mlflow`` runs) and one
with ``--workers N`` (``--workers``, default 2, what it ran before), each on a fresh SQLite
store, measured from this one process.

    python benchmarks/server_workers.py [--workers 2] [--requests 50] [--configs 10]

With several workers uvicorn binds the listening socket itself and hands it to its worker
processes without ``IPPROTO_TCP`` (Kludex/uvicorn#3149), so asyncio does not set
``TCP_NODELAY`` on the connections they accept: a response's headers and body go out as two
segments, the second held by Nagle's algorithm until the client's delayed ACK of the first,
about 40 ms on Linux, for every request after a connection's first. MLflow's client keeps
its connections open, so every call of the writer pays it.

Printed for each server, and the ratio N workers / one: the median time of a request on one
kept-alive connection (``GET /health``), and of tracking one configuration as a trial does
through :class:`~sweeps.tracking.Tracker` (claim, ``--flushes`` batches of ``--batch`` metric
values, finish; :func:`tracking_writer.track`, the writer's own calls), in the order
A B B A.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tracking_writer import Direct, track


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(directory: Path, workers: int,
                 started: list[subprocess.Popen[bytes]]) -> str:
    """``mlflow server`` with ``workers`` uvicorn workers on a fresh SQLite store under
    ``directory``, added to ``started`` at once (so that it is stopped whatever follows),
    ready; its URI."""
    directory.mkdir(parents=True)
    port = free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
           "MLFLOW_DISABLE_TELEMETRY": "true"}
    with (directory / "mlflow.log").open("wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port",
             str(port), "--workers", str(workers), "--backend-store-uri",
             f"sqlite:///{directory / 'mlflow.db'}", "--artifacts-destination",
             str(directory / "artifacts")],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    started.append(server)
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2):
                return uri
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                tail = (directory / "mlflow.log").read_text(errors="replace")[-2000:]
                raise SystemExit(f"mlflow server --workers {workers} did not start; its log "
                                 f"ends:\n{tail}") from None
            time.sleep(0.3)


def kept_alive(uri: str, requests: int) -> float:
    """Median seconds of ``GET /health`` on one kept-alive connection (its first request
    left out)."""
    host, port = uri.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    times = []
    for _ in range(requests + 1):
        began = time.perf_counter()
        connection.request("GET", "/health")
        connection.getresponse().read()
        times.append(time.perf_counter() - began)
    connection.close()
    return sorted(times[1:])[requests // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--workers", type=int, default=2, help="the other server's workers")
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--configs", type=int, default=10)
    parser.add_argument("--flushes", type=int, default=10)
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args()
    for name in ("workers", "requests", "configs", "flushes", "batch"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}: expected at least 1, got {getattr(args, name)}")
    if args.workers == 1:
        parser.error("--workers: expected at least 2 (the baseline has one)")

    from sweeps import tracking
    from sweeps.testing import start_sweep

    labels = {1: "--workers 1", args.workers: f"--workers {args.workers}"}
    results: dict[int, list[tuple[float, float]]] = {n: [] for n in labels}
    started: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="server-workers-") as tmp:
        try:
            servers = {n: start_server(Path(tmp) / f"w{n}", n, started) for n in labels}
            print(f"{'server':<14}{'request ms':>12}{'configuration ms':>18}")
            for repeat, n in enumerate((*labels, *reversed(labels))):
                uri = servers[n]
                ref = start_sweep(tracking.tracker(uri), "server-workers", f"w{n}-{repeat}",
                                  profile="smoke")
                request = kept_alive(uri, args.requests)
                config = track(lambda uri=uri: Direct(uri), ref, args.configs, args.flushes,
                               args.batch, f"r{repeat}")["config"]
                results[n].append((request, config))
                print(f"{labels[n]:<14}{request * 1e3:>12.1f}{config * 1e3:>18.1f}",
                      flush=True)
        finally:
            for server in started:  # the server and its uvicorn workers: its process group
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(server.pid, signal.SIGTERM)
                server.wait(30)
    best = {n: (min(r for r, _ in rows), min(c for _, c in rows)) for n, rows in results.items()}
    many, one = best[args.workers], best[1]
    print(f"--workers {args.workers} / --workers 1, best of each: a request "
          f"{many[0] / one[0]:.1f}x, a configuration {many[1] / one[1]:.2f}x")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
