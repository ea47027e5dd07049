"""Who drives a sweep, where its trials run, and whether its driver is still alive.

The parent run of a sweep names its driver (:data:`~sweeps.contract.DRIVER` = ``host:pid``)
and carries a heartbeat (:data:`~sweeps.contract.HEARTBEAT`, seconds since the epoch,
refreshed every :data:`HEARTBEAT_SECONDS` while Tune runs). A RUNNING sweep is alive when its
driver's process exists on this host, or, driven from another host, when its heartbeat is
younger than :data:`ALIVE_SECONDS` (:func:`driver_alive`); one that is not was killed
without ending its run (SIGKILL, a lost node) and may be resumed. A child run records where
it ran (:func:`node_tags`).

Whether a tracking server answers at all is asked once, before a command starts any work
(:func:`check_server`): a few seconds, not the minutes of MLflow's own retries, and a
one-line ``ConfigError`` (exit status 2) naming ``tracking_uri`` when it does not. Only that
question is asked so briefly; the sweep's writer rides out longer outages
(:mod:`sweeps.tracking.outbox`).
"""

from __future__ import annotations

import os
import socket
import sys
import time

import psutil

from ortho_core.errors import ConfigError
from sweeps.contract import (
    DATABASE_PORTS,
    HOSTNAME,
    NODE,
    NODE_IP,
    database_url,
    first_line,
    redact,
    server_address,
    unreachable,
    uri_kind,
)

HEARTBEAT_SECONDS = 30.0
"""How often a running driver refreshes its heartbeat."""
ALIVE_SECONDS = 120.0
"""A driver on another host whose heartbeat is younger than this counts as alive (four
heartbeats, for a busy driver and clocks a little apart)."""


def node_tags() -> dict[str, str]:
    """Where this process runs: Ray node id (when inside Ray), IP and hostname."""
    tags = {HOSTNAME: socket.gethostname()}
    ray = sys.modules.get("ray")  # a process inside Ray has imported it; never import it here
    if ray is not None and ray.is_initialized():
        tags[NODE] = ray.get_runtime_context().get_node_id()
        tags[NODE_IP] = ray.util.get_node_ip_address()
    tags.setdefault(NODE, tags[HOSTNAME])
    return tags


def driver_tag() -> str:
    """``host:pid`` of this process (the :data:`~sweeps.contract.DRIVER` tag)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def pid_running(pid: int) -> bool:
    """Whether process ``pid`` exists on this host and is not a zombie (a killed process
    that its parent has not reaped yet)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # it exists; its state is not ours to read


def driver_alive(driver: str, heartbeat: float | None, now: float | None = None) -> bool:
    """Whether the driver ``host:pid`` still runs: its process exists, when ``host`` is this
    host; its ``heartbeat`` is younger than :data:`ALIVE_SECONDS`, when it is another."""
    host, _, pid = driver.rpartition(":")
    if not host or not pid.isdigit():
        return False
    if host == socket.gethostname():
        return pid_running(int(pid))
    now = time.time() if now is None else now
    return heartbeat is not None and now - heartbeat < ALIVE_SECONDS


CHECK_ENDPOINT = "/api/2.0/mlflow/experiments/search"
"""What :func:`check_server` asks a server (one experiment): every tracking server answers
it, with the credentials MLflow finds in the environment."""
CHECK_TIMEOUT_S = 4.0
"""Seconds one try of :func:`check_server` waits for a connection or an answer."""
CHECK_RETRIES = 2
"""Tries of :func:`check_server` after the first (0.5 s, then 1 s apart): at most about
15 s in all, against a server that never answers."""


def _why(err: BaseException) -> str:
    """What a failed check says, in a few words."""
    from sweeps.tracking.retry import causes, http_status

    kinds = {type(c).__name__ for c in causes(err)}
    status = http_status(err)
    if "ConnectionRefusedError" in kinds or "NewConnectionError" in kinds:
        return "connection refused"
    if kinds & {"ConnectTimeout", "ReadTimeout", "Timeout", "TimeoutError"}:
        return f"no answer within {CHECK_TIMEOUT_S:.0f} s"
    if status is not None:
        return f"it answered HTTP {status}"
    if "MaxRetryError" in kinds and "too many" in str(err):
        return "it kept answering with server errors"
    text = " ".join(str(err).split())
    return text[:200] + ("..." if len(text) > 200 else "")


def check_reachable(field: str, what: str, host: str, port: int, shown: str) -> None:
    """``ConfigError`` naming ``field`` (value ``shown``) unless a TCP connection to
    ``host:port`` opens (:func:`sweeps.contract.unreachable`). ``what`` says what should be
    there, e.g. "a database server"."""
    why = unreachable(host, port)
    if why is not None:
        raise ConfigError(field, f"{what} that answers ({why})", shown)


def check_server(uri: str) -> None:
    """Ask the tracking server ``uri`` (``http(s)://``) for one experiment, with
    :data:`CHECK_RETRIES` quick retries; ``ConfigError`` naming ``tracking_uri`` (the URI's
    credentials masked) when it cannot be reached, refuses the request or answers an error.
    A database server's URI (``postgresql://``, ``mysql://``, ...) is checked by a connection
    to its host and port (:func:`check_reachable`), then a login (:func:`check_login`);
    SQLite is left alone."""
    if uri_kind(uri) in DATABASE_PORTS:
        address = server_address(uri)
        if address is not None:  # None: a local socket, named in the query
            check_reachable("tracking_uri", "a database server", *address, redact(uri))
        check_login(uri)
        return
    if not uri.startswith(("http://", "https://")):
        return
    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request, verify_rest_response

    start = time.monotonic()
    try:
        response = http_request(get_default_host_creds(uri), CHECK_ENDPOINT, "GET",
                                params={"max_results": 1}, max_retries=CHECK_RETRIES,
                                backoff_factor=0.5, backoff_jitter=0.0,
                                timeout=CHECK_TIMEOUT_S)
        verify_rest_response(response, CHECK_ENDPOINT)
    except Exception as err:
        raise ConfigError("tracking_uri", f"an MLflow tracking server that answers ({_why(err)}"
                          f", {1 + CHECK_RETRIES} tries in {time.monotonic() - start:.0f} s)",
                          redact(uri)) from None


def check_login(uri: str) -> None:
    """``ConfigError`` naming ``tracking_uri`` (credentials masked) when the database server
    of ``uri`` refuses the connection, with the server's reason (a wrong password, a user or
    database that does not exist), or when its driver is not installed: MLflow would retry
    it for about two minutes and end in a traceback. One connection, waiting at most
    :data:`CHECK_TIMEOUT_S` for a server (with the drivers that take ``connect_timeout``,
    unless the URI sets its own)."""
    import sqlalchemy

    url = sqlalchemy.engine.make_url(database_url(uri))
    try:
        driver = url.get_dialect().driver
    except (ImportError, sqlalchemy.exc.NoSuchModuleError) as err:  # mysql+nosuchdriver://
        raise ConfigError("tracking_uri", f"a database SQLAlchemy can open ({err})",
                          redact(uri)) from None
    timeout = {"connect_timeout": int(CHECK_TIMEOUT_S)} if (
        driver in TIMEOUT_DRIVERS and "connect_timeout" not in url.query) else {}
    try:
        engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool,
                                          connect_args=timeout)
    except ImportError as err:  # the dialect's driver (pymysql, pyodbc, ...)
        raise ConfigError("tracking_uri", f"a database whose driver is installed here ({err})",
                          redact(uri)) from None
    try:
        engine.connect().close()
    except sqlalchemy.exc.DBAPIError as err:
        said = first_line(str(err.orig or err)) or type(err).__name__
        raise ConfigError("tracking_uri", f"a database server that accepts this connection "
                          f"(it said: {redact(said)})", redact(uri)) from None
    finally:
        engine.dispose()


TIMEOUT_DRIVERS = ("psycopg2", "psycopg", "pymysql", "mysqldb")
"""Database drivers whose ``connect`` takes ``connect_timeout`` (seconds)."""
