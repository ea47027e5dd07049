"""Throwaway servers for tests: PostgreSQL, an MLflow tracking server backed by it, and a
two-node Ray cluster, each on 127.0.0.1 only, in its own temporary directory, stopped and
removed afterwards.

    with start_postgres() as pg, start_mlflow(pg.create_database("mlflow")) as server:
        ...  # server.uri == "http://127.0.0.1:<port>"
    with start_ray_cluster() as cluster:
        ...  # cluster.dashboard_url (job API), cluster.client_env (RAY_AUTH_* for clients)

or, in a test module, the session fixtures :func:`postgres`, :func:`mlflow_server` and
:func:`ray_cluster` (import them into a ``conftest.py``). Tests are skipped, with the reason,
only where PostgreSQL's binaries are missing (``scripts/install.sh --test`` installs Debian's
package), and fail instead under CI.

Every process started here is tracked by process group (each server starts in a session of
its own) plus the descendants of those processes (a Ray job's driver starts a session of its
own), and only those are stopped: other Ray clusters on the machine are left alone, which a
``ray stop`` would not do. :func:`listeners` tells what a set of processes listens on, so
that tests can assert that nothing is reachable from outside the machine.

Ray on 127.0.0.1. ``ray start --node-ip-address 127.0.0.1`` alone is not enough: Ray swaps a
loopback address for the machine's outbound one (``services.resolve_ip_for_localhost``), and
its gRPC servers (GCS, raylet, object manager, dashboard agent) then bind every interface,
while those started on a node whose IP is 127.0.0.1 bind 127.0.0.1 only. Ray skips that swap
where multi-node clusters are disabled (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, Ray's switch
for macOS and Windows, read when ``ray`` is imported), which is how the head is started here;
its metrics servers move to free ports through ``AUTOSCALER_METRIC_PORT`` and
``DASHBOARD_METRIC_PORT`` (fixed 44217 and 44227 otherwise, shared by every cluster on the
machine). ``ray start --address`` for a second node refuses to run with that switch, and
without it swaps 127.0.0.1 in the head's address for the outbound IP, where the head does
not listen; the second node is therefore started the way ``ray start`` starts one, through
``ray._private.node.Node``, with its node IP given as 127.0.0.1 (as
``ray.cluster_utils.Cluster`` does). The cluster uses token authentication with a token of
its own (``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN_PATH``), which clients find in
:attr:`RayCluster.client_env`.

Separate disks. Nodes of a real cluster share no file system, and a test whose nodes share
one cannot see what breaks when they do not. So every node but the head runs in a mount
namespace of its own (``unshare --mount``) with an empty tmpfs over ``/tmp``, which hides
the head's temporary directory, Ray session and home (:attr:`RayCluster.home`, under
``/tmp``) and every pytest ``tmp_path``; its home is an empty folder in that tmpfs. The
network namespace stays shared: the nodes still talk over 127.0.0.1.
"""

from __future__ import annotations

import ipaddress
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

START_TIMEOUT = 180.0
"""Seconds a server may take to come up (generous: the test machine is shared)."""

STOP_GRACE = 10.0
"""Seconds between asking processes to stop (SIGTERM) and killing them (SIGKILL)."""


PORTS_FROM = 20000
"""Lowest port :func:`free_port` hands out."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, drawn below the kernel's
    ephemeral range: a port in that range can be handed to another process (its bind to port
    0, an outgoing connection) between this choice and the server's own bind, which once
    failed a Ray head's dashboard ("address already in use")."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    for _ in range(200):
        port = PORTS_FROM + secrets.randbelow(max(1, low - PORTS_FROM))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {PORTS_FROM}..{low - 1} after 200 tries")


def _wait_until(ready: Callable[[], bool], what: str, alive: Callable[[], bool] | None = None,
                log: Path | None = None, timeout: float = START_TIMEOUT) -> None:
    """Poll ``ready`` until it holds; fail early when ``alive`` says the server died."""
    deadline = time.monotonic() + timeout
    while not ready():
        if alive is not None and not alive():
            raise RuntimeError(f"{what} exited while starting{_log_tail(log)}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {timeout:.0f} s{_log_tail(log)}")
        time.sleep(0.3)


def _log_tail(log: Path | None, lines: int = 30) -> str:
    if log is None or not log.exists():
        return ""
    return "; last lines of its log:\n" + "\n".join(
        log.read_text(errors="replace").splitlines()[-lines:])


# Processes -----------------------------------------------------------------------------

def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (exists and is not a zombie)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@dataclass
class ProcessSet:
    """The processes of some process groups and all their descendants."""

    groups: set[int] = field(default_factory=set)

    def pids(self) -> set[int]:
        """Live members of the groups, and every process descending from one."""
        found: set[int] = set()
        for proc in psutil.process_iter():
            try:
                if os.getpgid(proc.pid) in self.groups:
                    found.add(proc.pid)
                    found.update(child.pid for child in proc.children(recursive=True))
            except (psutil.NoSuchProcess, ProcessLookupError):
                continue  # ended meanwhile
        return {pid for pid in found if _alive(pid)}

    def stop(self, grace: float = STOP_GRACE) -> None:
        """SIGTERM every process, then SIGKILL those still alive after ``grace`` seconds."""
        pids = self.pids()
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            for pid in pids:
                with suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while (pids := {p for p in pids | self.pids() if _alive(p)}) and \
                    time.monotonic() < deadline:
                time.sleep(0.2)
            if not pids:
                return
        raise RuntimeError(f"processes {sorted(pids)} survived SIGKILL")


def _spawn(cmd: list[str], log: Path, env: dict[str, str] | None = None,
           cwd: Path | None = None, **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in a new session (its own process group), output to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                start_new_session=True, **kwargs)


@dataclass(frozen=True)
class Listener:
    """A listening socket: TCP in state LISTEN, or a UDP socket bound with no peer."""

    protocol: str
    address: str
    port: int
    pid: int
    process: str

    @property
    def loopback(self) -> bool:
        """Whether only this machine can reach it."""
        try:
            ip = ipaddress.ip_address(self.address.split("%")[0])
        except ValueError:  # "*" or empty: every interface
            return False
        mapped = getattr(ip, "ipv4_mapped", None)
        return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


def listeners(pids: Collection[int]) -> list[Listener]:
    """The TCP and UDP sockets that processes ``pids`` listen on."""
    found = []
    for conn in psutil.net_connections(kind="inet"):
        tcp = conn.type == socket.SOCK_STREAM
        listening = conn.status == psutil.CONN_LISTEN if tcp else not conn.raddr
        if conn.pid in pids and listening and conn.laddr:
            try:
                name = psutil.Process(conn.pid).name()
            except psutil.NoSuchProcess:
                continue
            found.append(Listener("tcp" if tcp else "udp", conn.laddr.ip, conn.laddr.port,
                                  conn.pid, name))
    return found


# PostgreSQL ----------------------------------------------------------------------------

def postgres_bindir() -> Path | None:
    """The directory holding PostgreSQL's ``initdb`` and ``postgres``: the ones on PATH
    (Debian links them into /usr/local/bin on some images), else the newest of Debian's
    /usr/lib/postgresql/<version>/bin; None when PostgreSQL is not installed."""
    candidates = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                         key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
                         reverse=True)
    for directory in candidates:
        if (directory / "initdb").is_file() and (directory / "postgres").is_file():
            return directory
    return None


def _unprivileged_account() -> pwd.struct_passwd | None:
    """PostgreSQL refuses to run as root: as root, the ``postgres`` account Debian's package
    creates, else ``nobody``; None when not root (run as this user)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError("running as root with neither a 'postgres' nor a 'nobody' account")


@dataclass(frozen=True)
class Postgres:
    """A running PostgreSQL server (superuser :attr:`user`, password authentication)."""

    port: int
    user: str
    password: str
    directory: Path
    """Data (``data/``), log and Unix socket."""
    pid: int
    """The postmaster's."""

    def uri(self, database: str = "postgres") -> str:
        """The SQLAlchemy URI of ``database`` (what ``mlflow server`` takes), naming the
        psycopg2 driver: SQLAlchemy 2.1 reads a bare ``postgresql://`` as psycopg 3."""
        return f"postgresql+psycopg2://{self.user}:{self.password}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create database ``name``; its URI."""
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user=self.user,
                                password=self.password, dbname="postgres")
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()
        return self.uri(name)


def _postgres_accepts(port: int, user: str, password: str) -> bool:
    import psycopg2

    try:
        psycopg2.connect(host="127.0.0.1", port=port, user=user, password=password,
                         dbname="postgres", connect_timeout=2).close()
    except psycopg2.OperationalError:
        return False
    return True


@contextmanager
def start_postgres(bindir: Path | None = None) -> Iterator[Postgres]:
    """A fresh PostgreSQL cluster listening on 127.0.0.1:<free port>, its Unix socket in
    its own temporary directory, durability off (a test's data is thrown away)."""
    bindir = bindir or postgres_bindir()
    if bindir is None:
        raise FileNotFoundError("PostgreSQL's initdb/postgres not found")
    account = _unprivileged_account()
    as_user: dict[str, Any] = {}
    directory = Path(tempfile.mkdtemp(prefix="ortho-pg-"))
    if account is not None:
        os.chown(directory, account.pw_uid, account.pw_gid)
        as_user = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
    user, password, port = "ortho", secrets.token_hex(16), free_port()
    pwfile, log = directory / "pwfile", directory / "postgres.log"
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(directory), "LC_ALL": "C"}
    processes = ProcessSet()
    try:
        pwfile.write_text(password + "\n")
        if account is not None:
            os.chown(pwfile, account.pw_uid, account.pw_gid)
        init = subprocess.run([str(bindir / "initdb"), "-D", str(directory / "data"),
                               "-U", user, f"--pwfile={pwfile}", "--auth=scram-sha-256",
                               "--encoding=UTF8", "--no-locale", "--no-sync"],
                              capture_output=True, text=True, env=env, cwd=directory, **as_user)
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{init.stdout}{init.stderr}")
        pwfile.unlink()
        server = _spawn([str(bindir / "postgres"), "-D", str(directory / "data"),
                         "-p", str(port), "-c", "listen_addresses=127.0.0.1",
                         "-c", f"unix_socket_directories={directory}", "-c", "fsync=off",
                         "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
                        log, env=env, cwd=directory, **as_user)
        processes.groups.add(server.pid)
        _wait_until(lambda: _postgres_accepts(port, user, password), "PostgreSQL",
                    alive=lambda: server.poll() is None, log=log)
        yield Postgres(port=port, user=user, password=password, directory=directory,
                       pid=server.pid)
    finally:
        if processes.groups:
            server.send_signal(signal.SIGINT)  # "fast" shutdown: roll back, close, exit
            with suppress(subprocess.TimeoutExpired):
                server.wait(STOP_GRACE)
            processes.stop()
            server.wait()
        shutil.rmtree(directory, ignore_errors=True)


# MLflow --------------------------------------------------------------------------------

@dataclass(frozen=True)
class MLflowServer:
    """A running ``mlflow server``; artifacts are served through it (``--serve-artifacts``,
    the default), stored under :attr:`artifacts`."""

    port: int
    artifacts: Path
    pid: int

    @property
    def uri(self) -> str:
        """The tracking URI clients use."""
        return f"http://127.0.0.1:{self.port}"


def _http_ok(url: str, headers: dict[str, str] | None = None) -> bool:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}),
                                    timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def spawn_mlflow(port: int, directory: Path, backend_store_uri: str) -> subprocess.Popen[bytes]:
    """Spawn ``mlflow server`` on 127.0.0.1:``port`` with one worker and no job runner,
    tracking into ``backend_store_uri`` (passed in its environment, so that a password in it
    never shows on a command line), artifacts and log under ``directory``."""
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
           "MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_BACKEND_STORE_URI": backend_store_uri}
    return _spawn([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1",
                   "--port", str(port), "--artifacts-destination", str(directory / "artifacts"),
                   "--workers", "1"], directory / "mlflow.log", env=env, cwd=directory)


@contextmanager
def start_mlflow(backend_store_uri: str) -> Iterator[MLflowServer]:
    """:func:`spawn_mlflow` on a free port, tracking into ``backend_store_uri``, artifacts in
    a temporary directory; stopped and removed afterwards."""
    directory = Path(tempfile.mkdtemp(prefix="ortho-mlflow-"))
    port, log = free_port(), directory / "mlflow.log"
    processes = ProcessSet()
    try:
        server = spawn_mlflow(port, directory, backend_store_uri)
        processes.groups.add(server.pid)
        _wait_until(lambda: _http_ok(f"http://127.0.0.1:{port}/health"), "mlflow server",
                    alive=lambda: server.poll() is None, log=log)
        yield MLflowServer(port=port, artifacts=directory / "artifacts", pid=server.pid)
    finally:
        if processes.groups:
            processes.stop()
            server.wait()
        shutil.rmtree(directory, ignore_errors=True)


# Ray -----------------------------------------------------------------------------------

_SECOND_NODE = """\
import json, sys
from ray._private.node import Node
from ray._private.parameter import RayParams
Node(RayParams(**json.loads(sys.argv[1])), head=False, shutdown_at_exit=False,
     spawn_reaper=False)
"""
"""What ``ray start --address`` does for a node joining a cluster, minus its address
rewriting (see the module docstring); the node's processes outlive this script."""

_OWN_DISK = """set -e
mount -t tmpfs ortho-keep /mnt
i=0; for p in $ORTHO_KEEP; do mkdir -p /mnt/$i; mount --bind "$p" /mnt/$i; i=$((i+1)); done
mount -t tmpfs -o mode=1777 ortho-node /tmp
i=0; for p in $ORTHO_KEEP; do mkdir -p "$p"; mount --bind /mnt/$i "$p"; i=$((i+1)); done
mkdir -p "$HOME" && cd "$HOME" && exec "$@"
"""
"""Run in a fresh mount namespace (``unshare --mount``): an empty tmpfs over ``/tmp``, with
only the folders of ``$ORTHO_KEEP`` (:func:`kept_paths`) bound back into it, then the command,
from its new home under it."""


def kept_paths() -> list[str]:
    """The folders under ``/tmp`` a node's Python needs (an interpreter or virtual environment
    there, as a CI job may make), which the node's empty ``/tmp`` must still show."""
    return sorted({prefix for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix)
                   if Path(prefix).resolve().is_relative_to("/tmp")})


ISOLATED_HOME = "/tmp/home"
"""``$HOME`` of the nodes after the head, inside their own ``/tmp``."""


def mount_namespaces() -> str | None:
    """Why a node cannot get a disk of its own here (not root, no ``unshare``), or None."""
    if shutil.which("unshare") is None:
        return "util-linux's `unshare` is not installed"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            "mount -t tmpfs ortho-probe /tmp"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot make a mount namespace (root is needed): {probe.stderr.strip()}"
    return None


RAY_STOP_GRACE = 3.0
"""Seconds Ray's processes get after SIGTERM: the raylet, GCS server and runtime-env agent
of a cluster stopped all at once ignore it for longer than :data:`STOP_GRACE` (``ray stop``
waits 16 s, then kills), and a test cluster has nothing to save."""

OBJECT_STORE_BYTES = 200 * 1024**2
"""Each node's object store (Ray's default is 30 % of the machine's memory)."""


@dataclass(frozen=True)
class RayCluster:
    """A running Ray cluster on 127.0.0.1, one node per custom resource in :attr:`nodes`
    (head first), each node holding one unit of its resource."""

    gcs_address: str
    dashboard_url: str
    nodes: tuple[str, ...]
    client_env: dict[str, str]
    """Environment a client (``ray job submit``, ``ortho sweep submit``) needs."""
    directory: Path
    processes: ProcessSet
    home: Path
    """``$HOME`` of the head's processes (a job's driver expands ``~`` to it); the other
    nodes cannot see it."""

    def isolated_pids(self) -> set[int]:
        """The cluster's processes that run in a mount namespace other than this process's
        (those of the nodes after the head)."""
        ours = os.readlink("/proc/self/ns/mnt")
        found = set()
        for pid in self.processes.pids():
            with suppress(OSError):
                if os.readlink(f"/proc/{pid}/ns/mnt") != ours:
                    found.add(pid)
        return found

    def _get(self, path: str) -> Any:
        token = Path(self.client_env["RAY_AUTH_TOKEN_PATH"]).read_text().strip()
        request = urllib.request.Request(self.dashboard_url + path,
                                         headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)

    def alive_nodes(self) -> list[dict[str, Any]]:
        """The alive nodes as the dashboard's state API lists them."""
        reply = self._get("/api/v0/nodes?limit=100&filter_keys=state"
                          "&filter_predicates=%3D&filter_values=ALIVE")
        return list(reply["data"]["result"]["result"])

    def node_ids(self) -> dict[str, str]:
        """Custom resource name → the id of the node that holds it."""
        ids = {}
        for node in self.alive_nodes():
            for name in self.nodes:
                if name in node["resources_total"]:
                    ids[name] = node["node_id"]
        return ids


def _ray_ready(cluster: RayCluster) -> bool:
    try:
        return len(cluster.node_ids()) == len(cluster.nodes)
    except (urllib.error.URLError, ConnectionError, TimeoutError, KeyError):
        return False


@contextmanager
def start_ray_cluster(nodes: tuple[str, ...] = ("node_a", "node_b"),
                      num_cpus: int = 1) -> Iterator[RayCluster]:
    """A Ray cluster of ``len(nodes)`` nodes on 127.0.0.1, each with ``num_cpus`` CPUs, no
    GPU and one unit of its custom resource; the head (``ray start --head``) runs the
    dashboard and job API on 127.0.0.1:<free port>, the other nodes each on a disk of its
    own (the module docstring). Every port is free-chosen, so clusters of other tests or
    users on this machine are not disturbed. No ``ORTHO_*`` variable but the data folder
    reaches the nodes: a job finds what it is given, not what the test machine has."""
    directory = Path(tempfile.mkdtemp(prefix="ortho-ray-", dir="/tmp"))  # short socket paths
    token = directory / "auth_token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    client_env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token),
                  "RAY_USAGE_STATS_ENABLED": "0"}
    home = directory / "home"
    home.mkdir()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ORTHO_")},
           **client_env, "HOME": str(home), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
           "AUTOSCALER_METRIC_PORT": str(free_port()),
           "DASHBOARD_METRIC_PORT": str(free_port())}
    if "ORTHO_DATA_DIR" in os.environ:
        env["ORTHO_DATA_DIR"] = os.environ["ORTHO_DATA_DIR"]
    worker_env = {**{k: v for k, v in env.items() if k != "RAY_AUTH_TOKEN_PATH"},
                  "RAY_AUTH_TOKEN": token.read_text(), "HOME": ISOLATED_HOME, "TMPDIR": "/tmp",
                  "ORTHO_KEEP": " ".join(kept_paths())}
    gcs_port, dashboard_port = free_port(), free_port()
    gcs_address = f"127.0.0.1:{gcs_port}"
    cluster = RayCluster(gcs_address=gcs_address,
                         dashboard_url=f"http://127.0.0.1:{dashboard_port}", nodes=nodes,
                         client_env=client_env, directory=directory, processes=ProcessSet(),
                         home=home)
    log = directory / "start.log"
    ray = Path(sys.executable).with_name("ray")
    try:
        head = _spawn([str(ray if ray.exists() else shutil.which("ray")), "start", "--head",
                       "--node-ip-address", "127.0.0.1", "--port", str(gcs_port),
                       "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dashboard_port),
                       "--include-dashboard", "true",
                       "--ray-client-server-port", str(free_port()),
                       "--dashboard-agent-listen-port", str(free_port()),
                       "--min-worker-port", "0", "--max-worker-port", "0",
                       "--num-cpus", str(num_cpus), "--num-gpus", "0",
                       "--resources", json.dumps({nodes[0]: 1}),
                       "--object-store-memory", str(OBJECT_STORE_BYTES),
                       "--temp-dir", str(directory / nodes[0]), "--disable-usage-stats"],
                      log, env=env, cwd=directory)
        cluster.processes.groups.add(head.pid)
        if head.wait(START_TIMEOUT) != 0:
            raise RuntimeError(f"ray start --head failed{_log_tail(log)}")
        for name in nodes[1:]:
            params = {"node_ip_address": "127.0.0.1", "node_name": name,
                      "gcs_address": gcs_address, "num_cpus": num_cpus, "num_gpus": 0,
                      "resources": {name: 1}, "object_store_memory": OBJECT_STORE_BYTES,
                      "min_worker_port": 0, "max_worker_port": 0,
                      "dashboard_agent_listen_port": free_port(),
                      "temp_dir": str(directory / name)}
            node = _spawn(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           _OWN_DISK, "sh", sys.executable, "-c", _SECOND_NODE,
                           json.dumps(params)], log, env=worker_env, cwd=directory)
            cluster.processes.groups.add(node.pid)
            if node.wait(START_TIMEOUT) != 0:
                raise RuntimeError(f"node {name} failed to start{_log_tail(log)}")
        _wait_until(lambda: _ray_ready(cluster), f"Ray cluster of nodes {nodes}", log=log)
        yield cluster
    finally:
        cluster.processes.stop(RAY_STOP_GRACE)
        shutil.rmtree(directory, ignore_errors=True)


# Fixtures ------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A PostgreSQL server for the whole session; skipped where PostgreSQL is missing, except
    under CI (``$CI`` set), where the proof must run and a missing server fails."""
    bindir = postgres_bindir()
    if bindir is None:
        reason = ("PostgreSQL is not installed (initdb/postgres not found on PATH or under "
                  "/usr/lib/postgresql/*/bin); `bash scripts/install.sh --test` installs it")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with start_postgres(bindir) as server:
        yield server


@pytest.fixture(scope="session")
def mlflow_server(postgres: Postgres) -> Iterator[MLflowServer]:
    """An MLflow tracking server backed by :func:`postgres` (database ``mlflow``)."""
    with start_mlflow(postgres.create_database("mlflow")) as server:
        yield server


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    """A two-node Ray cluster (resources ``node_a`` on the head, ``node_b`` on a disk of its
    own; 1 CPU each); skipped where mount namespaces cannot be made, except under CI."""
    reason = mount_namespaces()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with start_ray_cluster() as cluster:
        yield cluster
