"""The sweep's Tune searcher without Tune: grid packs first, then Optuna per cell, with
resumed history, seeded proposals and repeated points never trained twice."""

from __future__ import annotations

import pytest
from ray.tune.search import Searcher

from ortho_core import experiments
from sweeps.plan import PastTrial, build_plan
from sweeps.searcher import SweepSearcher
from sweeps.spec import load_spec, resolve
from tests.sweeps.helpers import TOY_MODULE, write_spec


@pytest.fixture(autouse=True)
def _toy(monkeypatch):
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)


def _spec(tmp_path, x, n_trials=3, sampler="random"):
    path = write_spec(tmp_path, fixed={}, space={"steps": [1, 2], "x": x},
                      search={"kind": "optuna", "sampler": sampler, "n_trials": n_trials,
                              "seed": 0})
    return resolve(load_spec(str(path)), "smoke")


def _drain(searcher):
    """Suggest until FINISHED, completing each trial with score 10 x; the members."""
    members = []
    for i in range(100):
        config = searcher.suggest(f"t{i}")
        if config == Searcher.FINISHED:
            return members
        [member] = config["members"]
        members.append(member)
        searcher.on_trial_complete(f"t{i}", {"score": 10 * member["params"]["x"]})
    raise AssertionError("the searcher never finished")


def test_optuna_cells_get_their_budget_round_robin(tmp_path):
    spec = _spec(tmp_path, {"low": 0.0, "high": 1.0})
    searcher = SweepSearcher(build_plan(spec), "score", "max", spec.optuna)
    members = _drain(searcher)
    assert [m["cell"] for m in members] == [0, 1, 0, 1, 0, 1]
    for m in members:
        assert m["optuna"] == {"x": m["params"]["x"]} and 0 <= m["params"]["x"] <= 1
        assert m["params"]["steps"] == m["cell"] + 1
    assert len({m["key"] for m in members}) == 6
    again = _drain(SweepSearcher(build_plan(spec), "score", "max", spec.optuna))
    assert [m["params"] for m in again] == [m["params"] for m in members]  # seeded
    assert searcher.exhausted and searcher.n_suggested == 6


def test_resumed_cells_only_run_what_is_left(tmp_path):
    spec = _spec(tmp_path, {"low": 0.0, "high": 1.0})
    history = {0: [PastTrial({"x": 0.5}, 5.0), PastTrial({"x": 0.7}, None)]}
    plan = build_plan(spec, history=history)
    assert (plan.remaining(0), plan.remaining(1), plan.n_tune_trials, plan.n_configs) == (
        1, 3, 4, 6)
    members = _drain(SweepSearcher(plan, "score", "max", spec.optuna))
    assert sorted(m["cell"] for m in members) == [0, 1, 1, 1]


def test_a_repeated_point_is_not_trained_twice(tmp_path):
    spec = _spec(tmp_path, {"choice": [0.25]}, sampler="grid")
    searcher = SweepSearcher(build_plan(spec), "score", "max", spec.optuna)
    first = searcher.suggest("a")
    searcher.on_trial_start("a")
    second = searcher.suggest("b")  # cell 1
    searcher.on_trial_start("b")
    assert searcher.suggest("c") == Searcher.FINISHED  # the rest repeat live or known points
    assert [c["members"][0]["cell"] for c in (first, second)] == [0, 1]
    assert searcher.n_suggested == 2


def test_grid_packs_come_first(tmp_path):
    path = write_spec(tmp_path, pack_size=2)
    spec = resolve(load_spec(str(path)), "smoke")
    searcher = SweepSearcher(build_plan(spec), "score", "max", None)
    configs = [searcher.suggest(str(i)) for i in range(3)]
    assert [[m["params"]["x"] for m in c["members"]] for c in configs[:2]] == [
        [0.1, 0.4], [0.7, 0.9]]
    assert configs[2] == Searcher.FINISHED


def test_optuna_points_wait_until_the_previous_trial_starts(tmp_path):
    path = write_spec(tmp_path, fixed={}, space={"x": {"low": 0.0, "high": 1.0}},
                      groups=[{"fixed": {"steps": 1}, "space": {"x": [0.1, 0.2]}},
                              {"fixed": {"steps": 2}}],
                      search={"kind": "optuna", "sampler": "random", "n_trials": 2, "seed": 0})
    spec = resolve(load_spec(str(path)), "smoke")
    searcher = SweepSearcher(build_plan(spec), "score", "max", spec.optuna)
    packs = [searcher.suggest(f"g{i}") for i in range(2)]  # grid packs: all at once
    assert [[m["params"]["x"] for m in c["members"]] for c in packs] == [[0.1], [0.2]]
    first = searcher.suggest("o1")
    assert first["members"][0]["optuna"] is not None
    assert searcher.suggest("o2") is None  # "o1" has not started: ask again later
    assert searcher.n_suggested == 3
    searcher.on_trial_start("o1")
    second = searcher.suggest("o2")
    assert second["members"][0]["key"] != first["members"][0]["key"]
    assert searcher.suggest("o3") is None
    searcher.on_trial_complete("o2", error=True)  # never started (e.g. failed to start)
    assert searcher.suggest("o3") == Searcher.FINISHED  # the budget of 2 is spent
    assert searcher.exhausted
