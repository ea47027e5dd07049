"""Experiment ``deep-orthogonal``: packs give what members give alone, Q stays orthogonal in
training, the planar sets, and bad input exits 2 naming the field."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ortho_core.data.planar import planar
from ortho_core.experiments import deep_orthogonal as exp
from sweeps.cli import main


def _quiet(report) -> None:
    """Discard reports."""


def test_planar_sets_are_balanced_and_deterministic():
    for name in ("two_class", "spiral"):
        x, y = planar(name, 200, None, torch.Generator().manual_seed(0))
        again, _ = planar(name, 200, None, torch.Generator().manual_seed(0))
        assert x.shape == (200, 2) and torch.equal(x, again)
        assert int(y.sum()) == 100


@pytest.mark.parametrize("variant", ["orth", "orth_relu", "relu"])
def test_a_member_of_a_pack_gives_what_it_gives_alone(variant):
    base = exp.Config(variant=variant, dataset="spiral", layers=6, hidden=4, block=2,
                      max_iters=30, eval_every=10, dtype="float64", weight_decay=0.001)
    configs = [dataclasses.replace(base, lr=lr, momentum=beta, seed=seed)
               for lr, beta, seed in ((0.1, 0.9, 0), (0.05, 0.0, 1), (0.2, 0.5, 2))]
    pack = exp.train(configs, _quiet)
    for config, packed in zip(configs, pack, strict=True):
        (alone,) = exp.train([config], _quiet)
        for key in ("train_loss", "train_error", "act_grad_spread", "weight_grad_spread"):
            assert packed.summary[key] == pytest.approx(alone.summary[key], rel=1e-9, abs=1e-12)
        assert torch.allclose(torch.tensor(packed.artifacts["grad_profile"]["act_grad"]),
                              torch.tensor(alone.artifacts["grad_profile"]["act_grad"]),
                              rtol=1e-9, atol=0)
    assert pack[0].summary["train_loss"] != pack[1].summary["train_loss"]


def test_training_keeps_q_orthogonal_and_lowers_the_error_of_an_orthogonal_net():
    (result,) = exp.train([exp.Config(variant="orth", layers=8, lr=0.1, max_iters=600,
                                      eval_every=300)], _quiet)
    assert result.summary["orth_error"] < 1e-4
    assert result.summary["best_train_error"] < 0.3
    assert result.summary["act_grad_spread_init"] < 1e-5


@pytest.mark.parametrize(("args", "field"), [
    (["--set", "hidden=3"], "hidden"),
    (["--set", "momentum=1"], "momentum"),
    (["--set", "momentum=-0.1"], "momentum"),
    (["--set", "layers=0"], "layers"),
    (["--set", "dataset=mnist"], "batch_size"),
])
def test_bad_input_exits_2_naming_the_field(args, field, capsys):
    assert main(["train", "deep-orthogonal", *args]) == 2
    assert f"invalid {field}:" in capsys.readouterr().err
