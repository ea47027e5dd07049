"""Every registered experiment's ``planned_steps``: the step of the last report of a member that
trains its whole budget, checked against what the trainer reports on small configurations
(the edge cases of each numbering among them: a smaller last batch, a remainder left out of
an epoch, checkpoints that do not divide the run, songs split into pieces, a curriculum of
two lengths); and, where the protocol can end a member sooner (``ends_early``), a member
that does so reports a last step below it."""

from __future__ import annotations

from typing import Any

import pytest

from ortho_core.experiments import EXPERIMENTS, get
from ortho_core.reporting import Report

pytestmark = pytest.mark.usefixtures("shared_data")

SOLVER = {"variant": "oinit", "lr": 0.1, "hidden": 32, "val_size": 200, "eval_every": 100,
          "max_iters": 300, "protocol": "max_length", "seq_len": 10, "seq_len_step": 5,
          "max_seq_len": 15}
"""A synthetic member that solves temporal order at T = 10 and 15 (its curriculum) within
300 iterations, each at a validation before the length's last."""

WHOLE: dict[str, list[dict[str, Any]]] = {
    # both lengths solved at their last validation: 2 × 300 iterations; and a fixed length
    "synthetic": [SOLVER | {"settle_early": False},
                  {"hidden": 8, "val_size": 50, "eval_every": 40, "max_iters": 90,
                   "protocol": "fixed", "lr": 0.001}],
    # 7 matrices in batches of 3 (the last batch one), for both distributions: 14
    "orth-pretrain-convergence": [{"repeats": 7, "size": 10, "batch": 3}],
    # 210 images in minibatches of 20: 200 samples an epoch, 400 in all; checkpoints every
    # 60 samples, the last at 360 (18 minibatches), and after each epoch (20)
    "ff-mnist": [{"layers": 2, "hidden": 16, "epochs": 2, "train_size": 210,
                  "test_size": 100, "eval_every": 60},
                 {"layers": 2, "hidden": 16, "epochs": 2, "train_size": 210,
                  "test_size": 100}],
    # 100 images in minibatches of 32: 3 an epoch, 6 in all
    "lcw-mlp": [{"variant": "plain", "layers": 2, "hidden": 16, "batch_size": 32,
                 "epochs": 2, "train_size": 100, "test_size": 50, "diagnostics": False}],
    # 12 songs split into pieces of 20 steps (far more than 12) in minibatches of 5; and 12
    # windows in minibatches of 5 for 4 epochs, evaluated every 3 (and at the last)
    "polyphonic": [{"dataset": "jsb_chorales", "hidden": 6, "epochs": 2, "train_size": 12,
                    "max_len": 20, "batch_size": 5, "cut": "split", "dtype": "float64"},
                   {"dataset": "jsb_chorales", "hidden": 6, "epochs": 4, "train_size": 12,
                    "max_len": 20, "batch_size": 5, "eval_every": 3, "dtype": "float64"}],
    # one report per time step: 12
    "temporal-gradients": [{"seq_len": 12, "samples": 10, "hidden": 8}],
    # 25 steps, evaluated every 10 and at the last
    "deep-orthogonal": [{"variant": "orth", "layers": 4, "hidden": 2, "max_iters": 25,
                         "eval_every": 10}],
    # 5 iterations at T = 784, evaluated every 2 and at the last
    "pixel-mnist": [{"variant": "plain", "hidden": 8, "max_iters": 5, "eval_every": 2,
                     "test_size": 20}],
}
"""Per experiment, small configurations whose members train their whole budget (none
diverges, none is ended by its protocol)."""

EARLY: dict[str, list[dict[str, Any]]] = {
    # solves T = 10 at a validation before its 300th iteration
    "synthetic": [SOLVER | {"max_seq_len": 10},
                  # never solves T = 10 at this rate, so it never reaches T = 15
                  SOLVER | {"variant": "plain", "lr": 1e-4, "hidden": 8, "settle_early": False,
                            "max_iters": 100}],
}
"""Per experiment with ``ends_early``, small configurations whose members its protocol ends
before their whole budget."""


def last_steps(module: Any, values: dict[str, Any]) -> tuple[Any, list[int]]:
    """The configuration of ``values`` and the steps of its reports, trained alone."""
    config = module.Config(**values)
    reports: list[Report] = []
    module.train([config], reports.append)
    return config, [r.step for r in reports]


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_planned_steps_is_the_step_of_the_last_report_of_a_whole_budget(name: str):
    assert name in WHOLE, f"no small configuration of {name} to check planned_steps on"
    module = get(name)
    for values in WHOLE[name]:
        config, steps = last_steps(module, values)
        assert steps, values
        assert max(steps) == steps[-1] == module.planned_steps(config), values


def test_the_planned_steps_of_the_edge_cases_are_those_worked_out_by_hand():
    """The trainer and the function could share a mistake; these numbers are counted here."""
    expected = {"synthetic": [600, 90], "orth-pretrain-convergence": [14], "ff-mnist": [18, 20],
                "lcw-mlp": [6], "temporal-gradients": [12], "deep-orthogonal": [25],
                "pixel-mnist": [5]}
    for name, steps in expected.items():
        module = get(name)
        assert [module.planned_steps(module.Config(**v)) for v in WHOLE[name]] == steps
    polyphonic = get("polyphonic")
    split, window = (polyphonic.Config(**v) for v in WHOLE["polyphonic"])
    assert polyphonic.planned_steps(window) == 4 * 3
    # split: more pieces than songs, as many minibatches of 5 as they fill, twice
    assert polyphonic.planned_steps(split) % 2 == 0
    assert polyphonic.planned_steps(split) > 2 * 3


def test_the_experiments_that_can_end_early_are_those_with_ends_early():
    assert {name for name in EXPERIMENTS if hasattr(get(name), "ends_early")} == set(EARLY)


@pytest.mark.parametrize("name", list(EARLY))
def test_a_member_its_protocol_ends_reports_a_last_step_below_planned_steps(name: str):
    module = get(name)
    for values in EARLY[name]:
        config, steps = last_steps(module, values)
        assert module.ends_early(config), values
        assert steps and max(steps) < module.planned_steps(config), values
