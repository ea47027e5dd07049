"""``pack_size: auto`` (:mod:`sweeps.pack_size`): the ladder, the plan timed by a curve and
the K chosen from it, the reporters' clock, a bad value refused before any work, and a sweep
that measures its K on the trial's device (the probe really run, on the CPU), records it on
the parent run and keeps it on resume."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import time
from pathlib import Path

import psutil
import pytest
import yaml

from ortho_core import experiments
from ortho_core.config import from_dict
from ortho_core.errors import ConfigError
from ortho_core.reporting import Report
from sweeps import contract, pack_size
from sweeps.cli import main
from sweeps.plan import build_plan, pack_counts
from sweeps.runner import resume_sweep, run_sweep
from sweeps.spec import load_spec, resolve
from tests.sweeps import toy_experiment
from tests.sweeps.helpers import (
    DATA_DIR,
    TOY_MODULE,
    child_runs,
    new_home,
    store,
    toy_ray,
    write_spec,
)

LRS = [0.1, 0.05, 0.02, 0.01]
"""The tiny synthetic sweep's configurations: the cap of its probe is 4."""


def test_ladder_doubles_up_to_the_cap():
    assert pack_size.ladder(1) == [1]
    assert pack_size.ladder(4) == [1, 2, 4]
    assert pack_size.ladder(6) == [1, 2, 4, 6]
    assert pack_size.ladder(896) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 896]
    assert pack_size.ladder(10_000) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]


def test_iteration_seconds_on_the_line_between_measured_sizes():
    curve = {1: 100.0, 4: 200.0}  # an iteration: 10 ms at K = 1, 20 ms at K = 4
    assert pack_size.iteration_seconds(curve, 1) == pytest.approx(0.01)
    assert pack_size.iteration_seconds(curve, 2) == pytest.approx(0.01 + 0.01 / 3)
    assert pack_size.iteration_seconds(curve, 4) == pytest.approx(0.02)
    assert pack_size.iteration_seconds(curve, 8) == pytest.approx(0.04)  # in proportion
    assert pack_size.iteration_seconds({4: 200.0}, 2) == pytest.approx(0.01)


def test_plan_seconds_starts_each_pack_on_the_first_free_slot():
    curve = {1: 100.0, 2: 100.0, 3: 100.0}  # a pack of m: m × 10 ms an iteration
    # slots: [3] [2] -> the 1 goes after the 2 -> [3] [2, 1]: 30 ms
    assert pack_size.plan_seconds(curve, [3, 2, 1], 2) == pytest.approx(0.03)
    # [1] [2] -> 3 after the 1 -> [1, 3] [2]: 40 ms
    assert pack_size.plan_seconds(curve, [1, 2, 3], 2) == pytest.approx(0.04)
    assert pack_size.plan_seconds(curve, [1, 2, 3], 1) == pytest.approx(0.06)


H200_CURVE = {1: 492, 2: 1048, 4: 2120, 8: 4529, 16: 7694, 32: 7554, 64: 18391, 128: 39300,
              224: 38886}
"""The probe of synthetic-max-length's paper profile (1,000 iterations per length, T <= 50)
on one H200 shared by 4 trials (RESULTS.md, ``sweep_throughput on a GPU``): an iteration
costs about the same up to K = 128."""


def _packs_at(groups: list[int], slots: int):
    """Pack sizes of a plan whose groups have ``groups`` configurations, as
    :func:`sweeps.plan.pack` deals them."""
    def sizes(k: int) -> list[int]:
        counts = pack_counts(groups, k, slots)
        return [len(range(i, n, c)) for n, c in zip(groups, counts, strict=True)
                for i in range(c)]
    return sizes


def test_best_k_fills_one_round_where_an_iteration_costs_the_same_at_any_k():
    # M's four problems x 28 configurations x 8 seeds on 4 slots: K = 128, the smallest within
    # 10 % of the best rate, makes 8 packs of 112 in two rounds (2 x 3.3 ms an iteration);
    # K = 224 one round of 4 packs (5.8 ms)
    assert pack_size.best_k(H200_CURVE, _packs_at([224] * 4, 4), 4) == 224
    # one seed, probed with its cap of 28 in the same lease: one round of 4 packs of 28
    # (5.1 ms an iteration), not two rounds of 8 packs of 14 at K = 16 (2 x 3.5 ms)
    one_seed = {1: 443, 2: 864, 4: 1014, 8: 2277, 16: 4522, 28: 5448}
    assert pack_size.best_k(one_seed, _packs_at([28] * 4, 4), 4) == 28


def test_spread_seconds_counts_an_m_plus_first_of_the_budget_at_each_pack_size():
    linear = {1: 100.0, 4: 100.0}  # a pack of m: m × 10 ms an iteration
    # 4, 3, 2, 1 members for a fifth of the budget each: (40 + 30 + 20 + 10) / 5 ms
    assert pack_size.spread_seconds(linear, 4) == pytest.approx(0.020)
    flat = {1: 100.0, 8: 800.0}  # 10 ms at any m: the last member costs what the first did
    assert pack_size.spread_seconds(flat, 8) == pytest.approx(0.08 / 9)
    assert pack_size.spread_seconds(flat, 1) == pytest.approx(0.005)  # half its budget
    # a plan of one pack of 4 on one slot: 100 iterations, spread / whole budget
    assert pack_size.plan_seconds(linear, [4], 1, iterations=100, spread=True) == \
        pytest.approx(2.0)
    assert pack_size.plan_seconds(linear, [4], 1, iterations=100) == pytest.approx(4.0)


def test_spread_plans_cost_the_same_at_every_k_where_packing_gains_nothing():
    """A member trains the same share of its budget however it is packed: on a curve whose
    rate does not grow with K, 128 configurations on 2 slots cost the same at any K."""
    linear = {1: 100.0, 64: 100.0}
    packs_at = _packs_at([64, 64], 2)
    seconds = {k: pack_size.plan_seconds(linear, packs_at(k), 2, iterations=100, spread=True)
               for k in (1, 2, 8, 64)}
    assert seconds == pytest.approx(dict.fromkeys(seconds, 32.0))


H200_SPREAD = {1: 444, 2: 1031, 4: 1954, 8: 3805, 16: 6688, 32: 13281, 64: 29084, 128: 53788,
               256: 51167, 512: 53843, 896: 57309}
"""The probe of synthetic-max-length's paper profile with 32 seeds (3,584 configurations, a
group's cap 896; 1,000 iterations per length, T <= 50) on one H200 (RESULTS.md, ``pack_size
auto, ends spread``): flat from K = 128, where ρ(W_hh) on one host thread bounds it."""
H200_SPREAD_SETUP = {2: 0.01, 4: 0.01, 8: 0.03, 16: 0.06, 32: 0.08, 64: 0.18, 128: 0.28,
                     256: 0.5, 512: 0.46, 896: 0.66}
"""That probe's set-ups, seconds by pack size."""


def test_best_k_packs_one_round_where_members_end_apart_on_a_flat_curve():
    """In the same lease a pack of 128 of that grid trained alone in 15.0 s and one of 896 in
    33.3 s: the plan at K = 128 (28 packs in 7 rounds on 4 slots) takes 3.2 times as long as
    at K = 896 (one round). Timing every member's whole budget puts K = 896 only 7 % ahead,
    within the tolerance, so K = 128 was chosen; with the members' ends spread, K = 128 is
    1.93 times K = 896's time, and K = 512 (two rounds of 448) 10.4 % slower."""
    packs_at = _packs_at([896] * 4, 4)
    weighed = {"setup": H200_SPREAD_SETUP, "iterations": 15_000, "per_trial": 0.2}
    assert pack_size.best_k(H200_SPREAD, packs_at, 4, **weighed) == 128
    assert pack_size.best_k(H200_SPREAD, packs_at, 4, spread=True, **weighed) == 896
    seconds = {k: pack_size.plan_seconds(H200_SPREAD, packs_at(k), 4, spread=True, **weighed)
               for k in (128, 512, 896)}
    assert seconds[128] / seconds[896] == pytest.approx(1.929, abs=0.005)
    assert seconds[512] / seconds[896] == pytest.approx(1.104, abs=0.002)


def _grid_of_32_seeds(directory: Path) -> Path:
    """M's grid as the lease of ``H200_SPREAD`` ran it: four problems (a pack shape each) × 28
    learning rates × 32 seeds, 1,000 iterations at each length T = 10 ... 50."""
    doc = {"name": "grid", "experiment": "synthetic", "description": "M's grid, 32 seeds",
           "metric": {"name": "max_seq_len_solved", "mode": "max"},
           "fixed": {"seq_len": 10, "max_seq_len": 50, "max_iters": 1000},
           "space": {"task": ["temporal_order", "temporal_order_3bit", "adding", "permutation"],
                     "lr": [round(0.001 * (i + 1), 3) for i in range(28)]},
           "repeats": 32, "pack_size": "auto", "profiles": {"smoke": {}, "cpu": {}, "paper": {}}}
    path = directory / "grid.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_decide_spreads_the_ends_where_the_experiment_says_members_end_early(tmp_path,
                                                                              monkeypatch):
    spec = resolve(load_spec(str(_grid_of_32_seeds(tmp_path))), "smoke")
    params = pack_size.references(spec)
    assert len(params) == 896  # a problem's 28 × 32
    probe = pack_size.Probe(H200_SPREAD, "the cap, 896", setup=H200_SPREAD_SETUP)
    choice = pack_size.decide(spec, params, probe, 4, 17.6)
    assert choice.k == 896 and "members' ends spread over their budget" in choice.why
    assert "at most 15,000 iterations a configuration" in choice.why
    monkeypatch.setattr(experiments.get("synthetic"), "ends_early", lambda config: False)
    whole = pack_size.decide(spec, params, probe, 4, 17.6)
    assert whole.k == 128 and "ends spread" not in whole.why


@pytest.mark.parametrize(("values", "early"), [
    ({}, True),  # M's curriculum, settled at the first deciding validation
    ({"settle_early": False}, True),  # the curriculum still stops at a failed length
    ({"settle_early": False, "max_seq_len": 15}, False),  # one length, trained to its end
    ({"settle_early": False, "protocol": "fixed"}, False),
    ({"protocol": "fixed"}, True),
    ({"settle_early": False, "max_seq_len": 20}, True),  # T = 10 and 20
    ({"settle_early": False, "max_seq_len": 19}, False),  # T = 10 alone
    ({"protocol": "fixed", "max_iters": 100, "eval_every": 100}, False),  # one validation
])
def test_synthetic_members_end_early_unless_they_train_one_length_to_its_end(values, early):
    module = experiments.get("synthetic")
    config = from_dict(module.Config, {"seq_len": 10, "max_seq_len": 50, **values})
    assert module.ends_early(config) is early
    assert not module.ends_early(module.probe_config(config))  # the probe's packs stay whole


@pytest.mark.parametrize("spec_fields", [
    {"fixed": {}, "space": {"x": [i / 10 for i in range(7)], "steps": [2, 3]}},
    {"fixed": {"steps": 2}, "space": {"x": {"low": 0.0, "high": 1.0}},
     "search": {"kind": "optuna", "sampler": "random", "n_trials": 7, "seed": 0}},
    {"fixed": {}, "space": {"x": {"low": 0.0, "high": 1.0}, "steps": {"choice": [2, 3]}},
     "search": {"kind": "optuna", "sampler": "random", "n_trials": 5, "seed": 0}},
], ids=["grid", "optuna", "optuna-pack-field"])
def test_plan_packs_are_the_trials_the_planner_makes_at_every_k(tmp_path, monkeypatch,
                                                                 spec_fields):
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)
    spec = resolve(load_spec(str(write_spec(tmp_path, pack_size="auto", **spec_fields))),
                   "smoke")
    for slots in (1, 2, 3, 4):
        sizes = pack_size.plan_packs(spec, slots)
        for k in range(1, 9):
            plan = build_plan(dataclasses.replace(spec, pack_size=k), slots=slots)
            planned = [len(p) for p in plan.packs]
            planned += [n for cell in plan.optuna_cells for n in plan.optuna_batches[cell]]
            assert sizes(k) == planned, (slots, k)
            assert len(planned) == plan.n_tune_trials and sum(planned) == plan.n_todo


def test_setup_seconds_on_the_line_between_measured_sizes_and_past_them():
    setup = {2: 0.1, 4: 0.2, 8: 0.6}
    assert pack_size.setup_seconds(setup, 1) == pytest.approx(0.1)  # below: the smallest
    assert pack_size.setup_seconds(setup, 3) == pytest.approx(0.15)
    assert pack_size.setup_seconds(setup, 6) == pytest.approx(0.4)
    assert pack_size.setup_seconds(setup, 16) == pytest.approx(1.4)  # the last two's line
    assert pack_size.setup_seconds({}, 16) == 0.0


def test_plan_seconds_adds_each_pack_s_set_up_to_its_iterations():
    curve = {1: 100.0, 2: 100.0, 3: 100.0}  # a pack of m: m × 10 ms an iteration
    setup = {1: 1.0, 3: 2.0}
    # [3] [2, 1] over 50 iterations: 2 + 1.5 = 3.5 s against 1.5 + 1 + 0.5 + 1 = 4 s
    assert pack_size.plan_seconds(curve, [3, 2, 1], 2, setup, 50) == pytest.approx(4.0)


CPU_CURVE = {1: 972, 2: 1653, 4: 2585, 8: 3474, 16: 4259, 32: 4631, 64: 4649, 128: 4639}
"""The probe of synthetic-max-length's paper profile on this project's 2-core CPU (RESULTS.md,
``pack_size auto, a larger sweep on this CPU``): the rate levels off from K = 32."""


def test_best_k_packs_larger_where_set_up_outweighs_a_short_budget():
    setup = {2: 0.05, 4: 0.06, 8: 0.08, 16: 0.1, 32: 0.15, 64: 0.25, 128: 0.45}
    packs_at = _packs_at([896] * 4, 2)  # 3,584 configurations on 2 slots
    # iterations alone: K = 16, within 10 % of the fastest rate
    assert pack_size.best_k(CPU_CURVE, packs_at, 2) == 16
    # 20 iterations a configuration: K = 16's 224 packs spend 11 s of 19.6 s setting up;
    # K = 64's 56 packs take 14.7 s, within 10 % of K = 128's 14.0 s
    assert pack_size.best_k(CPU_CURVE, packs_at, 2, setup=setup, iterations=20) == 64
    # M's 100,000 iterations at each length: set-up is noise again
    assert pack_size.best_k(CPU_CURVE, packs_at, 2, setup=setup, iterations=100_000) == 16
    # and a trial's own cost besides: 0.2 s x 112 trials a slot at K = 16 (30.8 s) against
    # 14 at K = 128 (10.5 s, fastest) and 28 at K = 64 (13.3 s, not within 10 %)
    assert pack_size.best_k(CPU_CURVE, packs_at, 2, setup={}, iterations=20,
                            per_trial=0.2) == 128


def test_best_k_keeps_packs_small_where_larger_ones_save_little():
    curve = {1: 100, 2: 150, 4: 190, 8: 205}  # a CPU's: the rate levels off
    # 64 configurations on 2 slots: K = 8 in 4 rounds (156 ms), K = 4 in 8 (168 ms, within
    # 10 %), K = 2 in 16 (213 ms)
    assert pack_size.best_k(curve, _packs_at([64], 2), 2) == 4
    assert pack_size.best_k(curve, _packs_at([64], 2), 2, tolerance=0.0) == 8
    assert pack_size.best_k({1: 100, 2: 95}, _packs_at([2], 1), 1) == 1


def test_the_clock_counts_the_iterations_each_member_trained():
    clock = pack_size.Clock()
    for member, step in [(0, 0), (1, 0), (0, 100), (1, 100), (0, 300), (1, 200)]:
        clock(Report(member=member, step=step, metrics={}))
    assert clock.trained() == 500


@pytest.mark.parametrize(("name", "values", "budget"), [
    # T = 10 ... 50: 1,000 iterations at each, one at T costing T / 10 of one at 10
    ("synthetic", {"max_iters": 1000, "seq_len": 10, "max_seq_len": 50}, 15000),
    ("synthetic", {"max_iters": 1000, "seq_len": 10, "max_seq_len": 55}, 15000),
    ("synthetic", {"max_iters": 100, "seq_len": 20, "seq_len_step": 30, "max_seq_len": 80},
     750),  # T = 20, 50, 80: 100 × (1 + 2.5 + 4)
    ("synthetic", {"max_iters": 20, "protocol": "fixed", "seq_len": 10, "max_seq_len": 50}, 20),
    ("ff-mnist", {"epochs": 3, "train_size": 1000, "batch_size": 128}, 21),
    ("ff-mnist", {"epochs": 2, "batch_size": 100}, 1200),
    ("pixel-mnist", {"max_iters": 300}, 300),
])
def test_each_iteration_budget_counts_a_configuration_s_iterations(name, values, budget):
    module = experiments.get(name)
    assert module.iteration_budget(from_dict(module.Config, values)) == budget


class FakeTime:
    """A clock that only moves when something sleeps: the rates below are exact."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    monotonic = perf_counter

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def fake_time(monkeypatch) -> FakeTime:
    """The clock of :mod:`sweeps.pack_size` and the sleep of the toy trainer, made one."""
    fake = FakeTime()
    monkeypatch.setattr(pack_size, "time", fake)
    monkeypatch.setattr(toy_experiment, "time", fake)
    return fake


def test_clock_measures_configs_iterations_per_second(fake_time):
    """The toy trainer reports steps 0..4 with a sleep of 0.02 s after each: timed from step 1
    (t = 0.02) to step 4 (t = 0.08), two members train 3 iterations each in 0.06 s."""
    configs = [toy_experiment.Config(x=x, steps=5, sleep=0.02) for x in (0.1, 0.2)]
    assert pack_size.measure(toy_experiment, configs).rate() == pytest.approx(100.0)


def test_clock_starts_at_the_first_report_after_training_began(fake_time):
    """A report at step 0 precedes the first iterations and their one-off costs (here a
    0.3 s pause): timed from the report at step 10, 20 iterations take 0.02 s; timed from
    step 0 they would be 30 in 0.32 s (94 per second)."""
    clock = pack_size.Clock()
    clock(Report(member=0, step=0, metrics={}))
    fake_time.sleep(0.3)
    for step in (10, 20, 30):
        clock(Report(member=0, step=step, metrics={}))
        fake_time.sleep(0.01)
    assert clock.rate() == pytest.approx(1000.0)


def test_the_time_limit_stops_the_ladder_before_a_second_point_that_would_pass_it(
        fake_time, monkeypatch):
    """The first point trains 10 iterations in 10 s: a second of 2 members is foreseen at
    20 s, past a limit of 15 s, so the ladder ends at K = 1; under a limit of 25 s it goes
    on, and stops before K = 4 (foreseen at 40 s, in proportion to K from K = 2's 20 s)."""
    monkeypatch.setattr("sweeps.trial.limit_threads", lambda cpus: 1)
    params = [{"x": 0.1, "steps": 11, "sleep": 1.0}] * 4
    short = pack_size.probe_curve(TOY_MODULE, params, cpus=1, gpu=0, seconds=15)
    assert set(short.curve) == {1} and short.ended.startswith("the time limit")
    longer = pack_size.probe_curve(TOY_MODULE, params, cpus=1, gpu=0, seconds=25)
    assert set(longer.curve) == {1, 2} and longer.ended.startswith("the time limit")


def test_extrapolate_a_fixed_part_and_a_part_per_member():
    # 2 s of set-up and 0.5 s a member: K = 8 costs 6 s; from one point, in proportion to K
    assert pack_size.extrapolate({2: 3.0, 4: 4.0}, 8) == pytest.approx(6.0)
    assert pack_size.extrapolate({2: 3.0}, 4) == pytest.approx(6.0)
    # never below the last point, even when a smaller pack happened to cost more
    assert pack_size.extrapolate({2: 5.0, 4: 4.0}, 8) == pytest.approx(4.0)
    assert pack_size.extrapolate({1: 9.0, 2: 3.0, 4: 4.0}, 8) == pytest.approx(6.0)


@pytest.mark.parametrize("name", ["ff-mnist", "pixel-mnist"])  # synthetic: below
def test_each_hook_gives_a_probe_the_clock_can_time(name):
    """The probe configuration keeps the cost-setting fields and reports with iterations in
    between (else the ladder would measure nothing)."""
    module = experiments.get(name)
    full = from_dict(module.Config, {"data_dir": DATA_DIR})
    probe = module.probe_config(full)
    for key in ("hidden", "batch_size", "device"):
        assert getattr(probe, key) == getattr(full, key)
    clock = pack_size.measure(module, [probe])
    assert clock.rate() is not None and clock.rate() > 0
    assert clock.trained() == module.iteration_budget(probe)  # its whole budget, reported


def test_the_synthetic_probe_times_a_pack_of_one_whose_member_solves_at_once():
    """The cpu profile's first configuration solves its probe's first validation: the probe
    keeps it training (``settle_early`` off), so K = 1 has a rate and the member all three
    validations."""
    module = experiments.get("synthetic")
    spec = resolve(load_spec("synthetic-max-length"), "cpu")
    probe = module.probe_config(from_dict(module.Config, pack_size.references(spec)[0]))
    assert not probe.settle_early
    settled = dataclasses.replace(probe, settle_early=True)
    reports: list[Report] = []
    (result,) = module.train([settled], reports.append)
    assert result.summary["total_iters"] < probe.max_iters  # it would have left the pack
    assert module.ends_early(settled) and not module.ends_early(probe)
    clock = pack_size.Clock()
    (result,) = module.train([probe], clock)
    assert result.summary["total_iters"] == probe.max_iters
    assert clock.rate() is not None and clock.rate() > 0
    assert clock.trained() == module.iteration_budget(probe)


@pytest.mark.parametrize("value", ["big", 0, -2])
def test_bad_pack_size_exits_2_naming_the_field(tmp_path, capsys, monkeypatch, value):
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)
    path = write_spec(tmp_path, pack_size=value)
    assert main(["sweep", "run", str(path), "--home", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert re.search(rf"toy\.yaml:\d+: pack_size: expected an integer > 0 or auto "
                     rf"\(got {re.escape(repr(value))}\)", err), err
    assert not (tmp_path / "runs").exists()


def _synthetic_spec(directory: Path) -> Path:
    """Four tiny synthetic configurations (one pack shape), ``pack_size: auto``."""
    doc = {"name": "tiny", "experiment": "synthetic", "description": "auto packs",
           "metric": {"name": "max_seq_len_solved", "mode": "max"},
           "fixed": {"task": "adding", "protocol": "fixed", "seq_len": 10, "hidden": 10,
                     "batch_size": 10, "max_iters": 20, "eval_every": 10, "val_size": 40},
           "space": {"lr": LRS}, "pack_size": "auto",
           "profiles": {"smoke": {}, "cpu": {}, "paper": {}}}
    path = directory / "tiny.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_recorded_k_replaces_auto_and_a_sweep_without_it_is_refused(tmp_path):
    spec = resolve(load_spec(str(_synthetic_spec(tmp_path))), "smoke")
    assert spec.pack_size == "auto"
    assert [p["lr"] for p in pack_size.references(spec)] == LRS  # the cap: all four
    with pytest.raises(ValueError, match="settle it before planning"):
        build_plan(spec)
    sized = pack_size.recorded(spec, {contract.PACK_SIZE: "3"})
    assert sized.pack_size == 3 and sized.sha256 == spec.sha256  # the resume's check holds
    assert [len(p) for p in build_plan(sized).packs] == [2, 2]
    for tags in ({}, {contract.PACK_SIZE: "0"}, {contract.PACK_SIZE: "many"}):
        with pytest.raises(ConfigError) as err:
            pack_size.recorded(spec, tags)
        assert err.value.field == "pack_size"


def test_auto_under_a_scheduler_is_one_without_probing(tmp_path):
    path = _synthetic_spec(tmp_path)
    doc = yaml.safe_load(path.read_text())
    doc["scheduler"] = {"kind": "asha", "metric_step": "val_error", "mode": "min"}
    path.write_text(yaml.safe_dump(doc))
    sized, tags = pack_size.settle(resolve(load_spec(str(path)), "smoke"))
    assert sized.pack_size == 1  # no Ray here: a probe would have failed
    assert tags == {contract.PACK_SIZE: "1", contract.PACK_SIZE_CURVE: "{}",
                    contract.PACK_SIZE_SETUP: "{}"}


@pytest.mark.usefixtures(toy_ray.__name__)
def test_the_probe_worker_exits_after_the_probe(tmp_path):
    """The probe's Ray worker holds the trainer's data and, on a GPU, a CUDA context and its
    cached memory: it must exit once the curve is measured, so that the trials get them. The
    toy trainer writes the pid of each process that trains a configuration."""
    counters = tmp_path / "counters"
    counters.mkdir()
    path = write_spec(tmp_path, pack_size="auto",
                      fixed={"steps": 4, "sleep": 0.01, "counter_dir": str(counters)})
    choice = pack_size.choose(resolve(load_spec(str(path)), "smoke"))
    assert set(choice.curve) == {1, 2, 4}  # the ladder up to the cap, all four values of x
    pids = {int(pid) for f in counters.glob("*.count") for pid in f.read_text().split()}
    assert len(pids) == 1 and os.getpid() not in pids
    deadline = time.monotonic() + 30
    while psutil.pid_exists(pids.copy().pop()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not psutil.pid_exists(pids.pop())


@pytest.mark.usefixtures(toy_ray.__name__)
def test_the_probe_reads_the_data_dir_the_trials_get(tmp_path, monkeypatch):
    """``--data-dir`` on a cluster reaches the trials through their runtime environment; the
    probe, a task of its own, gets the same (it read the nodes' default folder and failed,
    leaving K at the default)."""
    import ray

    asked: list[dict] = []
    real = ray.remote
    monkeypatch.setattr(ray, "remote", lambda **kw: asked.append(kw) or real(**kw))
    path = write_spec(tmp_path, pack_size="auto", fixed={"steps": 4, "sleep": 0.01})
    wanted = {"ORTHO_DATA_DIR": str(tmp_path)}
    choice = pack_size.choose(resolve(load_spec(str(path)), "smoke"), trial_env=wanted)
    assert set(choice.curve) == {1, 2, 4}  # measured, with the environment Ray was given
    assert asked[-1]["runtime_env"] == {"env_vars": wanted}


@pytest.mark.usefixtures(toy_ray.__name__)
def test_auto_measures_records_and_keeps_k_on_resume(tmp_path, monkeypatch):
    home = new_home(tmp_path)
    out = io.StringIO()
    final = run_sweep(str(_synthetic_spec(tmp_path)), "smoke", home=home, stream=out)
    assert final.state == "finished" and final.done == len(LRS) and final.failed == 0

    t = store(home)
    record = t.find_sweep(final.sweep_id)
    tags = t.client.get_run(record.ref.parent_run_id).data.tags
    k = int(tags[contract.PACK_SIZE])
    curve = {int(n): rate for n, rate in json.loads(tags[contract.PACK_SIZE_CURVE]).items()}
    assert 1 <= k <= len(LRS)
    assert set(curve) == {1, 2, 4}  # the ladder up to the cap, within its time limit
    assert all(rate > 0 for rate in curve.values())
    setup = {int(n): s for n, s in json.loads(tags[contract.PACK_SIZE_SETUP]).items()}
    assert set(setup) == {2, 4}  # the first point pays one-off costs
    assert all(seconds >= 0 for seconds in setup.values())
    spec = resolve(load_spec(str(_synthetic_spec(tmp_path))), "smoke")
    budget = 20  # the fixed protocol's max_iters
    # its members settle at the first validation that decides them: their ends spread
    assert k == pack_size.best_k(curve, pack_size.plan_packs(spec, 2), 2, setup=setup,
                                 iterations=budget, per_trial=pack_size.TRIAL_SECONDS,
                                 spread=True)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"pack_size auto: {k} (configs·iterations/s by pack size 1: ")
    trials = sum(pack_counts([len(LRS)], k, slots=2))  # the embedded Ray's 2 CPUs
    assert f"{len(LRS)} configurations in {trials} trials" in lines[1]
    keys = {r.data.tags[contract.TRIAL_KEY] for r in child_runs(home, final.sweep_id)}
    assert len(keys) == len(LRS)

    # Interrupted after the fact: every run KILLED, so the resume trains all four again,
    # packed by the recorded K; a second probe would fail the test.
    for run in child_runs(home, final.sweep_id):
        t.client.set_terminated(run.info.run_id, "KILLED")
    t.client.set_terminated(record.ref.parent_run_id, "KILLED")
    monkeypatch.setattr(pack_size, "choose", lambda *_: pytest.fail("probed again"))
    out = io.StringIO()
    resumed = resume_sweep(final.sweep_id, home=home, stream=out, force=True)
    assert resumed.state == "finished" and resumed.done == len(LRS)
    assert (f"{len(LRS)} to run in {trials} trials (packs of up to {k}, as its first run "
            "measured)") in out.getvalue()
    assert "pack_size auto" not in out.getvalue()
    assert {r.data.tags[contract.TRIAL_KEY] for r in child_runs(home, final.sweep_id)} == keys
    tags = t.client.get_run(record.ref.parent_run_id).data.tags
    assert tags[contract.PACK_SIZE] == str(k)
