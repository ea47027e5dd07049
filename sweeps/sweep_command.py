"""``ortho sweep run|submit|resume|status|studies``: sweeps from the command line.

    ortho sweep run SPEC [--profile P] [--address A] [--tracking-uri U] [--home DIR]
                         [--storage PATH|URI] [--max-concurrent N]
    ortho sweep submit SPEC --address http://HEAD:8265 [--tracking-uri U] [--profile P]
                         [--storage PATH|URI] [--home DIR] [--data-dir DIR] [--python PATH]
                         [--no-wait]
    ortho sweep resume [SWEEP] [--force] [--address A] [--tracking-uri U] [--home DIR] ...
    ortho sweep status [SWEEP] [--tracking-uri U] [--home DIR]
    ortho sweep studies [SWEEP] [--optuna-storage URL] [--dashboard] ...  (sweeps.studies_command)

The default profile is ``cpu`` (``--profile smoke`` runs in seconds). With no address the
sweep runs on an embedded Ray bound to 127.0.0.1 and tracks into ``./ortho-runs/mlflow.db``
(``--home`` or ``$ORTHO_HOME`` move ``./ortho-runs``; ``--tracking-uri`` or
``$ORTHO_TRACKING_URI`` name another store). ``run`` and ``resume`` exit with 0 when every
configuration ended, 1 when some failed (``resume`` retries them), 130 when interrupted
(Ctrl-C, or SIGTERM, which stops a sweep as Ctrl-C does; ``resume`` continues).
``--storage`` takes a local path or an object store's URI (``s3://bucket/ray``,
``gs://...``), which is passed to Tune unchanged; a folder this user cannot make or write in,
or a URI pyarrow cannot open, is bad input (exit 2) before Ray starts
(:func:`sweeps.tune_run.check_storage`; ``submit`` checks a URI's form only, the cluster
being the one that opens it).

``resume`` refuses (exit 2) a sweep whose driver is still alive (``status`` shows it
``running``; a driver that was killed leaves it ``interrupted``) unless given ``--force``.
``SWEEP`` is a sweep id or a spec's name (or file), which names that spec's latest sweep (for
``resume``, its latest unfinished one first). One that names no sweep of the store is bad input
(exit 2; the message lists the latest sweeps).

``submit`` runs the same ``run`` as a Ray job on a cluster, shipping this checkout as the
job's working directory, and exits with the job's status; it authenticates as Ray's job CLI
does (``RAY_AUTH_MODE=token`` with ``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or
``~/.ray/auth_token`` for a cluster
with token authentication). Paths it passes on are the cluster's, never this machine's: the job
runs ``PYTHON -m sweeps.cli`` with ``--python`` (default ``python``, the first on the job's
PATH on the head; in the cluster image that is ``/home/ray/anaconda3/bin/python``, where this
package is installed), and the datasets are read from the nodes' own ``$ORTHO_DATA_DIR`` (the
image sets ``/home/ray/data``) unless ``--data-dir`` names a folder on the nodes; this
machine's ``$ORTHO_DATA_DIR`` is not passed on. The tracking URI reaches the job in its
environment (``ORTHO_TRACKING_URI``), not on its command line, which Ray shows in its job list;
one with a password or token is refused, since Ray's runtime-env agent writes a job's
environment into the cluster's logs (the head gets its credentials from the cluster's secrets,
cluster/README.md); what is printed has its credentials masked. So do this checkout's commit
and whether it has uncommitted or untracked files (``ORTHO_GIT_SHA``, ``ORTHO_GIT_DIRTY``),
which every run of the sweep records. ``ray job stop`` (or the dashboard's Stop) stops the
sweep as a Ctrl-C of ``run`` does (:data:`JOB_STOP_ENV`). With no tracking URI the sweep
tracks into SQLite under ``--home`` on the head, written there only (trials on other nodes
track through the driver's node), which ``ortho sweep status --home`` on the head shows.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from ortho_core.errors import ConfigError, OrthoError
from sweeps.contract import given


class SubmitError(OrthoError):
    """The cluster's job API could not be reached or refused the job."""


DEFAULT_PROFILE = "cpu"
"""The profile ``ortho sweep run`` and ``submit`` use unless told: the reduced protocol that
finishes in under 30 minutes on a laptop (``smoke`` takes seconds; ``paper`` is for a GPU
cluster)."""

DEFAULT_CLUSTER_PYTHON = "python"
"""The interpreter a submitted job runs: the first ``python`` on the job's PATH on the head
(``/home/ray/anaconda3/bin/python`` in the cluster image, cluster/README.md)."""

SUBMIT_EXCLUDES = ["/ortho-runs/", "/.git/", "/data/", "*.egg-info/", "__pycache__/",
                   ".pytest_cache/", ".ruff_cache/"]
"""Paths of the checkout not shipped with a job (gitignore syntax: a leading ``/`` anchors
a folder at the checkout's root, so that ``/data/`` leaves ``ortho_core/data/`` in)."""

JOB_STOP_ENV = {"RAY_JOB_STOP_SIGNAL": "SIGINT", "RAY_JOB_STOP_WAIT_TIME_S": "60"}
"""How a submitted sweep's job is stopped (``ray job stop``, the dashboard's Stop): Ray's job
supervisor, which reads its job's environment, gives the driver 60 s, not its default 3,
before SIGKILL, and sends SIGINT, a Ctrl-C, which the driver answers as it would from the
first line of its code on (SIGTERM too, but only once it has Ray:
:func:`sweeps.ray_session.terminate_as_interrupt`). The driver then stops as on a Ctrl-C:
its runs in flight KILLED, the sweep interrupted and resumable at once (3.6 s on a one-node
cluster, RESULTS.md)."""

AGENT_NOT_READY = "No available agent to submit job"
"""What Ray's job API answers (HTTP 500, "please try again later") when no node's job agent
has registered within its own 10 s: on a cluster that has just started, or a busy head."""
AGENT_WAIT_SECONDS = 60.0
"""How long ``ortho sweep submit`` keeps trying again after that answer."""
AGENT_RETRY_SECONDS = 5.0
"""Seconds between those tries."""


HELP = {
    "sweep": """\
Run a spec's sweep: every configuration the spec lists for a profile, trained on Ray and
tracked in MLflow (one run per configuration). Follow it live, check it later with status,
and continue it after an interruption with resume.""",
    "run": """\
Run a sweep of a spec here and show its progress: configurations done, running (and how far
through their planned steps) and failed, the best value of the spec's metric so far, time
elapsed and left (a bar on a terminal; elsewhere a line as trials end, and at least every
30 s).

Without --address it runs on a Ray started here, reachable from this machine only, and
tracks into ./ortho-runs/mlflow.db. Ctrl-C (or SIGTERM) stops it; "ortho sweep resume"
continues it.

Exit status: 0 when every configuration ended, 1 when some failed (resume retries them),
2 for bad input, 130 when interrupted.""",
    "submit": """\
Run a sweep as a job on a Ray cluster: the spec is checked here, this checkout is sent as
the job's working directory, and the job's output is followed here until it ends (or not,
with --no-wait; the job goes on either way).

Paths given to the job are the cluster's: --home, --storage, --data-dir and --python name
places on its nodes. The tracking URI reaches the job in its environment, not on its command
line; one holding a password or token is refused (Ray writes a job's environment into the
cluster's logs): the head takes its credentials from the cluster's secrets. A cluster
with token authentication is reached as "ray job" reaches it (RAY_AUTH_MODE=token with
RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token). A cluster that answers it has
no job agent ready yet (one just started) is asked again every 5 s for up to a minute.

Exit status: 0 when the job succeeded, 1 when it failed, 2 for bad input (a cluster that
refuses this machine's token included).""",
    "resume": """\
Continue an interrupted sweep with its own spec and profile: configurations that finished
are kept, those that failed or never ended are trained again. A sweep whose driver still
runs is refused unless --force is given.

Exit status as for "ortho sweep run".""",
    "status": """\
Show where a sweep stands, from MLflow alone (no Ray is started): configurations done,
running and failed, the best value of its metric, time elapsed and left, and how many
configurations ended each way. Without an id it shows the latest sweep, then lists the
store's other latest sweeps by id.""",
    "studies": """\
Show the Optuna studies of a sweep that searches with Optuna (one study per cell): each
cell's trials by state and its best point so far. With --dashboard, then serve
optuna-dashboard's web UI on them (history, parameter importances, slices) until Ctrl-C,
reachable from this machine only unless --host says otherwise.

The studies are read from the storage the sweep recorded; name another with
--optuna-storage when the recorded address has a password (it is kept masked) or this
machine reaches the database by another address.

Exit status: 0; 1 when the store holds no sweep with studies; 2 for a sweep without
Optuna studies, a storage that cannot be opened or an address that cannot be listened on;
130 when Ctrl-C stops the dashboard.""",
}
"""What ``--help`` of ``ortho sweep`` and of each of its actions says (user text)."""

EXAMPLES = {
    "sweep": "ortho sweep run synthetic-max-length --profile smoke\n  ortho sweep status",
    "run": "ortho sweep run synthetic-max-length --profile smoke",
    "submit": "ortho sweep submit synthetic-max-length --address http://HEAD:8265 "
              "--tracking-uri http://MLFLOW:5000",
    "resume": "ortho sweep resume            # the latest unfinished sweep, else the latest\n"
              "  ortho sweep resume 20261121-070102-ab12",
    "status": "ortho sweep status            # the latest sweep\n"
              "  ortho sweep status ff-mnist   # the latest sweep of a spec",
    "studies": "ortho sweep studies --dashboard    # then open http://127.0.0.1:8080",
}
"""The example ``--help`` of ``ortho sweep`` and of each of its actions ends with."""

SPEC_HELP = ("a shipped spec's name, e.g. synthetic-max-length (a wrong name lists them), or "
             "a spec YAML file")


def _help(name: str) -> dict[str, Any]:
    """The ``add_parser`` arguments that give ``name``'s ``--help`` its text and example."""
    return {"description": HELP[name], "epilog": "Example:\n  " + EXAMPLES[name],
            "formatter_class": argparse.RawDescriptionHelpFormatter}


def _positive_int(text: str) -> int:
    """An ``--max-concurrent`` value: an integer >= 1 (Tune refuses others only once Ray
    runs)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1 (got {text!r})")
    return value


def _port(text: str) -> int:
    """``--port`` of the dashboard: 0 (any free port) to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 (any free one) to 65535 "
                                         f"(got {text!r})")
    return port


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ortho sweep`` and its five commands to the ``ortho`` parser."""
    parser = sub.add_parser("sweep", help="run, submit, resume or inspect a sweep",
                            **_help("sweep"))
    commands = parser.add_subparsers(dest="sweep_command", required=True, metavar="ACTION")

    def where(p: argparse.ArgumentParser, address: bool = True) -> None:
        if address:
            p.add_argument("--address", help="a running Ray cluster to use, e.g. "
                           "HEAD:6379, or auto inside a Ray job (default: a Ray started here, on "
                           "127.0.0.1 only)")
        p.add_argument("--tracking-uri", type=given, metavar="URI", help="the MLflow tracking URI "
                       "(default: $ORTHO_TRACKING_URI, else sqlite:///HOME/mlflow.db)")
        p.add_argument("--home", type=given, metavar="DIR",
                       help="where the local store and Ray Tune's "
                       "state live (default: $ORTHO_HOME, else ./ortho-runs)")

    def tune_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--storage", type=given, metavar="PATH|URI", help="where Ray Tune keeps its "
                       "state: a folder or an object store URI such as s3://bucket/ray "
                       "(default HOME/ray; only this machine writes it)")
        p.add_argument("--max-concurrent", type=_positive_int, metavar="N",
                       help="at most N trials (packs of configurations) at once (default: "
                       "as many as the resources allow)")
        p.add_argument("--data-dir", type=given, metavar="DIR",
                       help="the datasets' folder the trials read (default: their node's "
                       "$ORTHO_DATA_DIR, else ~/.cache/ortho-sweeps/data); with --address, "
                       "a folder on the cluster's nodes, absolute or under ~")

    run = commands.add_parser("run", help="run a sweep here", **_help("run"))
    run.add_argument("spec", help=SPEC_HELP)
    run.add_argument("--profile", default=DEFAULT_PROFILE,
                     help=f"smoke, cpu or paper (default {DEFAULT_PROFILE})")
    where(run)
    tune_options(run)
    run.add_argument("--optuna-storage", type=given, metavar="URL",
                     help="the database of the spec's Optuna searches (default: "
                     "$ORTHO_OPTUNA_STORAGE, else optuna.db beside a SQLite tracking store, "
                     "HOME/optuna.db with the local one; required with any other tracking "
                     "URI; refused for a spec with no Optuna cells)")
    run.set_defaults(func=cmd_run)

    submit = commands.add_parser("submit", help="run a sweep as a Ray job on a cluster",
                                 **_help("submit"))
    submit.add_argument("spec", help=SPEC_HELP + " in this checkout")
    submit.add_argument("--address", required=True,
                        help="the cluster's job API, e.g. http://HEAD:8265")
    submit.add_argument("--profile", default=DEFAULT_PROFILE,
                        help=f"smoke, cpu or paper (default {DEFAULT_PROFILE})")
    submit.add_argument("--tracking-uri", type=given, metavar="URI",
                        help="the MLflow tracking URI, as "
                        "the cluster reaches it "
                        "(default: $ORTHO_TRACKING_URI, else SQLite under HOME on the head)")
    submit.add_argument("--home", type=given, default="~/ortho-runs", metavar="DIR",
                        help="where the local store and Ray Tune's state live on the "
                        "cluster's head node (default ~/ortho-runs)")
    submit.add_argument("--storage", type=given, metavar="PATH|URI",
                        help="where Ray Tune keeps its "
                        "state: a folder on the head or an object store URI such as "
                        "s3://bucket/ray (default HOME/ray)")
    submit.add_argument("--optuna-storage", type=given, metavar="URL",
                        help="the database of the spec's Optuna searches, as the head "
                        "reaches it (default: $ORTHO_OPTUNA_STORAGE, else optuna.db beside a "
                        "SQLite tracking store; refused for a spec with no Optuna cells)")
    submit.add_argument("--data-dir", type=given, metavar="DIR",
                        help="the datasets' folder on the cluster's nodes (absolute or under "
                        "~), passed to the job as ORTHO_DATA_DIR (default: the nodes' own "
                        "$ORTHO_DATA_DIR; this machine's is never passed on)")
    submit.add_argument("--python", default=DEFAULT_CLUSTER_PYTHON, metavar="PATH",
                        help="the interpreter the job runs on the head (default "
                        f"{DEFAULT_CLUSTER_PYTHON!r}: the first on the job's PATH, "
                        "/home/ray/anaconda3/bin/python in the cluster image)")
    submit.add_argument("--no-wait", action="store_true",
                        help="print the job id and return instead of following its logs")
    submit.set_defaults(func=cmd_submit)

    resume = commands.add_parser("resume", help="continue an interrupted sweep",
                                 **_help("resume"))
    resume.add_argument("sweep", nargs="?",
                        help="sweep id, or a spec's name for its latest unfinished sweep, "
                        "else its latest (default: the store's latest unfinished sweep, else "
                        "its latest)")
    resume.add_argument("--force", action="store_true",
                        help="resume even a sweep whose driver still runs (its runs in flight "
                        "are deleted and trained again)")
    where(resume)
    tune_options(resume)
    resume.add_argument("--optuna-storage", type=given, metavar="URL",
                        help="the database of the sweep's Optuna studies (default: "
                        "$ORTHO_OPTUNA_STORAGE, else the storage the sweep recorded)")
    resume.set_defaults(func=cmd_resume)

    status = commands.add_parser("status", help="show a sweep's progress",
                                 **_help("status"))
    status.add_argument("sweep", nargs="?", help="sweep id, or a spec's name for its latest "
                        "sweep (default: the latest)")
    where(status, address=False)
    status.set_defaults(func=cmd_status)

    studies = commands.add_parser("studies", help="a sweep's Optuna studies, and "
                                  "optuna-dashboard on them", **_help("studies"))
    studies.add_argument("sweep", nargs="?", help="sweep id, or a spec's name for its latest "
                         "sweep (default: the latest with Optuna studies)")
    where(studies, address=False)
    studies.add_argument("--optuna-storage", type=given, metavar="URL",
                         help="the database holding the studies (default: "
                         "$ORTHO_OPTUNA_STORAGE, else the storage the sweep recorded)")
    studies.add_argument("--dashboard", action="store_true",
                         help="then serve optuna-dashboard on the studies until Ctrl-C")
    studies.add_argument("--host", default="127.0.0.1",
                         help="address the dashboard listens on (default 127.0.0.1: this "
                         "machine only)")
    studies.add_argument("--port", type=_port, default=8080,
                         help="the dashboard's port (default 8080; 0: any free port)")
    studies.set_defaults(func=cmd_studies)


def _exit_status(progress: Any) -> int:
    if progress.state == "interrupted":
        return 130
    return 1 if progress.failed else 0


def cmd_run(args: argparse.Namespace) -> int:
    """``ortho sweep run``."""
    from sweeps.runner import run_sweep

    return _exit_status(run_sweep(
        args.spec, args.profile, address=args.address, tracking_uri=args.tracking_uri,
        home=args.home, storage=args.storage, max_concurrent=args.max_concurrent,
        optuna_storage=args.optuna_storage, data_dir=args.data_dir))


def cmd_resume(args: argparse.Namespace) -> int:
    """``ortho sweep resume``."""
    from sweeps.runner import resume_sweep

    return _exit_status(resume_sweep(
        args.sweep, address=args.address, tracking_uri=args.tracking_uri, home=args.home,
        storage=args.storage, max_concurrent=args.max_concurrent, force=args.force,
        optuna_storage=args.optuna_storage, data_dir=args.data_dir))


def cmd_status(args: argparse.Namespace) -> int:
    """``ortho sweep status``."""
    from sweeps.lookup import sweep_status
    from sweeps.status import format_status

    print(format_status(sweep_status(args.sweep, tracking_uri=args.tracking_uri,
                                     home=args.home)))
    return 0


def cmd_studies(args: argparse.Namespace) -> int:
    """``ortho sweep studies`` (:mod:`sweeps.studies_command`)."""
    from sweeps.studies_command import cmd_studies as studies

    return studies(args)


def job_spec_argument(spec_ref: str, root: Path) -> str:
    """How the job names the spec: a shipped name as is, a file by its path in the shipped
    checkout ``root`` (a file elsewhere would not reach the cluster)."""
    if not (spec_ref.endswith((".yaml", ".yml")) or "/" in spec_ref):
        return spec_ref
    path = Path(spec_ref).resolve()
    if not path.is_relative_to(root):
        raise ConfigError("spec", f"a spec inside {root} (the checkout shipped to the "
                          "cluster) or a shipped spec's name", spec_ref)
    return str(path.relative_to(root))


def job_request(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """The entrypoint and runtime environment of the job that runs ``args``' sweep; every
    path in it is the cluster's, and the tracking URI is in its environment only (the module
    docstring), as is the commit of ``root`` and whether it is dirty (the shipped copy has no
    ``.git``: :mod:`sweeps.provenance`)."""
    from sweeps import provenance, tracking
    from sweeps.ray_session import QUIET_ENV, data_dir_variables

    command = [args.python, "-m", "sweeps.cli", "sweep", "run",
               job_spec_argument(args.spec, root), "--profile", args.profile,
               "--address", "auto", "--home", args.home]
    env = {**QUIET_ENV, **JOB_STOP_ENV, **provenance.current(root).env()}
    uri = args.tracking_uri or os.environ.get("ORTHO_TRACKING_URI")
    if uri:
        env["ORTHO_TRACKING_URI"] = _without_credentials("tracking_uri",
                                                         tracking.tracking_uri(uri, Path.cwd()))
    if args.storage:
        command += ["--storage", args.storage]
    studies = args.optuna_storage or os.environ.get("ORTHO_OPTUNA_STORAGE")
    if studies:
        env["ORTHO_OPTUNA_STORAGE"] = _without_credentials("optuna_storage", studies)
    if args.data_dir:  # in the job's environment, which its trials share, and for its hints
        env |= data_dir_variables(args.data_dir, args.address)
        command += ["--data-dir", args.data_dir]
    return {"entrypoint": shlex.join(command),
            "runtime_env": {"working_dir": str(root), "excludes": SUBMIT_EXCLUDES,
                            "env_vars": env}}


def _without_credentials(field: str, uri: str) -> str:
    """``uri``, for a job's environment, unless it holds a password or token: Ray's
    runtime-env agent writes a job's environment into the cluster's logs, so a secret must
    reach the head from the cluster's own secrets (cluster/README.md: the ``ortho-tracking``
    ConfigMap and the database Secret), not from the submitting machine (``ConfigError``
    naming ``field``, the URI masked)."""
    from sweeps.contract import redact

    if redact(uri) != uri:
        raise ConfigError(field, "a URI without a password or token (a job's environment is "
                          "written to the cluster's logs): give the head its credentials from "
                          "the cluster's secrets (cluster/README.md) and submit without it",
                          redact(uri))
    return uri


async def _follow(client: Any, job_id: str) -> None:
    async for lines in client.tail_job_logs(job_id):
        print(lines, end="", flush=True)


def _submit(client: Any, request: dict[str, Any], metadata: dict[str, str]) -> str:
    """Submit the job; while the cluster answers that no job agent is ready, try again every
    :data:`AGENT_RETRY_SECONDS` for up to :data:`AGENT_WAIT_SECONDS`, saying so."""
    import time

    deadline = time.monotonic() + AGENT_WAIT_SECONDS
    while True:
        try:
            return client.submit_job(**request, metadata=metadata)
        except Exception as err:
            if AGENT_NOT_READY not in str(err) or time.monotonic() >= deadline:
                raise
            print(f"the cluster has no job agent ready yet; trying again in "
                  f"{AGENT_RETRY_SECONDS:g} s", file=sys.stderr, flush=True)
            time.sleep(AGENT_RETRY_SECONDS)


def cmd_submit(args: argparse.Namespace) -> int:
    """``ortho sweep submit``: check the spec here, submit, follow the logs."""
    import asyncio

    from ray.exceptions import AuthenticationError
    from ray.job_submission import JobStatus, JobSubmissionClient

    from sweeps.contract import first_line
    from sweeps.ray_session import check_job_server, quiet_environment
    from sweeps.runner import PROJECT_ROOT, check_study_storage
    from sweeps.spec import load_spec, resolve
    from sweeps.tracking import redact
    from sweeps.tune_run import check_storage

    # the spec's errors, before anything ships
    check_study_storage(resolve(load_spec(args.spec), args.profile), args.optuna_storage)
    if args.storage:  # the cluster's: only an unknown scheme or a malformed URI is known here
        check_storage(args.storage, Path(args.home), here=False)
    quiet_environment()
    request = job_request(args, PROJECT_ROOT)
    check_job_server(args.address)
    try:
        client = JobSubmissionClient(args.address)
        job_id = _submit(client, request, {"ortho.spec": args.spec,
                                           "ortho.profile": args.profile})
    except AuthenticationError as err:  # Ray's 401 or 403, then a paragraph on tokens
        raise ConfigError("address", f"a cluster that accepts this machine's Ray token "
                          f"(RAY_AUTH_MODE=token with RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or "
                          f"~/.ray/auth_token; it said: {first_line(str(err))})",
                          redact(args.address)) from err
    except Exception as err:  # connection, upload: Ray's own wording
        raise SubmitError(redact(f"cannot submit to {args.address}: {err}")) from err
    print(redact(f"submitted job {job_id} to {args.address}: {request['entrypoint']}"),
          flush=True)
    follow = redact(f"ray job logs --address {args.address} --follow {job_id}")
    stop = redact(f"stop it (as a Ctrl-C stops a sweep) with: ray job stop --address "
                  f"{args.address} {job_id}")
    if args.no_wait:
        print(f"follow it with: {follow}\n{stop}")
        return 0
    try:
        asyncio.run(_follow(client, job_id))
    except KeyboardInterrupt:
        print(f"\nthe job keeps running; follow it with: {follow}\n{stop}", file=sys.stderr)
        return 130
    status = client.get_job_status(job_id)
    print(f"job {job_id}: {status.value}")
    return 0 if status == JobStatus.SUCCEEDED else 1
