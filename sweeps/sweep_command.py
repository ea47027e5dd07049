"""``ortho sweep run|submit|resume|status``: sweeps from the command line.

    ortho sweep run SPEC [--profile P] [--address A] [--tracking-uri U] [--home DIR]
                         [--storage PATH|URI] [--max-concurrent N]
    ortho sweep submit SPEC --address http://HEAD:8265 [--tracking-uri U] [--profile P]
                         [--storage PATH|URI] [--home DIR] [--data-dir DIR] [--python PATH]
                         [--no-wait]
    ortho sweep resume [SWEEP] [--force] [--address A] [--tracking-uri U] [--home DIR] ...
    ortho sweep status [SWEEP] [--tracking-uri U] [--home DIR]

The default profile is ``cpu`` (``--profile smoke`` runs in seconds). With no address the
sweep runs on an embedded Ray bound to 127.0.0.1 and tracks into ``./ortho-runs/mlflow.db``
(``--home`` or ``$ORTHO_HOME`` move ``./ortho-runs``; ``--tracking-uri`` or
``$ORTHO_TRACKING_URI`` name another store). ``run`` and ``resume`` exit with 0 when every
configuration ended, 1 when some failed (``resume`` retries them), 130 when interrupted
(Ctrl-C; ``resume`` continues). ``--storage`` takes a local path or an object store's URI
(``s3://bucket/ray``, ``gs://...``), which is passed to Tune unchanged.

``resume`` refuses (exit 2) a sweep whose driver is still alive (``status`` shows it
``running``; a driver that was killed leaves it ``interrupted``) unless given ``--force``.
A sweep id that does not exist is bad input (exit 2; the message lists the latest sweeps).

``submit`` runs the same ``run`` as a Ray job on a cluster, shipping this checkout as the
job's working directory, and exits with the job's status; it authenticates as Ray's job CLI
does (``RAY_AUTH_MODE=token`` with ``RAY_AUTH_TOKEN`` or ``~/.ray/auth_token`` for a cluster
with token authentication). Paths it passes on are the cluster's, never this machine's: the
job runs ``PYTHON -m sweeps.cli`` with ``--python`` (default ``python``, the first on the
job's PATH on the head; in the cluster image that is ``/home/ray/anaconda3/bin/python``,
where this package is installed), and the datasets are read from the nodes' own
``$ORTHO_DATA_DIR`` (the image sets ``/home/ray/data``) unless ``--data-dir`` names a folder
on the nodes; this machine's ``$ORTHO_DATA_DIR`` is not passed on. The tracking URI reaches
the job in its environment (``ORTHO_TRACKING_URI``), not on its command line, which Ray shows
in its job list; what is printed has its credentials masked. So do this checkout's commit
and whether it has uncommitted or untracked files (``ORTHO_GIT_SHA``, ``ORTHO_GIT_DIRTY``),
which every run of the sweep records. With no tracking URI the sweep tracks into SQLite
under ``--home`` on the head, written there only (trials on other nodes track through the
driver's node), which ``ortho sweep status --home`` on the head shows.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from ortho_core.errors import ConfigError, OrthoError


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


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ortho sweep`` and its four commands to the ``ortho`` parser."""
    parser = sub.add_parser("sweep", help="run, submit, resume or inspect a sweep",
                            description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="sweep_command", required=True, metavar="ACTION")

    def where(p: argparse.ArgumentParser, address: bool = True) -> None:
        if address:
            p.add_argument("--address", help="an existing Ray cluster (auto inside a Ray job); "
                           "default: an embedded Ray on 127.0.0.1")
        p.add_argument("--tracking-uri", help="MLflow tracking URI (default: "
                       "$ORTHO_TRACKING_URI, else sqlite:///HOME/mlflow.db)")
        p.add_argument("--home", help="where the embedded store and Tune state live "
                       "(default: $ORTHO_HOME, else ./ortho-runs)")

    def tune_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--storage", help="Tune's own state: a path (default HOME/ray) or an "
                       "object store URI such as s3://bucket/ray, passed unchanged; only the "
                       "driver writes it, so it need not be shared")
        p.add_argument("--max-concurrent", type=int, metavar="N",
                       help="at most N trials at once (default: as resources allow)")
        p.add_argument("--optuna-storage", metavar="URL",
                       help="the Optuna cells' studies (default: $ORTHO_OPTUNA_STORAGE, else "
                       "sqlite:///HOME/optuna.db beside an embedded store; required with "
                       "any other tracking URI)")

    run = commands.add_parser("run", help="run a sweep")
    run.add_argument("spec", help="a shipped spec's name or a path to a spec YAML")
    run.add_argument("--profile", default=DEFAULT_PROFILE,
                     help=f"smoke, cpu or paper (default {DEFAULT_PROFILE})")
    where(run)
    tune_options(run)
    run.set_defaults(func=cmd_run)

    submit = commands.add_parser("submit", help="run a sweep as a Ray job on a cluster")
    submit.add_argument("spec", help="a shipped spec's name or a spec YAML in this checkout")
    submit.add_argument("--address", required=True,
                        help="the cluster's job API, e.g. http://HEAD:8265")
    submit.add_argument("--profile", default=DEFAULT_PROFILE,
                        help=f"smoke, cpu or paper (default {DEFAULT_PROFILE})")
    submit.add_argument("--tracking-uri", help="MLflow tracking URI the cluster reaches "
                        "(default: $ORTHO_TRACKING_URI, else SQLite under HOME on the head)")
    submit.add_argument("--home", default="~/ortho-runs",
                        help="HOME on the cluster's head node (default ~/ortho-runs)")
    submit.add_argument("--storage", help="Tune's own state on the cluster: a path on the "
                        "head (default HOME/ray) or an object store URI such as s3://bucket/ray")
    submit.add_argument("--optuna-storage", metavar="URL",
                        help="the Optuna cells' studies, as the head reaches them (default: "
                        "$ORTHO_OPTUNA_STORAGE, else optuna.db beside an embedded store)")
    submit.add_argument("--data-dir", metavar="DIR",
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

    resume = commands.add_parser("resume", help="continue an interrupted sweep")
    resume.add_argument("sweep", nargs="?", help="sweep id (default: the latest unfinished)")
    resume.add_argument("--force", action="store_true",
                        help="resume even a sweep whose driver still runs (its runs in flight "
                        "are deleted and trained again)")
    where(resume)
    tune_options(resume)
    resume.set_defaults(func=cmd_resume)

    status = commands.add_parser("status", help="show a sweep's progress")
    status.add_argument("sweep", nargs="?", help="sweep id (default: the latest)")
    where(status, address=False)
    status.set_defaults(func=cmd_status)


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
        optuna_storage=args.optuna_storage))


def cmd_resume(args: argparse.Namespace) -> int:
    """``ortho sweep resume``."""
    from sweeps.runner import resume_sweep

    return _exit_status(resume_sweep(
        args.sweep, address=args.address, tracking_uri=args.tracking_uri, home=args.home,
        storage=args.storage, max_concurrent=args.max_concurrent, force=args.force,
        optuna_storage=args.optuna_storage))


def cmd_status(args: argparse.Namespace) -> int:
    """``ortho sweep status``."""
    from sweeps.lookup import sweep_status
    from sweeps.status import format_status

    print(format_status(sweep_status(args.sweep, tracking_uri=args.tracking_uri,
                                     home=args.home)))
    return 0


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
    from sweeps.ray_session import QUIET_ENV

    command = [args.python, "-m", "sweeps.cli", "sweep", "run",
               job_spec_argument(args.spec, root), "--profile", args.profile,
               "--address", "auto", "--home", args.home]
    env = {**QUIET_ENV, **provenance.current(root).env()}
    uri = args.tracking_uri or os.environ.get("ORTHO_TRACKING_URI")
    if uri:
        env["ORTHO_TRACKING_URI"] = tracking.tracking_uri(uri, Path.cwd())
    if args.storage:
        command += ["--storage", args.storage]
    studies = args.optuna_storage or os.environ.get("ORTHO_OPTUNA_STORAGE")
    if studies:
        env["ORTHO_OPTUNA_STORAGE"] = studies  # like the tracking URI: may hold a password
    if args.data_dir:
        if not args.data_dir.startswith(("/", "~")):
            raise ConfigError("data_dir", "an absolute path on the cluster's nodes (or one "
                              "under ~)", args.data_dir)
        env["ORTHO_DATA_DIR"] = args.data_dir
    return {"entrypoint": shlex.join(command),
            "runtime_env": {"working_dir": str(root), "excludes": SUBMIT_EXCLUDES,
                            "env_vars": env}}


async def _follow(client: Any, job_id: str) -> None:
    async for lines in client.tail_job_logs(job_id):
        print(lines, end="", flush=True)


def cmd_submit(args: argparse.Namespace) -> int:
    """``ortho sweep submit``: check the spec here, submit, follow the logs."""
    import asyncio

    from ray.job_submission import JobStatus, JobSubmissionClient

    from sweeps.plan import build_plan
    from sweeps.ray_session import quiet_environment
    from sweeps.runner import PROJECT_ROOT
    from sweeps.spec import load_spec, resolve
    from sweeps.tracking import redact

    build_plan(resolve(load_spec(args.spec), args.profile))
    quiet_environment()
    request = job_request(args, PROJECT_ROOT)
    try:
        client = JobSubmissionClient(args.address)
        job_id = client.submit_job(**request, metadata={"ortho.spec": args.spec,
                                                         "ortho.profile": args.profile})
    except Exception as err:  # connection, authentication, upload: Ray's own wording
        raise SubmitError(redact(f"cannot submit to {args.address}: {err}")) from err
    print(redact(f"submitted job {job_id} to {args.address}: {request['entrypoint']}"),
          flush=True)
    follow = redact(f"ray job logs --address {args.address} --follow {job_id}")
    if args.no_wait:
        print(f"follow it with: {follow}")
        return 0
    try:
        asyncio.run(_follow(client, job_id))
    except KeyboardInterrupt:
        print(f"\nthe job keeps running; follow it with: {follow}", file=sys.stderr)
        return 130
    status = client.get_job_status(job_id)
    print(f"job {job_id}: {status.value}")
    return 0 if status == JobStatus.SUCCEEDED else 1
