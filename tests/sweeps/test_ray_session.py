"""How many trials the Ray cluster runs at once (``trial_slots``), which the plan's packs fill:
on the embedded Ray of two CPUs, and node by node on a cluster whose nodes the test describes."""

from __future__ import annotations

import pytest
import ray

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
