"""Screened validation of the synthetic trainer (``screen_size``): the same solved, unsolved,
diverged and stalled decisions as the full protocol, screen numbers reported apart, and the
field's validation."""

from __future__ import annotations

import math

import pytest
import torch

from ortho_core.config import from_dict
from ortho_core.data.synthetic import get_task
from ortho_core.errors import ConfigError
from ortho_core.experiments.synthetic import (
    ADDED_FIELDS,
    PACK_FIELDS,
    Config,
    _solved,
    initial_weights,
    train,
)
from ortho_core.experiments.synthetic_stage import EVAL_KEYS, Stage, report_metrics
from ortho_core.reporting import Outcome, Report
from sweeps.spec import load_spec
from sweeps.spec.cells import expand, trial_key
from sweeps.spec.profiles import Effective

VAL, SCREEN = 200, 50
"""Validation set and screen of the forced-error tests."""
CPU = torch.device("cpu")


def forced_stage(configs: list[Config], wrong_at: list[int]) -> Stage:
    """A temporal-order stage whose members all answer class 0 (W_hy = 0, b_y favours 0) on a
    validation set relabelled 0 except at ``wrong_at``: exactly those samples are wrong."""
    task = get_task("temporal_order")
    weights, _ = initial_weights(configs, task, torch.float64, CPU)
    weights[3] = torch.zeros_like(weights[3])
    weights[4] = torch.tensor([[5.0, 0.0, 0.0, 0.0]] * len(configs), dtype=torch.float64)
    stage = Stage(configs, task, 10, weights, torch.float64, CPU)
    ((_, y),) = stage.val
    y.zero_()
    y[wrong_at] = 2
    return stage


def member(**kw) -> Config:
    base = {"hidden": 8, "val_size": VAL, "protocol": "fixed", "dtype": "float64"}
    return Config(**{**base, **kw})


PACK = ({}, {"success": "under_one_percent"}, {"patience": 100})
"""Members ``zero_errors``, ``under_one_percent`` and ``zero_errors`` with ``patience``."""


@pytest.mark.parametrize(("wrong_at", "screened", "solved"), [
    ([], [0, 0, 0], [1, 1, 1]),
    ([120], [0, 0, 0], [0, 1, 0]),             # outside the screen: only the rest shows it
    ([10], [1, 0, 0], [0, 1, 0]),              # 1 of 200 = 0.5 %: G's criterion solves
    ([10, 20], [1, 1, 0], [0, 0, 0]),          # 2 of 200 = 1 % on the screen alone
    ([10, 120], [1, 0, 0], [0, 0, 0]),         # 1 % only with the rest
])
def test_forced_errors_decide_as_the_full_protocol(wrong_at, screened, solved):
    full = forced_stage([member(**kw) for kw in PACK], wrong_at).evaluate()
    stage = forced_stage([member(screen_size=SCREEN, **kw) for kw in PACK], wrong_at)
    got = stage.evaluate()
    assert got[:, -1].tolist() == screened
    n = len(EVAL_KEYS)
    for i, kw in enumerate(PACK):
        assert got[i, n].item() == full[i, n].item() == 0.0                  # diverged
        # the trainer's decision on the full evaluation, against the column's (M, G §4.1)
        decided = _solved(member(**kw), full[i, 2].item(), full[i, n + 1].item())
        assert decided == bool(solved[i])
        if screened[i]:
            in_screen = sum(p < SCREEN for p in wrong_at)
            assert got[i, n + 1].item() == in_screen
            assert got[i, 2].item() == in_screen / SCREEN
            metrics = report_metrics(got[i].tolist())
            assert metrics["val_error_screen"] == in_screen / SCREEN
            assert "val_error" not in metrics and "val_accuracy" not in metrics
            assert "val_loss" not in metrics and math.isfinite(metrics["val_loss_screen"])
        else:
            torch.testing.assert_close(got[i], full[i, :-1].new_tensor(
                [*full[i, :-1].tolist(), 0.0]), rtol=1e-12, atol=0)
            assert full[i, n + 1].item() == len(wrong_at)
            assert set(report_metrics(got[i].tolist())) == set(EVAL_KEYS)


def test_the_last_evaluation_of_a_budget_is_on_the_full_set():
    stage = forced_stage([member(screen_size=SCREEN)], [10, 120])
    assert stage.evaluate()[0, -1] == 1.0
    final = stage.evaluate(final=True)[0]
    assert final[-1] == 0.0 and final[len(EVAL_KEYS) + 1] == 2.0 and final[2] == 2 / VAL


def test_diverged_or_unbounded_members_are_not_screened():
    """Non-finite weights and a stopped member are diverged under both protocols; weights
    too large to bound the loss (b_y = 10³⁰⁰ in float64) are validated on the full set."""
    configs = [member(screen_size=SCREEN, seed=i) for i in range(4)]
    stage = forced_stage(configs, [10])
    with torch.no_grad():
        stage.model.w_hh[0, 0, 0] = math.nan
        stage.model.b_y[2, 0] = 1e300
    stage.active[1] = False
    row = stage.evaluate()
    n = len(EVAL_KEYS)
    assert row[:, n].tolist() == [1.0, 1.0, 0.0, 0.0]
    assert row[:, -1].tolist() == [0.0, 0.0, 0.0, 1.0]
    assert row[2, 2] == 1 / VAL and row[3, 2] == 1 / SCREEN
    assert stage.active.tolist() == [False, False, True, True]


def test_a_split_validation_set_keeps_every_sequence_once():
    """With length jitter the set is groups of ``batch_size``; the screen cuts one group."""
    cfg = member(screen_size=30, batch_size=20, length_jitter=True, val_size=70)
    weights, _ = initial_weights([cfg], get_task("temporal_order"), torch.float64, CPU)
    stage = Stage([cfg], get_task("temporal_order"), 10, weights, torch.float64, CPU)
    assert [len(y) for _, y in stage.screen] == [20, 10]
    assert [len(y) for _, y in stage.rest] == [10, 20, 10]
    joined = torch.cat([y for _, y in stage.screen + stage.rest])
    assert torch.equal(joined, torch.cat([y for _, y in stage.val]))


def run(configs: list[Config]) -> tuple[list, dict[int, list[Report]]]:
    reports: dict[int, list[Report]] = {}
    results = train(configs, lambda r: reports.setdefault(r.member, []).append(r))
    return results, reports


def test_a_screened_pack_trains_to_the_same_outcomes_as_the_full_protocol():
    """A max-length pack with members that solve (both criteria), stall, diverge and never
    solve, trained with identical seeds both ways: every stage, summary and full-set report
    agrees; the screened run's other reports are screen numbers at the same steps."""
    base = {"hidden": 32, "val_size": 400, "eval_every": 50, "max_iters": 300,
            "protocol": "max_length", "seq_len": 10, "seq_len_step": 10, "max_seq_len": 40,
            "dtype": "float64"}
    kinds = [{"variant": "oinit", "lr": 0.1},
             {"variant": "oinit", "lr": 0.1, "seed": 1, "success": "under_one_percent"},
             {"variant": "plain", "lr": 1e-300, "seed": 2, "patience": 100},
             {"variant": "open", "lr": 1.0, "penalty": 1e4, "seed": 3},
             {"variant": "plain", "lr": 1e-3, "seed": 4}]
    full_results, full_reports = run([Config(**base, **k) for k in kinds])
    results, reports = run([Config(**base, **k, screen_size=40) for k in kinds])
    outcomes = [r.outcome for r in full_results]
    assert Outcome.SOLVED in outcomes and Outcome.DIVERGED in outcomes
    assert Outcome.UNSOLVED in outcomes
    assert full_results[2].summary["stalled"] == 1.0
    screened = 0
    for i, (a, b) in enumerate(zip(full_results, results, strict=True)):
        assert a.outcome == b.outcome
        assert [(s["seq_len"], s["outcome"], s["iters"]) for s in a.artifacts["stages"]] == \
            [(s["seq_len"], s["outcome"], s["iters"]) for s in b.artifacts["stages"]]
        for key, value in a.summary.items():
            if key != "wall_time":
                assert b.summary[key] == pytest.approx(value, rel=1e-9, nan_ok=True), key
        assert [r.step for r in full_reports[i]] == [r.step for r in reports[i]]
        for fr, sr in zip(full_reports[i], reports[i], strict=True):
            if "val_error_screen" in sr.metrics:
                screened += 1
                assert fr.metrics["val_error"] > 0 and sr.metrics["val_error_screen"] > 0
                assert sr.metrics["train_loss"] == pytest.approx(fr.metrics["train_loss"],
                                                                 rel=1e-9)
            else:
                assert sr.metrics == pytest.approx(fr.metrics, rel=1e-9, nan_ok=True)
    assert screened >= 5
    assert all("val_error" in r.metrics for rs in reports.values() for r in rs[-1:])


@pytest.mark.parametrize("value", [0, -1, 200, 300, 1.5, True])
def test_screen_size_must_be_below_val_size(value):
    with pytest.raises(ConfigError) as err:
        member(screen_size=value)
    assert err.value.field == "screen_size"


def test_screen_size_is_a_pack_field_that_keeps_old_trial_keys():
    assert from_dict(Config, {"screen_size": "none"}).screen_size is None
    assert from_dict(Config, {"screen_size": "1000"}).screen_size == 1000
    assert "screen_size" in PACK_FIELDS and "screen_size" in ADDED_FIELDS
    params = {"task": "adding", "lr": 0.01}
    assert trial_key("synthetic", params) == trial_key("synthetic",
                                                       {**params, "screen_size": None})
    assert trial_key("synthetic", params) != trial_key("synthetic",
                                                       {**params, "screen_size": 1000})


def test_the_paper_and_cpu_profiles_screen_on_a_tenth_of_their_validation_sets():
    spec = load_spec("synthetic-max-length")
    for profile, screen, val_size in (("paper", 1000, 10_000), ("cpu", 100, 1000),
                                      ("smoke", None, 200)):
        cells = expand(Effective.of(spec, profile), spec.source)
        assert {c.params.get("screen_size") for c in cells} == {screen}
        assert {c.params["val_size"] for c in cells} == {val_size}
