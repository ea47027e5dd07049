"""Who drives a sweep, where its trials run, and whether its driver is still alive.

The parent run of a sweep names its driver (:data:`~sweeps.contract.DRIVER` = ``host:pid``)
and carries a heartbeat (:data:`~sweeps.contract.HEARTBEAT`, seconds since the epoch,
refreshed every :data:`HEARTBEAT_SECONDS` while Tune runs). A RUNNING sweep is alive when its
driver's process exists on this host, or, driven from another host, when its heartbeat is
younger than :data:`ALIVE_SECONDS` (:func:`driver_alive`); one that is not was killed
without ending its run (SIGKILL, a lost node) and may be resumed. A child run records where
it ran (:func:`node_tags`).
"""

from __future__ import annotations

import os
import socket
import sys
import time

import psutil

from sweeps.contract import HOSTNAME, NODE, NODE_IP

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
