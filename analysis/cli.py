"""``ortho report``, ``ortho ui`` and ``ortho reproduce``: the sub-commands ``analysis`` adds
to the ``ortho`` entry point (through the ``ortho.commands`` entry-point group, so ``sweeps``
never imports ``analysis``).

    ortho report SPEC [--sweep ID] [--format md|latex|csv|html] [--out DIR]
                      [--tracking-uri U] [--home DIR] [--ui URL] [--refresh]
    ortho ui [--port P] [--host 127.0.0.1] [--tracking-uri U] [--home DIR]
    ortho reproduce PAPER|all [--profile smoke|cpu|paper] [--address A] [--out DIR]
                    [--tracking-uri U] [--home DIR] [--skip-missing-data] [--ui URL]

``report`` prints the spec's tables (markdown by default) for the latest sweep or ``--sweep``;
with ``--out`` it also writes them in ``--format`` with the figures as PNG, and ends by
listing the files it wrote; ``--format html`` writes one page with the figures, under
``--out`` or the current folder.
``reproduce`` runs every sweep of a paper and writes its HTML page
(:mod:`analysis.reproduce`). ``ui`` runs the MLflow UI on the store in the foreground, bound
to 127.0.0.1 unless told otherwise, with one worker and MLflow's job execution off
(STACK.md: ready in about 4 s, about 490 MiB). The store's URI reaches the server through its
environment (``MLFLOW_BACKEND_STORE_URI``), never its command line, which every user of the
machine can read, and is printed with its credentials masked. The server runs in a process
group of its own, so that Ctrl-C reaches this command only, which then stops the server with
one SIGTERM (a terminal's SIGINT reaching uvicorn too, followed by that SIGTERM, printed its
asyncio traceback); it logs warnings only (this command prints the address), without
starlette's deprecation of the WSGI middleware MLflow imports (:data:`UI_WARNINGS`).

``sweeps`` builds the ``ortho`` parser from :func:`register_report`, :func:`register_ui` and
:func:`register_reproduce`, so this module imports only the standard library, the light
registry, :mod:`analysis.mlflow_ui`'s addresses and ``ortho_core.errors`` at load time;
the store, pandas, matplotlib and MLflow are imported by the command that runs.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import urlsplit

from analysis.mlflow_ui import DEFAULT_UI
from analysis.reports import REPORTS
from analysis.tables import FORMATS
from ortho_core.errors import ConfigError
from sweeps.contract import (
    could_name_a_spec,
    database_url,
    given,
    is_file,
    redact,
    spec_named,
    unwritable,
)

HELP = {
    "report": """\
Print the tables of a spec's latest sweep (or of --sweep ID), read from MLflow: the
reproduced numbers beside the published ones. With --out it also writes the tables in
--format and the figures as PNG files; --format html writes one self-contained page with
the tables, the figures and a verdict per published claim.""",
    "ui": """\
Open the MLflow UI on the sweeps' store, to browse every sweep and run, until Ctrl-C. It
listens on 127.0.0.1 (this machine only) unless --host says otherwise; open the address it
prints in a browser.""",
    "reproduce": """\
Reproduce a paper: run every sweep of its experiments with the profile, then write one HTML
page with the published tables beside the reproduced ones, the figures, a verdict per
published claim and how the numbers were made (profile, sweeps, machine, time).

Sweeps of the same profile that already finished are reused and interrupted ones resumed,
so a second run trains nothing and only rebuilds the page; Ctrl-C stops, and the same
command continues. A missing dataset stops everything before any work, naming the command
that fetches it, unless --skip-missing-data leaves those experiments out. "all" writes every
paper's page and an index.

Exit status: 0; 1 when a sweep failed (the page shows what finished); 2 for bad input or
missing data; 130 when interrupted.""",
}
"""What ``--help`` of ``ortho report``, ``ortho ui`` and ``ortho reproduce`` says."""

EXAMPLES = {
    "report": "ortho report synthetic-max-length\n"
              "  ortho report synthetic-max-length --format html --out reports",
    "ui": "ortho ui --port 5000        # then open http://127.0.0.1:5000",
    "reproduce": "ortho reproduce manchev --profile smoke    # writes reports/manchev.html",
}
"""The example each of these commands' ``--help`` ends with."""


class _HelpArguments(TypedDict):
    """What :func:`_help` passes to ``add_parser``, typed so that it type-checks as its
    keyword arguments."""

    description: str
    epilog: str
    formatter_class: type[argparse.HelpFormatter]


def _help(name: str) -> _HelpArguments:
    """The ``add_parser`` arguments that give ``name``'s ``--help`` its text and example."""
    return {"description": HELP[name], "epilog": "Example:\n  " + EXAMPLES[name],
            "formatter_class": argparse.RawDescriptionHelpFormatter}


def out_folder(text: str) -> Path:
    """``--out``: a folder this user can write in, or a path where one can be made. Checked
    when the command line is read, since ``reproduce`` writes its pages only after every
    sweep has run, by making what it lacks and removing it again
    (:func:`sweeps.contract.unwritable`), so that a command that stops before its work
    leaves nothing."""
    why = unwritable(text)
    if why is not None:
        raise argparse.ArgumentTypeError(f"expected a folder, or a path where one can be made "
                                         f"(got {text!r}: {why})")
    return Path(text).expanduser()


def port_number(text: str) -> int:
    """``--port``: a TCP port, 1 to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to 65535 (got {text!r})")
    return port


def ui_address(text: str) -> str:
    """``--ui``: the MLflow UI's address, ``http(s)://HOST[:PORT][/PATH]``, with no user info
    (the page that links to it is meant to be shared)."""
    parts = urlsplit(text)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # not a number, or out of 0-65535
        port_ok = False
    if (parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc
            or not port_ok or parts.query or parts.fragment):
        raise argparse.ArgumentTypeError(f"expected the MLflow UI's address, "
                                         f"http://HOST:PORT (got {text!r})")
    return text.rstrip("/")


def _ui_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ui", type=ui_address, metavar="URL",
                   help="where the page's links open runs: the MLflow UI's address (default: "
                   "the tracking server for an http(s) store, else " + DEFAULT_UI + ", where "
                   "`ortho ui` serves; give http://127.0.0.1:P after `ortho ui --port P`)")


def spec_name(text: str) -> str:
    """The name a spec's sweeps are tracked under: a spec file's stem (``my-runs.yaml`` ->
    ``my-runs``, as ``ortho sweep run`` names the experiment), else the name as given, which
    must be one a spec file can have (no blanks, separators or control characters). A file
    must exist, as ``ortho sweep run`` requires: a missing one is a mistyped path, not the
    name of a spec the store may lack."""
    name = spec_named(text)
    a_file = name != text
    if not could_name_a_spec(name):
        raise argparse.ArgumentTypeError(f"expected a spec's name or its .yaml file "
                                         f"(got {text!r})")
    if a_file and not is_file(Path(text)):
        raise argparse.ArgumentTypeError(f"expected an existing YAML file (got {text!r})")
    return name


def register_report(sub: argparse._SubParsersAction) -> None:
    """Add ``ortho report`` to the ``ortho`` parser."""
    p = sub.add_parser("report", help="tables and figures of a spec's sweep, from MLflow",
                       **_help("report"))
    p.add_argument("spec", type=spec_name,
                   help="a spec's name or file; these have the papers' tables: "
                   + ", ".join(sorted(REPORTS)) + " (any other: its configurations ranked by "
                   "its metric)")
    p.add_argument("--sweep", help="sweep id (default: the spec's latest sweep)")
    p.add_argument("--format", choices=(*FORMATS, "html"), default="md",
                   help="table format (default md); html: one self-contained page with the "
                   "figures, written under --out (default: this folder)")
    p.add_argument("--out", type=out_folder,
                   help="write tables and PNG figures under this folder (default: print the "
                   "tables only); --format html writes its one page there, the figures inside "
                   "it (default: the current folder)")
    _store_arguments(p)
    _ui_argument(p)
    p.add_argument("--refresh", action="store_true",
                   help="read every run from MLflow again instead of the parquet cache "
                   "(beside a SQLite store; for a server's, under HOME/cache when a home is "
                   "named, else ~/.cache/ortho-sweeps/analysis)")
    p.set_defaults(func=run_report)


def register_ui(sub: argparse._SubParsersAction) -> None:
    """Add ``ortho ui`` to the ``ortho`` parser."""
    p = sub.add_parser("ui", help="the MLflow UI on a store (default ./ortho-runs), on 127.0.0.1",
                       **_help("ui"))
    p.add_argument("--port", type=port_number, default=5000, help="port (default 5000)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only)")
    _store_arguments(p)
    p.set_defaults(func=run_ui)


def register_reproduce(sub: argparse._SubParsersAction) -> None:
    """Add ``ortho reproduce`` to the ``ortho`` parser."""
    from analysis.papers import ALL, DEFAULT_OUT, PAPERS, PROFILES
    p = sub.add_parser("reproduce", help="run every sweep of a paper and write its HTML report",
                       **_help("reproduce"))
    p.add_argument("paper", choices=(*PAPERS, ALL), help="the paper: " + ", ".join(PAPERS)
                   + ", or all (one page each and an index)")
    p.add_argument("--profile", choices=PROFILES, default="cpu",
                   help="smoke (seconds), cpu (at most 30 minutes a spec on 2 cores; the "
                   "default) or paper (the published protocol, for a GPU cluster)")
    p.add_argument("--address", help="an existing Ray cluster (default: an embedded Ray on "
                   "127.0.0.1)")
    _store_arguments(p)
    p.add_argument("--out", type=out_folder, default=DEFAULT_OUT,
                   help="where the pages go: OUT/PAPER.html (default ./reports)")
    p.add_argument("--skip-missing-data", action="store_true",
                   help="leave out the specs whose dataset is not here and run the rest "
                   "(default: stop before running anything, naming what to fetch)")
    _ui_argument(p)
    p.set_defaults(func=run_reproduce)


def run_reproduce(args: argparse.Namespace) -> int:
    """Reproduce a paper (:mod:`analysis.reproduce`); returns the exit status."""
    from analysis.reproduce import Where, reproduce

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    where = Where(args.address, args.tracking_uri, args.home)
    return reproduce(args.paper, args.profile, where, args.out, args.skip_missing_data,
                     args.ui)


def _store_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tracking-uri", type=given, dest="tracking_uri", metavar="URI",
                   help="the MLflow tracking URI (default: $ORTHO_TRACKING_URI, else "
                   "sqlite:///HOME/mlflow.db)")
    p.add_argument("--home", type=given, metavar="DIR",
                   help="where the local store lives (default: "
                   "$ORTHO_HOME, else ./ortho-runs)")


def run_report(args: argparse.Namespace) -> int:
    """Print (and with ``--out`` write) the report; returns the exit status."""
    from analysis.papers import PAPERS
    from analysis.report import build_report

    paper = PAPERS.get(args.spec)
    if paper is not None:
        raise ConfigError("spec", f"one spec of a paper ({args.spec}'s: "
                          f"{', '.join(paper.specs)}); `ortho reproduce {args.spec}` writes "
                          "the paper's page", args.spec)
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    html = args.format == "html"
    report = build_report(args.spec, args.sweep, args.tracking_uri, args.home,
                          figures=html or args.out is not None, use_cache=not args.refresh)
    if html:
        from analysis.html import write_html

        print(report.render("md"))
        print(f"wrote {write_html(report, args.out or Path.cwd(), args.ui).resolve()}")
        return 0
    print(report.render(args.format))
    if args.out is not None:
        written = report.write(args.out, args.format)
        for figure in report.figures:
            if figure.empty:
                print(f"{figure.name}: nothing to plot, not written"
                      + "".join(f"; {note}" for note in figure.shown_notes))
                continue
            for note in figure.shown_notes:
                print(f"{figure.name}: {note}")
        files = "1 file" if len(written) == 1 else f"{len(written)} files"
        print(f"wrote {files} under {args.out.resolve()}:")
        for path in written:
            print(f"  {path.name}")
    return 0


UI_WARNINGS = "ignore:starlette.middleware.wsgi is deprecated:UserWarning"
"""The ``PYTHONWARNINGS`` filter that silences, in the MLflow server only, starlette's
``StarletteDeprecationWarning`` about its WSGI middleware, which MLflow imports (nothing a
user of ``ortho ui`` can act on); every other warning shows as before."""


def ui_command(tracking_uri: str, host: str, port: int) -> tuple[list[str], dict[str, str]]:
    """The ``mlflow ui`` command line and environment for ``ortho ui``: the store's URI,
    which may hold a password, in the environment only (``mlflow ui`` reads
    ``--backend-store-uri`` from ``MLFLOW_BACKEND_STORE_URI``); uvicorn logging warnings
    only, and :data:`UI_WARNINGS` after any filters the user set."""
    argv = [sys.executable, "-m", "mlflow", "ui", "--host", host, "--port", str(port),
            "--workers", "1", "--uvicorn-opts", "--log-level warning"]
    warnings = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), UI_WARNINGS]))
    env = {**os.environ, "MLFLOW_BACKEND_STORE_URI": database_url(tracking_uri),
           "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true",
           "PYTHONWARNINGS": warnings}
    return argv, env


def run_ui(args: argparse.Namespace) -> int:
    """Run the MLflow UI until this command is interrupted (the server, in a process group
    of its own, is then stopped, not left behind). A server that stops by itself has failed:
    its exit status, or 1 where it gave 0."""
    from analysis.store import open_store, resolve_tracking_uri

    uri = resolve_tracking_uri(args.tracking_uri, args.home)
    client = open_store(uri)
    check_listen(args.host, args.port)
    argv, env = ui_command(uri, args.host, args.port)
    base = f"http://{args.host}:{args.port}"
    print(f"MLflow UI on {base} for {redact(uri)} (Ctrl-C stops it)", file=sys.stderr)
    for line in spec_links(client, base):
        print(line, file=sys.stderr)
    previous = {sig: signal.signal(sig, _exit_on_signal) for sig in (signal.SIGTERM,
                                                                     signal.SIGHUP)}
    server = None
    try:
        server = subprocess.Popen(argv, env=env, process_group=0)
        code = server.wait()
        print(f"ortho ui: the MLflow UI stopped by itself (exit status {code}); its output "
              "above says why", file=sys.stderr)
        return code or 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if server is not None and server.poll() is None:
            server.terminate()
            server.wait(timeout=30)


def spec_links(client: Any, base: str) -> list[str]:
    """A line per experiment (a spec's sweeps) that holds runs: its name and the address of
    its runs in MLflow's model-training view (:func:`analysis.mlflow_ui.experiment_url`),
    which the UI does not open by itself."""
    from analysis.mlflow_ui import experiment_url

    return [f"  {e.name}: {experiment_url(e.experiment_id, base)}"
            for e in sorted(client.search_experiments(), key=lambda e: e.name)
            if client.search_runs([e.experiment_id], max_results=1)]


def check_listen(host: str, port: int) -> None:
    """``ConfigError`` naming ``host`` or ``port`` where the UI could not listen (MLflow's
    server prints a traceback there and exits 0): the address must resolve to one of this
    machine's (else ``host``, as ``ortho sweep studies`` names it) and the port be free
    there now and open to this user (else ``port``)."""
    from ortho_core.errors import ConfigError

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port,
                                                             type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as err:
        raise ConfigError("host", "an address or name of this machine", host) from err
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind(address)
        except OSError as err:  # in use, or privileged: the port; any other: the host
            why = (err.strerror or str(err)).lower()
            if err.errno in (errno.EADDRINUSE, errno.EACCES):
                raise ConfigError("port", f"a port free on {host} ({why})", port) from err
            raise ConfigError("host", f"an address or name of this machine ({why})",
                              host) from err


def _exit_on_signal(signum: int, frame: object) -> None:
    """Turn SIGTERM or SIGHUP (the terminal closed: it no longer reaches the server, in a
    process group of its own) into ``SystemExit`` so that ``run_ui`` stops its server
    first."""
    raise SystemExit(128 + signum)

