"""Packs: grid configurations grouped by the trainer's PACK_FIELDS, dealt evenly, and as many
as fill the trials that run at once."""

from __future__ import annotations

import pytest

from ortho_core import experiments
from sweeps.plan import build_plan, deal, fill_slots, pack_counts
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


def test_deal_gives_neighbours_to_different_chunks():
    assert [len(c) for c in deal(range(17), 2)] == [9, 8]
    assert [len(c) for c in deal(range(5), 1)] == [5]
    assert deal([], 0) == []
    # a cheap group then a dear one (ff-mnist: FF, then FF+OPEN) shares itself out
    assert deal(["ff"] * 3 + ["open"] * 3, 2) == [["ff", "ff", "open"], ["ff", "open", "open"]]


@pytest.mark.parametrize(("sizes", "pack_size", "slots", "counts"), [
    ([17], 16, 1, [2]),
    ([18], 6, 1, [3]),
    ([18], 6, 2, [4]),             # 5, 5, 4, 4: no last pack alone on one of two cores
    ([18], 6, 3, [3]),             # already a multiple
    ([3, 9], 3, 2, [1, 3]),
    ([3, 9], 3, 4, [1, 3]),
    ([3, 9], 3, 8, [3, 5]),        # the widest packs split first: none holds more than 2
    ([1, 1, 1], 3, 2, [1, 1, 1]),  # nothing left to split
    ([2], 4, 16, [2]),
])
def test_pack_counts_fill_the_slots(sizes, pack_size, slots, counts):
    assert pack_counts(sizes, pack_size, slots) == counts


def test_a_plan_fills_the_slots_and_keeps_every_configuration_once(tmp_path):
    path = write_spec(tmp_path, fixed={}, space={"x": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
                                                  "steps": [2, 3, 4]}, pack_size=6)
    spec = resolve(load_spec(str(path)), "smoke")
    one = build_plan(spec)
    two = build_plan(spec, slots=2)
    assert [len(p) for p in one.packs] == [6, 6, 6]
    assert [len(p) for p in two.packs] == [3, 3, 6, 6]
    assert fill_slots(one, 6, 2).packs == two.packs
    for plan in (one, two):
        assert sorted(m.key for p in plan.packs for m in p) == sorted(
            trial_key("toy", c.params) for c in spec.cells())
        assert all(len({m.params["steps"] for m in p}) == 1 for p in plan.packs)


def test_optuna_batches_fill_the_slots(tmp_path):
    """An Optuna cell's 6 trials at pack_size 6: one batch on one slot, two of 3 on two
    slots (not one of 6 while the other slot idles), and on resume what is left refilled."""
    path = write_spec(tmp_path, fixed={"steps": 2}, space={"x": {"low": 0.0, "high": 1.0}},
                      pack_size=6, search={"kind": "optuna", "sampler": "random",
                                           "n_trials": 6, "seed": 0})
    spec = resolve(load_spec(str(path)), "smoke")
    one, two = build_plan(spec), build_plan(spec, slots=2)
    assert (one.optuna_batches, one.n_tune_trials) == ({0: (6,)}, 1)
    assert (two.optuna_batches, two.n_tune_trials) == ({0: (3, 3)}, 2)
    resumed = fill_slots(build_plan(spec, done={0: 1}), 6, 2)
    assert (resumed.optuna_batches, resumed.n_tune_trials) == ({0: (3, 2)}, 2)
    assert fill_slots(one, 6, 2).optuna_batches == two.optuna_batches


@pytest.mark.parametrize(("n_trials", "pack_size", "slots", "batches"), [
    (9, 9, 6, (2, 2, 2, 1, 1, 1)),  # ceil(9 / 2) = 5 batches of 2 left a slot idle
    (59, 8, 7, (5,) * 3 + (4,) * 11),  # 14 trials, two full rounds, none over 8
    (5, 4, 2, (3, 2)),
    (1, 6, 4, (1,)),
])
def test_an_optuna_cell_s_batches_fill_the_slots_round_by_round(tmp_path, n_trials, pack_size,
                                                                slots, batches):
    path = write_spec(tmp_path, fixed={"steps": 2}, space={"x": {"low": 0.0, "high": 1.0}},
                      pack_size=pack_size, search={"kind": "optuna", "sampler": "random",
                                                   "n_trials": n_trials, "seed": 0})
    plan = build_plan(resolve(load_spec(str(path)), "smoke"), slots=slots)
    assert (plan.optuna_batches[0], plan.n_tune_trials, plan.n_todo) == (
        batches, len(batches), n_trials)


def test_an_optuna_cell_searching_a_pack_field_is_searched_one_point_per_trial(tmp_path):
    """``steps`` is one of the toy's ``PACK_FIELDS``: points that differ in it cannot share a
    pack, so its cell gets batches of one while a cell searching ``x`` alone is packed."""
    search = {"kind": "optuna", "sampler": "random", "n_trials": 6, "seed": 0}
    searched = write_spec(tmp_path, name="steps", fixed={}, pack_size=6, search=search,
                          space={"x": {"low": 0.0, "high": 1.0},
                                 "steps": {"choice": [2, 3]}})
    plan = build_plan(resolve(load_spec(str(searched)), "smoke"), slots=2)
    assert (plan.optuna_batches, plan.n_tune_trials) == ({0: (1,) * 6}, 6)
    packed = write_spec(tmp_path, name="x", fixed={"steps": 2}, pack_size=6, search=search,
                        space={"x": {"low": 0.0, "high": 1.0}})
    plan = build_plan(resolve(load_spec(str(packed)), "smoke"), slots=2)
    assert (plan.optuna_batches, plan.n_tune_trials) == ({0: (3, 3)}, 2)
