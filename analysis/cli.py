"""``ortho report`` and ``ortho ui``: the sub-commands ``analysis`` adds to the ``ortho``
entry point (through the ``ortho.commands`` entry-point group, so ``sweeps`` never imports
``analysis``).

    ortho report SPEC [--sweep ID] [--format md|latex|csv] [--out DIR]
                      [--tracking-uri U] [--home DIR] [--refresh]
    ortho ui [--port P] [--host 127.0.0.1] [--tracking-uri U] [--home DIR]

``report`` prints the spec's tables (markdown by default) for the latest sweep or ``--sweep``;
with ``--out`` it also writes them in ``--format`` with the figures as PNG, and ends by
listing the files it wrote. ``ui`` runs the MLflow UI on the store in the foreground, bound
to 127.0.0.1 unless told otherwise, with one worker and MLflow's job execution off
(STACK.md: ready in about 4 s, about 490 MiB).

``sweeps`` builds the ``ortho`` parser from :func:`register_report` and :func:`register_ui`,
so this module imports only the standard library and the light registry at load time; the
store, pandas, matplotlib and MLflow are imported by the command that runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from analysis.reports import REPORTS
from analysis.tables import FORMATS


def register_report(sub: argparse._SubParsersAction) -> None:
    """Add ``ortho report`` to the ``ortho`` parser."""
    p = sub.add_parser("report", help="tables and figures of a spec's sweep, from MLflow",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("spec", help="spec name: " + ", ".join(sorted(REPORTS)))
    p.add_argument("--sweep", help="sweep id (default: the spec's latest sweep)")
    p.add_argument("--format", choices=FORMATS, default="md", help="table format (default md)")
    p.add_argument("--out", type=Path, help="write tables and PNG figures under this folder")
    _store_arguments(p)
    p.add_argument("--refresh", action="store_true",
                   help="read every run from MLflow again instead of the parquet cache")
    p.set_defaults(func=run_report)


def register_ui(sub: argparse._SubParsersAction) -> None:
    """Add ``ortho ui`` to the ``ortho`` parser."""
    p = sub.add_parser("ui", help="the MLflow UI on the default store, on 127.0.0.1",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=5000, help="port (default 5000)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only)")
    _store_arguments(p)
    p.set_defaults(func=run_ui)


def _store_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tracking-uri", dest="tracking_uri",
                   help="MLflow tracking URI (default: $ORTHO_TRACKING_URI, else "
                   "sqlite:///HOME/mlflow.db)")
    p.add_argument("--home", help="where the embedded store lives (default: $ORTHO_HOME, "
                   "else ./ortho-runs)")


def run_report(args: argparse.Namespace) -> int:
    """Print (and with ``--out`` write) the report; returns the exit status."""
    from analysis.report import build_report

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    report = build_report(args.spec, args.sweep, args.tracking_uri, args.home,
                          figures=args.out is not None, use_cache=not args.refresh)
    print(report.render(args.format))
    if args.out is not None:
        written = report.write(args.out, args.format)
        for figure in report.figures:
            for note in figure.notes:
                print(f"{figure.name}: {note}")
        print(f"wrote {len(written)} files under {args.out.resolve()}:")
        for path in written:
            print(f"  {path.name}")
    return 0


def ui_command(tracking_uri: str, host: str, port: int) -> tuple[list[str], dict[str, str]]:
    """The ``mlflow ui`` command line and environment for ``ortho ui``."""
    argv = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", tracking_uri,
            "--host", host, "--port", str(port), "--workers", "1"]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
           "MLFLOW_DISABLE_TELEMETRY": "true"}
    return argv, env


def run_ui(args: argparse.Namespace) -> int:
    """Run the MLflow UI until it exits or this command is interrupted (the server is then
    stopped, not left behind); returns the server's exit status."""
    from analysis.store import open_store, resolve_tracking_uri

    uri = resolve_tracking_uri(args.tracking_uri, args.home)
    open_store(uri)
    argv, env = ui_command(uri, args.host, args.port)
    print(f"MLflow UI on http://{args.host}:{args.port} for {uri} (Ctrl-C stops it)",
          file=sys.stderr)
    server = subprocess.Popen(argv, env=env)
    previous = signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        return server.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
        if server.poll() is None:
            server.terminate()
            server.wait(timeout=30)


def _exit_on_signal(signum: int, frame: object) -> None:
    """Turn SIGTERM into ``SystemExit`` so that ``run_ui`` stops its server first."""
    raise SystemExit(128 + signum)

