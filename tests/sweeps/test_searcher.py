"""The sweep's Tune searcher without Tune: grid packs first, then Optuna per cell in packs
asked in one go (pending to the sampler), with resumed budgets, seeded proposals, each
member told its own value, and repeated points never trained twice."""

from __future__ import annotations

import optuna
import pytest
from ray.tune.search import Searcher

from ortho_core import experiments
from sweeps.plan import build_plan
from sweeps.searcher import MEMBER_VALUES, SweepSearcher
from sweeps.spec import load_spec, resolve
from sweeps.studies import KEY_ATTR, REPEAT_ATTR, create_studies
from tests.sweeps.helpers import TOY_MODULE, write_spec


@pytest.fixture(autouse=True)
def _toy(monkeypatch):
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)


STATE = optuna.trial.TrialState


def _spec(tmp_path, x, n_trials=3, sampler="random", steps=(1, 2), pack_size=1):
    path = write_spec(tmp_path, fixed={}, space={"steps": list(steps), "x": x},
                      pack_size=pack_size,
                      search={"kind": "optuna", "sampler": sampler, "n_trials": n_trials,
                              "seed": 0})
    return resolve(load_spec(str(path)), "smoke")


def _searcher(spec, plan=None):
    """A searcher of ``spec``'s plan with its studies in memory; (searcher, studies)."""
    plan = plan or build_plan(spec)
    studies = create_studies(None, "sweep", plan, spec.optuna, spec.mode)
    return SweepSearcher(plan, "score", "max", studies), studies


def _result(members):
    """The final report of a trial of ``members`` as a searcher gets it (flattened): each
    member's score 10 x, the best as the metric."""
    values = {m["key"]: 10 * m["params"]["x"] for m in members}
    return {"score": max(values.values()),
            **{f"{MEMBER_VALUES}/{k}": v for k, v in values.items()}}


def _drain(searcher):
    """Suggest until FINISHED, completing each trial at once; the packs' members."""
    packs = []
    for i in range(100):
        config = searcher.suggest(f"t{i}")
        if config == Searcher.FINISHED:
            return packs
        packs.append(config["members"])
        searcher.on_trial_complete(f"t{i}", _result(config["members"]))
    raise AssertionError("the searcher never finished")


def test_optuna_cells_get_their_budget_round_robin(tmp_path):
    spec = _spec(tmp_path, {"low": 0.0, "high": 1.0})
    searcher, _ = _searcher(spec)
    members = [m for [m] in _drain(searcher)]
    assert [m["cell"] for m in members] == [0, 1, 0, 1, 0, 1]
    for m in members:
        assert m["optuna"] == {"x": m["params"]["x"]} and 0 <= m["params"]["x"] <= 1
        assert m["params"]["steps"] == m["cell"] + 1
    assert len({m["key"] for m in members}) == 6
    again = [m for [m] in _drain(_searcher(spec)[0])]
    assert [m["params"] for m in again] == [m["params"] for m in members]  # seeded
    assert searcher.exhausted and searcher.n_suggested == 6


def test_resumed_cells_only_run_what_is_left(tmp_path):
    spec = _spec(tmp_path, {"low": 0.0, "high": 1.0})
    plan = build_plan(spec, done={0: 2})
    assert (plan.remaining(0), plan.remaining(1), plan.n_tune_trials, plan.n_configs) == (
        1, 3, 4, 6)
    packs = _drain(_searcher(spec, plan)[0])
    assert sorted(m["cell"] for [m] in packs) == [0, 1, 1, 1]


def test_a_repeated_point_is_not_trained_twice(tmp_path):
    spec = _spec(tmp_path, {"choice": [0.25]}, sampler="grid")
    searcher, _ = _searcher(spec)
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
    searcher = SweepSearcher(build_plan(spec), "score", "max", None)  # no Optuna cells
    configs = [searcher.suggest(str(i)) for i in range(3)]
    assert [[m["params"]["x"] for m in c["members"]] for c in configs[:2]] == [
        [0.1, 0.7], [0.4, 0.9]]
    assert configs[2] == Searcher.FINISHED


def test_optuna_points_wait_until_the_previous_trial_starts(tmp_path):
    path = write_spec(tmp_path, fixed={}, space={"x": {"low": 0.0, "high": 1.0}},
                      groups=[{"fixed": {"steps": 1}, "space": {"x": [0.1, 0.2]}},
                              {"fixed": {"steps": 2}}],
                      search={"kind": "optuna", "sampler": "random", "n_trials": 2, "seed": 0})
    spec = resolve(load_spec(str(path)), "smoke")
    searcher, _ = _searcher(spec)
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


@pytest.mark.parametrize("sampler", ["tpe", "grid"])
def test_a_pack_is_asked_in_one_go_and_its_points_are_pending(tmp_path, sampler):
    """A batch of K asks: K distinct points, all RUNNING (pending) in the study while the
    pack trains (the grid sampler then skips them: 4 asks cover its 4 points); each member's
    trial is then told its own value."""
    space = {"choice": [0.1, 0.2, 0.3, 0.4]} if sampler == "grid" else {"low": 0.0, "high": 1.0}
    spec = _spec(tmp_path, space, sampler=sampler, n_trials=4, steps=[1], pack_size=4)
    searcher, studies = _searcher(spec)
    study = studies.by_cell[0]
    members = searcher.suggest("a")["members"]
    assert len(members) == 4 and len({m["key"] for m in members}) == 4
    pending = study.get_trials(states=(STATE.RUNNING,))
    assert sorted(t.params["x"] for t in pending) == sorted(m["params"]["x"] for m in members)
    assert {t.user_attrs[KEY_ATTR] for t in pending} == {m["key"] for m in members}
    if sampler == "grid":
        assert sorted(m["params"]["x"] for m in members) == [0.1, 0.2, 0.3, 0.4]
    else:
        assert study.sampler._constant_liar  # TPE's pending trials count as the worst
    searcher.on_trial_start("a")
    assert searcher.suggest("b") == Searcher.FINISHED  # the budget of 4 is in one pack
    searcher.on_trial_complete("a", _result(members))
    told = {t.params["x"]: t.value for t in study.get_trials(states=(STATE.COMPLETE,))}
    assert told == {m["params"]["x"]: pytest.approx(10 * m["params"]["x"]) for m in members}


def test_packs_of_a_cell_split_its_budget_evenly(tmp_path):
    spec = _spec(tmp_path, {"low": 0.0, "high": 1.0}, n_trials=5, steps=[1], pack_size=4)
    plan = build_plan(spec)
    assert plan.n_tune_trials == 2
    packs = _drain(_searcher(spec, plan)[0])
    assert [len(p) for p in packs] == [3, 2]
    assert len({m["key"] for p in packs for m in p}) == 5


def test_a_point_repeated_within_a_pack_is_told_not_trained(tmp_path):
    spec = _spec(tmp_path, {"choice": [0.25]}, sampler="grid", n_trials=3, steps=[1],
                 pack_size=3)
    searcher, studies = _searcher(spec)
    [member] = searcher.suggest("a")["members"]
    trials = studies.by_cell[0].get_trials()
    assert [t.state for t in trials] == [STATE.RUNNING, STATE.FAIL, STATE.FAIL]
    assert [bool(t.user_attrs.get(REPEAT_ATTR)) for t in trials] == [False, True, True]
    assert trials[1].user_attrs[KEY_ATTR] == member["key"]
    searcher.on_trial_start("a")
    assert searcher.suggest("b") == Searcher.FINISHED and searcher.n_suggested == 1
    assert searcher.n_repeats == 2 == studies.repeats()


def test_an_errored_pack_stays_pending_until_the_sweep_tells_what_mlflow_holds(tmp_path):
    """Tune reports no result of a trial that errored, though some members may have ended
    FINISHED: their trials stay RUNNING (pending), a point proposed again meanwhile is a
    repeat (failed, not trained), and the sweep's end tells each one its run's value or
    FAIL."""
    spec = _spec(tmp_path, {"choice": [0.25, 0.5]}, sampler="grid", n_trials=3, steps=[1],
                 pack_size=2)
    searcher, studies = _searcher(spec)
    members = searcher.suggest("a")["members"]
    assert sorted(m["params"]["x"] for m in members) == [0.25, 0.5]
    searcher.on_trial_start("a")
    searcher.on_trial_complete("a", error=True)
    study = studies.by_cell[0]
    assert [t.state for t in study.get_trials()] == [STATE.RUNNING] * 2
    assert searcher.suggest("b") == Searcher.FINISHED  # its third point repeats one of them
    repeat = study.get_trials()[2]
    assert (repeat.state, repeat.user_attrs[REPEAT_ATTR]) == (STATE.FAIL, True)
    studies.end_running({members[0]["key"]: 2.5})  # members[1] has no FINISHED run
    assert [(t.state, t.value) for t in study.get_trials()[:2]] == [
        (STATE.COMPLETE, 2.5), (STATE.FAIL, None)]


@pytest.mark.parametrize("grid_done_first", [False, True])
def test_an_optuna_point_that_is_a_grid_configuration_is_told_not_trained(
        tmp_path, grid_done_first):
    """Group 0's grid value 0.25 is a choice of group 1's Optuna cell: while the grid trial
    trains it, the point is failed (not trained beside it, whose run a second claim would
    retire); once it has ended, the point is told the grid configuration's value."""
    path = write_spec(tmp_path, fixed={"steps": 1}, space={},
                      groups=[{"space": {"x": [0.25]}},
                              {"space": {"x": {"choice": [0.25, 0.5]}}}],
                      search={"kind": "optuna", "sampler": "grid", "n_trials": 2, "seed": 0})
    spec = resolve(load_spec(str(path)), "smoke")
    searcher, studies = _searcher(spec)
    [grid] = searcher.suggest("g")["members"]
    if grid_done_first:
        searcher.on_trial_complete("g", _result([grid]))
    handed = []
    for i in range(3):
        config = searcher.suggest(f"o{i}")
        if config == Searcher.FINISHED:
            break
        handed += config["members"]
        searcher.on_trial_start(f"o{i}")
        searcher.on_trial_complete(f"o{i}", _result(config["members"]))
    assert [m["params"]["x"] for m in handed] == [0.5]
    assert grid["key"] not in {m["key"] for m in handed}
    [repeat] = [t for t in studies.by_cell[1].get_trials() if t.user_attrs.get(REPEAT_ATTR)]
    assert (repeat.params, repeat.user_attrs[KEY_ATTR]) == ({"x": 0.25}, grid["key"])
    if grid_done_first:
        assert (repeat.state, repeat.value) == (STATE.COMPLETE, pytest.approx(2.5))
    else:
        assert repeat.state == STATE.FAIL


def test_a_member_is_told_only_a_finite_number(tmp_path):
    """A member whose reported value is not a finite number (a diverged NaN, or a bool, which
    Python counts as an int) fails its Optuna trial rather than being told 1.0 or NaN."""
    spec = _spec(tmp_path, {"low": 0.0, "high": 1.0}, n_trials=3, steps=[1], pack_size=3)
    searcher, studies = _searcher(spec)
    members = searcher.suggest("a")["members"]
    searcher.on_trial_start("a")
    reported = dict(zip((m["key"] for m in members), (True, float("nan"), 0.5), strict=True))
    searcher.on_trial_complete("a", {"score": 0.5, **{f"{MEMBER_VALUES}/{k}": v
                                                     for k, v in reported.items()}})
    told = {t.user_attrs[KEY_ATTR]: (t.state, t.value) for t in studies.by_cell[0].get_trials()}
    keys = [m["key"] for m in members]
    assert told == {keys[0]: (STATE.FAIL, None), keys[1]: (STATE.FAIL, None),
                    keys[2]: (STATE.COMPLETE, 0.5)}
