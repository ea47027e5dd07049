"""Packs: grid configurations grouped by the trainer's PACK_FIELDS and split evenly."""

from __future__ import annotations

import pytest

from ortho_core import experiments
from sweeps.plan import build_plan, split_evenly
from sweeps.spec import load_spec, resolve, trial_key
from tests.sweeps.helpers import TOY_MODULE, write_spec


@pytest.fixture(autouse=True)
def _toy(monkeypatch):
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)


def test_packs_follow_pack_fields_and_split_evenly(tmp_path):
    path = write_spec(tmp_path, fixed={}, space={"x": [0.1, 0.2, 0.3, 0.4, 0.5],
                                                  "steps": [2, 3]}, pack_size=3)
    plan = build_plan(resolve(load_spec(str(path)), "smoke"))
    shapes = [[(m.params["steps"], m.params["x"]) for m in p] for p in plan.packs]
    assert shapes == [[(2, 0.1), (2, 0.3), (2, 0.5)], [(2, 0.2), (2, 0.4)],
                      [(3, 0.1), (3, 0.3), (3, 0.5)], [(3, 0.2), (3, 0.4)]]
    assert (plan.n_configs, plan.n_tune_trials, plan.n_todo) == (10, 4, 10)


def test_finished_configurations_are_left_out_before_packing(tmp_path):
    path = write_spec(tmp_path, pack_size=2)
    spec = resolve(load_spec(str(path)), "smoke")
    done = {trial_key("toy", c.params): None for c in spec.cells()[:3]}
    plan = build_plan(spec, finished=done)
    assert [[m.params["x"] for m in p] for p in plan.packs] == [[0.9]]
    assert plan.n_configs == 4


def test_split_evenly_deals_neighbours_into_different_chunks():
    assert [len(c) for c in split_evenly(range(17), 16)] == [9, 8]
    assert [len(c) for c in split_evenly(range(5), 5)] == [5]
    assert split_evenly([], 4) == []
    # a cheap group then a dear one (ff-mnist: FF, then FF+OPEN) shares itself out
    assert split_evenly(["ff"] * 3 + ["open"] * 3, 3) == [["ff", "ff", "open"],
                                                          ["ff", "open", "open"]]
