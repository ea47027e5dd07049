"""How many trials the Ray cluster runs at once (``trial_slots``), which the plan's packs fill:
on the embedded Ray of two CPUs, and node by node on a cluster whose nodes the test describes;
the embedded Ray's processes: no dashboard head while usage statistics are off; a
cluster's address where something other than Ray answers, refused in seconds; and SIGTERM
taken as a Ctrl-C while a sweep has Ray."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from typing import ClassVar

import psutil
import pytest
import ray
from ray._private.node import Node

from ortho_core.errors import ConfigError
from sweeps import ray_session
from sweeps.ray_session import trial_slots
from tests.servers import free_port
from tests.sweeps.helpers import toy_ray


@pytest.mark.usefixtures(toy_ray.__name__)
@pytest.mark.parametrize(("cpu", "gpu", "max_concurrent", "slots"), [
    (1, 0, None, 2),
    (0.5, 0, None, 4),
    (2, 0, None, 1),
    (3, 0, None, 1),        # fits nowhere yet (an autoscaler may add a node): one
    (1, 0, 1, 1),
    (0.5, 0, 3, 3),
    (1, 0.25, None, 1),     # no GPU on this Ray
])
def test_trial_slots_on_the_embedded_ray(cpu, gpu, max_concurrent, slots):
    assert ray.cluster_resources()["CPU"] == 2
    assert trial_slots(cpu, gpu, max_concurrent) == slots


def test_sigterm_goes_to_the_sigint_handler_of_the_moment_then_ray_s_is_back():
    def ray_s(signum: int, frame: object) -> None:
        raise AssertionError("Ray's handler while the sweep has Ray")

    heard: list[int] = []
    before = (signal.signal(signal.SIGTERM, ray_s),
              signal.signal(signal.SIGINT, lambda s, f: heard.append(s)))
    try:
        with ray_session.terminate_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            assert heard == [signal.SIGINT]  # as a Ctrl-C, to whatever answers one now
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            with pytest.raises(KeyboardInterrupt):  # none answers: what a Ctrl-C raises
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1)
        assert signal.getsignal(signal.SIGTERM) is ray_s
    finally:
        signal.signal(signal.SIGTERM, before[0])
        signal.signal(signal.SIGINT, before[1])


def test_outside_the_main_thread_sigterm_is_left_alone():
    errors: list[BaseException] = []

    def enter() -> None:
        try:
            with ray_session.terminate_as_interrupt():
                pass
        except BaseException as err:  # signal.signal would raise ValueError here
            errors.append(err)

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=enter)
    thread.start()
    thread.join()
    assert errors == [] and signal.getsignal(signal.SIGTERM) is before


def test_trial_slots_count_node_by_node(monkeypatch):
    nodes = [{"Alive": True, "Resources": {"CPU": 3.0, "GPU": 1.0}},
             {"Alive": True, "Resources": {"CPU": 3.0}},
             {"Alive": False, "Resources": {"CPU": 64.0, "GPU": 8.0}},
             {"Alive": True, "Resources": {"CPU": 16.0, "GPU": 2.0}}]
    monkeypatch.setattr(ray, "nodes", lambda: nodes)
    assert trial_slots(2, 0) == 1 + 1 + 8       # 6 CPUs on two nodes hold two trials, not 3
    assert trial_slots(1, 0.25) == 3 + 8        # CPUs bound the first node, GPUs the last
    assert trial_slots(0.1, 0.1) == 10 + 20     # 1 / 0.1 is 9.999…: still 10
    assert trial_slots(1, 0.25, max_concurrent=4) == 4


def test_tune_gives_trials_no_credential_and_no_variable_of_its_own(monkeypatch):
    """Inside :func:`~sweeps.ray_session.trial_environment` the runtime environment Tune
    builds for a trainable holds only what the user set of the variables Tune carries, so it
    is empty by default (Ray then starts the trial in a worker it started ahead)."""
    from ray.tune.execution import class_cache

    class Trainable:
        pass

    def env_vars() -> dict[str, str]:
        remote = class_cache._ActorClassCache().get(Trainable)
        return remote._default_options["runtime_env"].get("env_vars", {})

    for name in class_cache.ENV_VARS_TO_PROPAGATE:  # none set but those below
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2")
    monkeypatch.setenv("RAY_TRAIN_V2_ENABLED", "1")
    tunes = env_vars()
    assert tunes["AWS_SECRET_ACCESS_KEY"] == "hunter2" and tunes["PL_DISABLE_FORK"] == "1"
    with ray_session.trial_environment({}):
        assert env_vars() == {"RAY_TRAIN_V2_ENABLED": "1"}
        monkeypatch.delenv("RAY_TRAIN_V2_ENABLED")
        assert env_vars() == {}
        remote = class_cache._ActorClassCache().get(Trainable)
        assert remote._default_options["runtime_env"] == {}  # as if none were given
    assert env_vars() == {k: v for k, v in tunes.items() if k != "RAY_TRAIN_V2_ENABLED"}


@pytest.mark.usefixtures(toy_ray.__name__)
def test_a_cluster_s_trials_get_the_data_dir_the_job_does_not_give_them(monkeypatch):
    """``--data-dir`` with an address: every trial's actor runs with it as $ORTHO_DATA_DIR
    (a resume from the head reaches the nodes' folder as the submitted job did), unless the
    job's own runtime environment holds it already (a submitted job: its trials then start
    in the workers Ray started ahead)."""
    from ray.tune.execution import class_cache

    class Trainable:
        def data_dir(self) -> str | None:
            return os.environ.get("ORTHO_DATA_DIR")

    wanted = {"ORTHO_DATA_DIR": "/nodes/data"}
    with ray_session.trial_environment(wanted):
        actor = class_cache._ActorClassCache().get(Trainable).remote()
        assert ray.get(actor.data_dir.remote()) == "/nodes/data"
        ray.kill(actor)

    class Submitted:
        runtime_env: ClassVar[dict[str, dict[str, str]]] = {
            "env_vars": {"ORTHO_DATA_DIR": "/nodes/data", "OTHER": "1"}}

    monkeypatch.setattr(ray, "get_runtime_context", Submitted)
    with ray_session.trial_environment(wanted):
        assert class_cache.DEFAULT_ENV_VARS == {}
    with ray_session.trial_environment({"ORTHO_DATA_DIR": "/elsewhere"}):
        assert class_cache.DEFAULT_ENV_VARS == {"ORTHO_DATA_DIR": "/elsewhere"}


@pytest.mark.usefixtures(toy_ray.__name__)
def test_a_trial_no_node_can_hold_is_named_with_what_it_asks():
    """Tune waits in silence for resources no node has (a cluster may gain one): the sweep
    says so when it starts. The embedded Ray here has 2 CPUs and no GPU."""
    assert ray_session.unplaceable(2, 0) is None
    assert ray_session.unplaceable(3, 0) == (
        "no node of the cluster has the 3 CPUs a trial asks (the spec's resources; its largest "
        "has 2 CPUs and 0 GPUs): the trials wait until such a node joins (Ctrl-C stops the "
        "sweep)")
    assert "has the 1 CPU and 0.25 GPUs a trial asks" in ray_session.unplaceable(1, 0.25)


def test_data_dir_is_this_machine_s_for_the_embedded_ray_and_the_nodes_for_a_cluster(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ORTHO_DATA_DIR", "set")  # so that the test's own setting is undone
    monkeypatch.delenv("ORTHO_DATA_DIR")
    assert ray_session.data_dir_variables(None, "10.0.0.1:6379") == {}
    assert "ORTHO_DATA_DIR" not in os.environ
    with pytest.raises(ConfigError) as refused:
        ray_session.data_dir_variables("data", None)  # no such folder here
    assert refused.value.field == "data_dir" and "ORTHO_DATA_DIR" not in os.environ
    (tmp_path / "data").mkdir()
    assert ray_session.data_dir_variables("data", None) == {}
    assert os.environ["ORTHO_DATA_DIR"] == str(tmp_path / "data")  # the Ray started inherits
    assert ray_session.data_dir_variables("~/data", "10.0.0.1:6379") == {
        "ORTHO_DATA_DIR": "~/data"}  # each node's ~
    for address in ("10.0.0.1:6379", "ray://10.0.0.1:10001"):
        with pytest.raises(ConfigError) as refused:
            ray_session.data_dir_variables("data" if address[0] == "1" else "/data", address)
        assert refused.value.field == "data_dir"


@pytest.mark.usefixtures(toy_ray.__name__)
def test_the_embedded_ray_starts_no_dashboard_head_while_usage_stats_are_off():
    """Ray's own start would run ``dashboard.py`` (its usage-stats module) even without the
    dashboard; the embedded Ray of these tests (usage statistics off) runs no such process,
    and its node knows of none, yet runs tasks."""
    node = ray._private.worker.global_worker.node
    assert "dashboard" not in node.all_processes
    commands = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):  # a worker ending meanwhile (a zombie)
            commands.append(" ".join(child.cmdline()))
    assert any("raylet" in c for c in commands), commands
    assert not any("dashboard/dashboard.py" in c for c in commands), commands
    assert ray.get(ray.remote(lambda: 6 * 7).remote()) == 42


@pytest.mark.parametrize(("usage_stats", "skipped"), [("0", True), ("1", False), (None, False)])
def test_the_dashboard_head_is_skipped_only_while_usage_stats_are_off(monkeypatch, usage_stats,
                                                                       skipped):
    if usage_stats is None:
        monkeypatch.delenv(ray_session.USAGE_STATS_ENV, raising=False)
    else:
        monkeypatch.setenv(ray_session.USAGE_STATS_ENV, usage_stats)
    original = Node.start_api_server
    with ray_session._no_usage_stats_head():
        assert (Node.start_api_server is not original) == skipped
    assert Node.start_api_server is original


@pytest.fixture
def not_ray():
    """Two servers that are not Ray, on loopback: a web server (as the dashboard's port
    8265 is) and one that accepts connections and never answers; their ports."""
    import socket
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    web = ThreadingHTTPServer(("127.0.0.1", 0), SimpleHTTPRequestHandler)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    silent = socket.create_server(("127.0.0.1", 0))
    yield {"web": web.server_address[1], "silent": silent.getsockname()[1]}
    web.shutdown()
    silent.close()


@pytest.mark.parametrize("server", ["web", "silent"])
def test_an_address_where_something_else_answers_is_refused_in_seconds(not_ray, server):
    address = f"127.0.0.1:{not_ray[server]}"
    began = time.monotonic()
    with pytest.raises(ConfigError, match="is not Ray") as refused:
        ray_session.check_address(address)
    assert refused.value.field == "address" and time.monotonic() - began < 10


@pytest.mark.parametrize("address", ["foo", "", "not an address", "host:notaport", "ray://h"])
def test_an_address_of_no_form_ray_takes_is_refused_naming_the_forms(address):
    """Ray raised ``ValueError`` with a traceback for these."""
    with pytest.raises(ConfigError) as refused:
        ray_session.check_address(address)
    assert (refused.value.field, refused.value.value) == ("address", address)
    assert refused.value.expected == "a Ray cluster's address: " + ray_session.ADDRESS_FORMS


def test_auto_is_refused_where_ray_would_find_no_cluster_or_a_dead_one(monkeypatch, not_ray):
    """Where ``ray.init(address="auto")`` would raise ``ConnectionError`` with a traceback,
    or retry for minutes at the address a cluster that died left behind (or a URL in
    ``$RAY_ADDRESS``): exit 2 naming the field, within seconds."""
    from ray._private import services

    def none_running(addr, temp_dir):
        raise ConnectionError("Could not find any running Ray instance.")

    monkeypatch.setattr(services, "get_ray_address_from_environment", none_running)
    with pytest.raises(ConfigError, match="none is running: `ray start --head` starts one"):
        ray_session.check_address("auto")
    dead = free_port()
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    for found, says in ((f"127.0.0.1:{dead}", f"(auto found 127.0.0.1:{dead} where `ray "
                                              "start` left it) that answers (connection "),
                        (f"127.0.0.1:{not_ray['web']}", "is not Ray"),
                        ("http://127.0.0.1:8265", "auto found http://127.0.0.1:8265 in "
                                                  "$RAY_ADDRESS"),
                        ("garbage", "or auto for the one started on this machine (auto "
                                    "found garbage in $RAY_ADDRESS)")):
        if found in ("http://127.0.0.1:8265", "garbage"):
            monkeypatch.setenv("RAY_ADDRESS", found)  # where auto found it
        monkeypatch.setattr(services, "get_ray_address_from_environment",
                            lambda addr, temp_dir, found=found: found)
        began = time.monotonic()
        with pytest.raises(ConfigError) as refused:
            ray_session.check_address("auto")
        assert says in str(refused.value) and refused.value.value == "auto"
        assert time.monotonic() - began < 10


def test_a_dashboard_url_is_refused_naming_the_command_it_is_for():
    with pytest.raises(ConfigError) as refused:
        ray_session.check_address("http://127.0.0.1:8265")
    assert refused.value.field == "address"
    assert "(a URL such as http://HOST:8265 is its dashboard's, for `ortho sweep submit`)" in \
        refused.value.expected


def test_where_ray_uses_tls_only_the_port_is_checked(not_ray, monkeypatch):
    monkeypatch.setenv("RAY_USE_TLS", "1")
    ray_session.check_address(f"127.0.0.1:{not_ray['silent']}")  # a TLS server is silent too


@pytest.mark.usefixtures(toy_ray.__name__)
def test_a_running_ray_s_gcs_address_is_taken():
    ray_session.check_address(ray.get_runtime_context().gcs_address)


def test_sweep_run_against_a_web_server_exits_2_naming_address(not_ray, tmp_path, capsys):
    from sweeps.cli import main

    assert main(["sweep", "run", "synthetic-max-length", "--profile", "smoke", "--home",
                 str(tmp_path), "--address", f"127.0.0.1:{not_ray['web']}"]) == 2
    assert "invalid address" in capsys.readouterr().err


def test_a_ctrl_c_while_ray_shuts_down_after_the_sweep_leaves_its_result(monkeypatch):
    """The sweep had ended (its last line printed); a Ctrl-C then made the command exit 130."""
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray_session, "start_embedded_ray", lambda: None)

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ray, "shutdown", interrupted)
    with ray_session.ray_session(None) as embedded:
        assert embedded
    with pytest.raises(KeyboardInterrupt), ray_session.ray_session(None):
        raise KeyboardInterrupt  # the sweep's own: still an interrupt


def test_waiting_for_the_node_asks_until_it_is_registered_then_gives_up_as_ray_does():
    """Past Ray's 30 s a slow raylet's node is still taken; one never registered raises
    Ray's ``RuntimeError`` once the wait is spent, having asked every 0.1 s."""
    now = [0.0]
    asked = []

    def registered_at(t: float):
        def get_node(gcs_address: str, node_id: str) -> dict:
            asked.append(now[0])
            if now[0] < t:
                raise RuntimeError(f"node {node_id} not found")
            return {"NodeID": node_id, "asked at": now[0]}
        return get_node

    def sleep(s: float) -> None:
        now[0] += s

    wait = ray_session.wait_for_node(registered_at(40.0), 120.0, lambda: now[0], sleep)
    assert wait("127.0.0.1:1", "abc")["asked at"] == pytest.approx(40.0)
    assert len(asked) == pytest.approx(401, abs=1)
    now[0], asked[:] = 0.0, []
    never = ray_session.wait_for_node(registered_at(float("inf")), 120.0, lambda: now[0], sleep)
    with pytest.raises(RuntimeError, match="node abc not found"):
        never("127.0.0.1:1", "abc")
    assert asked[-1] == pytest.approx(120.0, abs=0.2)


SLOW_RAYLET = """\
import itertools, time, types
import ray
from ray._private import node, services
from sweeps.ray_session import start_embedded_ray

failures, ticks = itertools.count(1), itertools.count()
registered = services.get_node
def get_node(*args, **kwargs):
    if next(failures) <= 5:
        raise RuntimeError("node not registered yet")
    return registered(*args, **kwargs)
services.get_node = get_node
# Ray's clock of its 30 s wait jumps 20 s each time it is read: its own loop gives up after
# the second failure.
node.time = types.SimpleNamespace(sleep=time.sleep, time=time.time,
                                  monotonic=lambda: time.monotonic() + 20 * next(ticks))
start_embedded_ray()
node.time = time
print(ray.get(ray.remote(lambda: 6 * 7).remote()))
ray.shutdown()
"""


def test_the_embedded_ray_waits_for_a_raylet_slower_than_ray_s_30_s():
    """Under load a local node's raylet has registered with its GCS later than the 30 s Ray
    allows (2026-12-07, a sweep of the suite failed "The current node timed out during
    startup"): the embedded Ray waits for it. Ray's clock is sped up here, so that its 30 s
    pass after two failed asks."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run([sys.executable, "-c", SLOW_RAYLET], capture_output=True, text=True,
                          timeout=120, env={**env, "RAY_USAGE_STATS_ENABLED": "0"})
    assert done.returncode == 0 and done.stdout.split()[-1:] == ["42"], done.stderr[-3000:]
