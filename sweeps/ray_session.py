"""Ray for a sweep: a quiet environment, an embedded Ray bound to 127.0.0.1 only, or a
connection to a running cluster (DESIGN.md "The embedded default, and the cluster"); and
the runtime environment Tune gives its trials (:func:`trial_environment`: no credentials of
this process's environment, and nothing else that would cost each trial a fresh process);
and SIGTERM taken as a Ctrl-C while a sweep has Ray (:func:`terminate_as_interrupt`).

Nothing here imports Ray when this module is imported: ``ortho sweep submit`` reads
:data:`QUIET_ENV` for the job it sends, and commands that never start Ray stay fast.
"""

from __future__ import annotations

import logging
import math
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from ortho_core.errors import ConfigError
from sweeps.contract import redact
from sweeps.tracking.liveness import check_reachable

T = TypeVar("T")

QUIET_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AIR_NEW_OUTPUT": "0",
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
}
"""No usage-stats notice, no Tune tables, no per-trial CSV/JSON/TensorBoard files (MLflow
has everything), no MLflow telemetry or download bars. Set unless the user set them."""

AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"
"""Where Ray warns, at every start of a local Ray, that it enabled token authentication."""

QUIET_LOGGERS = {
    "ray.tune.search.searcher": logging.ERROR,
    "ray.tune.analysis.experiment_analysis": logging.ERROR,
    "ray.tune.execution.tune_controller": logging.CRITICAL,
    "ray.tune.tune": logging.CRITICAL,
    "ray._private.runtime_env": logging.ERROR,
    "ray.dashboard.modules.dashboard_sdk": logging.WARNING,
    "ray.dashboard.modules.job.sdk": logging.WARNING,
    "mlflow.store.db.utils": logging.WARNING,
    "alembic": logging.WARNING,
}
"""Loggers whose messages would drown the progress lines or mislead: Tune's warnings that
the searcher keeps no checkpoint and that trials wrote no result files (results and resume
go through MLflow), its full traceback of every failed trial (the progress callback prints
one line; the traceback is the run's ``traceback.txt``) and its advice to resume with
``Tuner.restore`` (``ortho sweep resume`` is printed instead); Ray's notes while it packs
and uploads a job's working directory; MLflow's notes while it creates a database."""


def quiet_environment() -> None:
    """Set :data:`QUIET_ENV` (before Ray starts, so that its processes inherit it) and the
    levels of :data:`QUIET_LOGGERS`; make ``$ORTHO_DATA_DIR`` absolute, so that every trial
    reads the same folder."""
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    for name, level in QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(level)
    data = os.environ.get("ORTHO_DATA_DIR")
    if data:
        os.environ["ORTHO_DATA_DIR"] = str(Path(data).expanduser().resolve())


@contextmanager
def _loopback_only() -> Iterator[None]:
    """Make Ray's address detection answer 127.0.0.1 while a local node starts.

    ``ray.init(_node_ip_address="127.0.0.1")`` alone is not enough: Ray swaps a loopback
    address for the machine's outbound one, and its servers then listen on every interface.
    Ray skips that lookup where clusters are disabled (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``,
    read when ``ray`` is imported, hence the module constant too); every Ray process then
    binds to 127.0.0.1 (checked in the tests).
    """
    from ray._private import ray_constants

    name = ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR
    saved_env, saved_const = os.environ.get(name), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[name] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved_const
        if saved_env is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved_env


@contextmanager
def _free_agent_port() -> Iterator[None]:
    """Let the node's dashboard agent listen on a port the system picks while a local node
    starts.

    ``ray.init`` offers no setting for it, and the agent's default port (52365) is fixed:
    where another Ray on this machine holds it (a second sweep, a test), the agent retries
    for about 3.5 s, during which the node does not come up, then runs without its HTTP
    service. Port 0 is Ray's own value for "any free port" (as ``ray start
    --dashboard-agent-listen-port=0``).
    """
    from ray._private.parameter import RayParams

    original = RayParams.__init__

    def free_port(self: RayParams, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("dashboard_agent_listen_port", 0)
        original(self, *args, **kwargs)

    RayParams.__init__ = free_port  # type: ignore[method-assign]
    try:
        yield
    finally:
        RayParams.__init__ = original  # type: ignore[method-assign]


USAGE_STATS_ENV = "RAY_USAGE_STATS_ENABLED"
"""Ray's switch for its usage statistics, off in :data:`QUIET_ENV` unless the user set it."""


@contextmanager
def _no_usage_stats_head() -> Iterator[None]:
    """Keep a local node from starting its dashboard head process while usage statistics
    are off.

    ``ray.init(include_dashboard=False)`` still starts ``dashboard.py`` with its usage-stats
    module alone (``ray._private.services.start_api_server``), a Python process that imports
    the dashboard's web stack, and waits for it to register before the node's raylet starts:
    about 1.2 s of a quiet 2-core machine's 2.9 s ``ray.init``, on the start's critical path,
    for a module with nothing to do when usage statistics are off. Where the user turned
    them on (``RAY_USAGE_STATS_ENABLED=1``), the head starts as Ray starts it.
    """
    from ray._private.node import Node

    if os.environ.get(USAGE_STATS_ENV) != "0":
        yield
        return
    original = Node.start_api_server
    Node.start_api_server = lambda self, **_: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        Node.start_api_server = original  # type: ignore[method-assign]


@contextmanager
def _own_process_groups() -> Iterator[None]:
    """Start a local node's processes (GCS, raylet, the monitor and the agents) each in a
    process group of its own.

    Ray starts them in the driver's process group, with SIGINT blocked in them so that a
    Ctrl-C at the terminal reaches the driver alone; a SIGTERM sent to the whole group (by
    ``timeout``, a batch scheduler's job step, ``kill -- -PGID``) reached them as well, so the
    node died under the driver, which could not end its runs (they stayed RUNNING) and
    waited 60 s for its GCS before it exited with status 1. In groups of their own only the
    driver receives it, and stops the sweep as after a Ctrl-C
    (:func:`terminate_as_interrupt`). Where the kernel ties them to the driver (Linux's
    parent-death signal, which Ray sets then), they still die with it; elsewhere they are
    left in its group, as Ray does on Windows for the same reason.
    """
    from ray._private import services, utils

    if not utils.detect_fate_sharing_support() or not hasattr(services, "ConsolePopen"):
        yield
        return
    original = services.ConsolePopen

    class OwnGroupPopen(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: object, **kwargs: object) -> None:
            kwargs.setdefault("process_group", 0)
            super().__init__(*args, **kwargs)

    services.ConsolePopen = OwnGroupPopen  # type: ignore[misc]
    try:
        yield
    finally:
        services.ConsolePopen = original  # type: ignore[misc]


RAYLET_REGISTER_S = 120.0
"""How long a starting local node's raylet may take to register with its GCS. Ray allows 30 s
(fixed in ``ray._private.node.Node``) and then fails ``ray.init`` with "The current node timed
out during startup"; on a 2-core machine under load its raylet, which starts the node's agents
(Python processes that import Ray) first, has taken longer (the test suite, 2026-12-07: a
sweep beside the other worker's tests failed so)."""


def wait_for_node(get_node: Callable[..., T], wait_s: float,
                  clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], object] = time.sleep) -> Callable[..., T]:
    """``get_node`` (Ray's ``services.get_node``, which raises ``RuntimeError`` while the
    node is not registered) made to wait for the node up to ``wait_s``, asking every 0.1 s,
    before it raises as Ray's would."""
    def waiting(*args: object, **kwargs: object) -> T:
        deadline = clock() + wait_s
        while True:
            try:
                return get_node(*args, **kwargs)
            except RuntimeError:
                if clock() >= deadline:
                    raise
                sleep(0.1)

    return waiting


@contextmanager
def _patient_start() -> Iterator[None]:
    """Give a starting local node's raylet :data:`RAYLET_REGISTER_S` to register instead of
    Ray's 30 s (Ray's own loop asks the GCS again at once, without a pause, which under load
    takes CPU from the very processes it waits for)."""
    from ray._private import services

    original = services.get_node
    services.get_node = wait_for_node(original, RAYLET_REGISTER_S)
    try:
        yield
    finally:
        services.get_node = original


def start_embedded_ray(num_cpus: int | None = None) -> None:
    """Start Ray in this process, on 127.0.0.1 only, without dashboard or driver logs.

    Its dashboard agent listens on a free port (:func:`_free_agent_port`), so that another
    Ray on this machine does not delay its start, no dashboard head runs while usage
    statistics are off (:func:`_no_usage_stats_head`), and its raylet may take
    :data:`RAYLET_REGISTER_S` to register (:func:`_patient_start`). Ray turns token
    authentication on for the local Ray it starts (unless ``RAY_AUTH_MODE`` says otherwise)
    and warns that it did; that warning (:data:`AUTH_LOGGER`) is silenced while it starts,
    authentication itself is left as Ray sets it, and connections to a cluster
    (:func:`ray_session` with an address) keep every warning.
    """
    import ray

    quiet_environment()
    auth_logger = logging.getLogger(AUTH_LOGGER)
    level = auth_logger.level
    auth_logger.setLevel(logging.ERROR)
    try:
        with (_loopback_only(), _free_agent_port(), _no_usage_stats_head(),
              _own_process_groups(), _patient_start()):
            ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False,
                     log_to_driver=False, logging_level=logging.WARNING, num_cpus=num_cpus)
    finally:
        auth_logger.setLevel(level)


CREDENTIAL_NAME = re.compile(r"SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|^AWS_", re.IGNORECASE)
"""Names of environment variables that hold credentials (cloud keys, tokens, passwords)."""


def data_dir_variables(data_dir: str | None, address: str | None) -> dict[str, str]:
    """What ``--data-dir`` asks of a sweep's trials, as variables of their runtime
    environment (:func:`trial_environment`). Not given: none, each trial reads its node's
    ``$ORTHO_DATA_DIR``. On the embedded Ray (``address`` None): none either; the folder, made
    absolute (``ConfigError`` naming ``data_dir`` where it is none), becomes this process's
    ``$ORTHO_DATA_DIR``, which the Ray it starts gives its
    workers and the sweep's data check reads. With an address: ``ORTHO_DATA_DIR`` for every
    trial, a folder on the cluster's nodes, absolute or under ``~`` (``ConfigError`` naming
    ``data_dir`` otherwise, and through Ray Client, where Tune runs on the cluster with the
    runtime environment it has there)."""
    if not data_dir:
        return {}
    if address is None:
        folder = Path(data_dir).expanduser().resolve()
        if not folder.is_dir():
            raise ConfigError("data_dir", "an existing folder holding the datasets", data_dir)
        os.environ["ORTHO_DATA_DIR"] = str(folder)
        return {}
    if not data_dir.startswith(("/", "~")):
        raise ConfigError("data_dir", "an absolute path on the cluster's nodes (or one under ~)",
                          data_dir)
    if address.startswith("ray://"):
        raise ConfigError("data_dir", "no --data-dir through Ray Client (ray://): the nodes' "
                          "own $ORTHO_DATA_DIR, or `ortho sweep submit --data-dir`", data_dir)
    return {"ORTHO_DATA_DIR": data_dir}


@contextmanager
def trial_environment(variables: Mapping[str, str]) -> Iterator[None]:
    """Tune's runtime environment for its trials while it runs (``Tuner.fit``; Tune is
    imported here): no credentials of this process's environment, and no variable Tune adds
    on its own, so that it is empty unless the user set one of the variables Tune carries;
    then ``variables`` (:func:`data_dir_variables`), those the job's own runtime environment
    does not already hold at the same value (a submitted sweep's).

    Credentials: Tune passes ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and the AWS
    session tokens to every trainable through ``runtime_env`` (its ``ENV_VARS_TO_PROPAGATE``),
    and Ray's runtime-env agent writes every runtime environment it creates, values included,
    into its log (``runtime_env_agent.log``) and keeps it in the cluster's state. A trial
    needs none of them: it tracks through the sweep's writer and writes no Tune storage; the
    embedded Ray's processes inherit this environment anyway, and a cluster's nodes take
    credentials from their own. Names matching :data:`CREDENTIAL_NAME` are left out.

    Tune's own variable: ``PL_DISABLE_FORK=1`` (its ``DEFAULT_ENV_VARS``, for PyTorch
    Lightning, which no trainer here uses). Any variable makes the trial's runtime
    environment differ from the job's, so Ray starts each trial's actor in a new process
    through its runtime-env set-up, which imports Ray twice (2.2-2.6 s on a lent 16-core GPU
    machine: RESULTS.md, ``trial start on a GPU``), instead of one of the workers it has
    started ahead. A job submitted with a runtime environment of its own
    (``ortho sweep submit``) gives it to the trials as before. Through Ray Client, Tune runs
    ``fit`` in an actor of its own on the cluster, where none of this applies: its trials
    keep Tune's variables.
    """
    import ray
    from ray.tune.execution import class_cache

    saved = class_cache.ENV_VARS_TO_PROPAGATE, class_cache.DEFAULT_ENV_VARS
    class_cache.ENV_VARS_TO_PROPAGATE = {
        name for name in saved[0] if not CREDENTIAL_NAME.search(name)}
    job = (ray.get_runtime_context().runtime_env.get("env_vars") or {}) if variables else {}
    class_cache.DEFAULT_ENV_VARS = {k: v for k, v in variables.items() if job.get(k) != v}
    try:
        yield
    finally:
        class_cache.ENV_VARS_TO_PROPAGATE, class_cache.DEFAULT_ENV_VARS = saved


def beside_ray_start(fn: Callable[[], T]) -> Future[T]:
    """Call ``fn`` (opening the tracking store) in a thread of its own, so that it runs
    while this thread starts Ray (:func:`ray_session`), which mostly waits for Ray's
    processes; its result, or its error, from the future.

    Two threads importing one module at once can fail (importlib's deadlock error, when each
    holds a lock the other wants), so the modules that Ray imports only when it starts and
    that MLflow imports too (pydantic, OpenTelemetry, click: those of the dashboard's
    dependency check) are imported here first; Ray's start then imports only its own.
    """
    import click  # noqa: F401
    from ray._private.utils import get_dashboard_dependency_error

    get_dashboard_dependency_error()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ortho-store")
    try:
        return pool.submit(fn)
    finally:
        pool.shutdown(wait=False)


@contextmanager
def ray_session(address: str | None) -> Iterator[bool]:
    """Ray for a sweep: the running instance if this process already has one, else an
    embedded one (``address`` None) or a connection to ``address``; shut down afterwards
    only if started here. Yields whether Ray is embedded here. A Ctrl-C while Ray shuts down
    after the sweep has ended cuts the shutdown short (its processes die with this one) and
    changes nothing of the sweep's result: the command still exits with its status."""
    import ray

    if ray.is_initialized():
        yield address is None
        return
    if address is None:
        start_embedded_ray()
    else:
        quiet_environment()
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    with terminate_as_interrupt():  # after ray.init, whose own handler it replaces
        ended = False
        try:
            yield address is None
            ended = True
        finally:
            try:
                ray.shutdown()
            except KeyboardInterrupt:
                if not ended:
                    raise  # the sweep's own interrupt, which shutting down Ray met again


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (``kill``, ``docker stop``, the end of a Kubernetes pod) stops the sweep as a
    Ctrl-C does: its runs in flight end KILLED and it can be resumed at once. ``ray.init``
    installs a SIGTERM handler that exits on the spot (``sys.exit``), which left the sweep's
    runs RUNNING and its driver taken for alive until its heartbeat went stale. Here SIGTERM
    is handed to the SIGINT handler of the moment (Tune's, while Tune runs), this process's
    main thread only (where Python handles signals); Ray's handler is back once Ray has shut
    down. Once Tune's fit has ended, a first signal goes to Tune's handler, which stays
    installed and no longer stops anything: the driver finishes ending the sweep's runs (a
    second signal raises ``KeyboardInterrupt``, as a second Ctrl-C does)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def as_interrupt(signum: int, frame: object) -> None:
        handler = signal.getsignal(signal.SIGINT)
        if not callable(handler):  # SIG_IGN or SIG_DFL: stop with what a Ctrl-C raises
            raise KeyboardInterrupt
        handler(signal.SIGINT, frame)

    previous = signal.signal(signal.SIGTERM, as_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


ADDRESS_FORMS = ("HOST:PORT of its GCS (port 6379 by default), ray://HOST:PORT of its Ray "
                 "Client server (10001), or auto for the one started on this machine")
"""The forms of ``--address`` a sweep takes, as the errors of :func:`check_address` say."""


def check_address(address: str | None) -> None:
    """``ConfigError`` naming ``address`` when it is none of :data:`ADDRESS_FORMS` (Ray
    raised ``ValueError`` with a traceback), when ``auto`` finds no cluster on this machine
    (Ray's ``ConnectionError``), when nothing answers at the cluster's ``HOST:PORT`` (the one
    ``auto`` finds included: ``ray start`` leaves its record when the cluster dies), or when
    what answers is not a gRPC
    server (:func:`speaks_grpc`: the GCS, and the Ray Client server of ``ray://``, are; the
    dashboard at 8265, a web server or a database are not; not asked where Ray uses TLS,
    :func:`uses_tls`): ``ray.init`` would retry for minutes either way, printing only its own
    warnings. The embedded Ray (None) and Ray's ``local`` are left alone."""
    if address is None or address == "local":
        return
    found = _check_auto(address) if address == "auto" else address
    where = ("" if found == address else f"; auto found {found} " + (
        "in $RAY_ADDRESS" if os.environ.get("RAY_ADDRESS") else "where `ray start` left it"))
    if "://" in found and not found.startswith("ray://"):
        raise ConfigError("address", "a Ray cluster's address: " + ADDRESS_FORMS + " (a URL "
                          "such as http://HOST:8265 is its dashboard's, for `ortho sweep "
                          f"submit`{where})", address)
    what = "a running Ray cluster's address" + (f" ({where[2:]})" if where else "")
    host, sep, port = found.removeprefix("ray://").rpartition(":")
    if not (sep and host and port.isdigit()):
        raise ConfigError("address", f"a Ray cluster's address: {ADDRESS_FORMS}"
                          + (f" ({where[2:]})" if where else ""), address)
    check_reachable("address", what, host, int(port), address)
    if not uses_tls() and not speaks_grpc(host, int(port)):
        raise ConfigError("address", "a Ray cluster's GCS, HOST:PORT (port 6379 by "
                          "default), or ray://HOST:PORT for its Ray Client server (10001); "
                          f"what answers at {host}:{port} is not Ray (8265 is the "
                          "dashboard's port, for `ortho sweep submit`)", address)


def cluster_address(address: str | None) -> str | None:
    """The address ``address`` stands for, for the checks that depend on the kind of
    connection (Ray Client's ``ray://``): what ``auto`` finds (``$RAY_ADDRESS`` may be a
    ``ray://`` one; ``ConfigError`` when it finds none), else ``address`` itself."""
    return _check_auto(address) if address == "auto" else address


def _check_auto(address: str) -> str:
    """The GCS address ``auto`` means, as ``ray.init`` finds it: in ``$RAY_ADDRESS`` (set
    inside a Ray job) or among those ``ray start`` started here (whose record outlives a
    cluster that died); ``ConfigError`` when there is none."""
    from ray._private.services import get_ray_address_from_environment

    try:
        return get_ray_address_from_environment("auto", None)
    except ConnectionError:
        raise ConfigError("address", "a Ray cluster started on this machine, for auto (none "
                          "is running: `ray start --head` starts one; without --address a "
                          "sweep starts its own)", address) from None


def uses_tls() -> bool:
    """Whether Ray talks to its cluster over TLS (``RAY_USE_TLS``, as Ray reads it): then
    :func:`speaks_grpc`'s plain preface would be refused by a good address, and is not sent."""
    return os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true")


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
"""What an HTTP/2 client sends first (RFC 9113, section 3.4)."""
EMPTY_SETTINGS = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""An HTTP/2 SETTINGS frame with no settings: length 0, type 4, no flags, stream 0."""


GRPC_ANSWER_S = 3.0
"""How long :func:`speaks_grpc` waits for a server's first frame."""


def speaks_grpc(host: str, port: int) -> bool:
    """Whether the server at ``host:port`` answers an HTTP/2 connection preface with a
    SETTINGS frame, as every gRPC server (Ray's GCS, its Ray Client server) does at once;
    False for anything else (an HTTP/1 server answers with text, a silent one within
    :data:`GRPC_ANSWER_S` with nothing)."""
    import socket

    head = b""
    try:
        with socket.create_connection((host, port), timeout=GRPC_ANSWER_S) as sock:
            sock.sendall(HTTP2_PREFACE + EMPTY_SETTINGS)
            while len(head) < len(EMPTY_SETTINGS):
                chunk = sock.recv(len(EMPTY_SETTINGS) - len(head))
                if not chunk:
                    break
                head += chunk
    except OSError:
        return False
    return len(head) == len(EMPTY_SETTINGS) and head[3] == EMPTY_SETTINGS[3]


def check_job_server(address: str) -> None:
    """``ConfigError`` naming ``address`` when nothing answers at the job server
    ``http(s)://HOST[:PORT]`` that ``ortho sweep submit`` sends its job to (a cluster's
    dashboard), so that an address with nothing behind it is bad input, told apart from a job
    that failed. ``HOST:PORT`` without a scheme is refused too: Ray would read it as the
    cluster's GCS address and wait 40 s for a GCS at the dashboard's port. Another form with
    a scheme is left to Ray."""
    from urllib.parse import urlsplit

    if "://" not in address:
        raise ConfigError("address", "the job server's URL, http://HOST:PORT (the cluster's "
                          "dashboard, port 8265 by default)", redact(address))
    parts = urlsplit(address)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ConfigError("address", "a job server's URL http://HOST:PORT",
                          redact(address)) from None
    check_reachable("address", "a Ray cluster's job server (its dashboard, port 8265 by "
                    "default)", parts.hostname, port, redact(address))


def machine_resources() -> dict[str, float]:
    """The CPUs and GPUs of the Ray a sweep starts here (:func:`start_embedded_ray`), counted
    as Ray counts them (a container's CPU limit; ``$CUDA_VISIBLE_DEVICES``), without
    starting it."""
    from ray._private.accelerators import get_accelerator_manager_for_resource
    from ray._private.utils import get_num_cpus

    gpus = get_accelerator_manager_for_resource("GPU")
    visible = gpus.get_current_process_visible_accelerator_ids()
    n_gpus = len(visible) if visible is not None else gpus.get_current_node_num_accelerators()
    return {"CPU": float(get_num_cpus()), "GPU": float(n_gpus)}


def check_resources(cpu: float, gpu: float) -> None:
    """On the embedded Ray, a trial asking ``cpu`` CPUs and ``gpu`` GPUs must fit the machine
    (a cluster may add nodes): ``ConfigError`` naming ``resources.cpu`` or ``resources.gpu``."""
    import ray

    have = ray.cluster_resources()
    for field, want, name in (("resources.cpu", cpu, "CPU"), ("resources.gpu", gpu, "GPU")):
        if want > have.get(name, 0):
            raise ConfigError(field, f"at most the {have.get(name, 0):g} {name}s of this "
                              "machine's Ray", want)


def trial_slots(cpu: float, gpu: float, max_concurrent: int | None = None) -> int:
    """How many trials asking ``cpu`` CPUs and ``gpu`` GPUs the Ray cluster runs at once now,
    node by node, at most ``max_concurrent`` (at least 1: an autoscaling cluster may have no
    worker yet). What :func:`sweeps.plan.pack` fills."""
    import ray

    slots = sum(_fits(node["Resources"], cpu, gpu) for node in ray.nodes() if node["Alive"])
    return max(1, min(slots, max_concurrent or slots))


def _fits(have: Mapping[str, float], cpu: float, gpu: float) -> int:
    """How many trials asking ``cpu`` CPUs and ``gpu`` GPUs a node with resources ``have``
    runs at once."""
    return min((math.floor(have.get(name, 0.0) / want + 1e-9)
                for name, want in (("CPU", cpu), ("GPU", gpu)) if want > 0), default=0)


def unplaceable(cpu: float, gpu: float) -> str | None:
    """Why no trial asking ``cpu`` CPUs and ``gpu`` GPUs can start on the cluster as it is
    (no node that is alive has them; Tune waits in silence, as for an autoscaler's node), or
    None when one can."""
    import ray

    nodes = [node["Resources"] for node in ray.nodes() if node["Alive"]]
    if any(_fits(have, cpu, gpu) for have in nodes):
        return None
    asked = " and ".join(f"{want:g} {name}{'s' if want != 1 else ''}"
                         for name, want in (("CPU", cpu), ("GPU", gpu)) if want > 0)
    largest = max(nodes, key=lambda have: (have.get("GPU", 0.0), have.get("CPU", 0.0)),
                  default={})
    return (f"no node of the cluster has the {asked} a trial asks (the spec's resources; "
            f"its largest has {largest.get('CPU', 0.0):g} CPUs and {largest.get('GPU', 0.0):g}"
            " GPUs): the trials wait until such a node joins (Ctrl-C stops the sweep)")
