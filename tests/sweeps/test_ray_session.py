"""How many trials the Ray cluster runs at once (``trial_slots``), which the plan's packs fill:
on the embedded Ray of two CPUs, and node by node on a cluster whose nodes the test describes;
and the embedded Ray's processes: no dashboard head while usage statistics are off."""

from __future__ import annotations

import psutil
import pytest
import ray
from ray._private.node import Node

from sweeps import ray_session
from sweeps.ray_session import trial_slots
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


@pytest.mark.usefixtures(toy_ray.__name__)
def test_the_embedded_ray_starts_no_dashboard_head_while_usage_stats_are_off():
    """Ray's own start would run ``dashboard.py`` (its usage-stats module) even without the
    dashboard; the embedded Ray of these tests (usage statistics off) runs no such process,
    and its node knows of none, yet runs tasks."""
    node = ray._private.worker.global_worker.node
    assert "dashboard" not in node.all_processes
    commands = [" ".join(p.cmdline()) for p in psutil.Process().children(recursive=True)]
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
