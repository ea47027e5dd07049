"""The pixel-mnist trainer (M §III-B): RMSProp as M's code steps, OINIT's orthogonal start of
all three matrices, the fixed permutation of permuted MNIST (a bijection fixed by its seed,
applied to every image and kept with the run), a pack member against itself alone at T = 784,
what a report holds, and bad inputs (exit status 2 naming the field)."""

from __future__ import annotations

import math

import pytest
import torch

from ortho_core.data.mnist import N_PIXELS, load_mnist, pixel_permutation
from ortho_core.errors import ConfigError
from ortho_core.experiments import pixel_mnist
from ortho_core.experiments.pixel_mnist_config import Config
from ortho_core.models.srnn import SRNNInit, init_srnn
from ortho_core.optim import rmsprop_step
from ortho_core.penalty import ortho_error
from ortho_core.reporting import Report
from sweeps.cli import main

pytestmark = pytest.mark.usefixtures("shared_data")

SHORT = {"max_iters": 4, "eval_every": 2, "test_size": 40}
"""A few iterations on a few test images: seconds at T = 784."""


def test_rmsprop_step_is_lasagnes_rule_per_member_and_leaves_stopped_members_alone():
    torch.manual_seed(0)
    p = torch.randn(3, 4, 5, dtype=torch.float64)
    g = torch.randn(3, 4, 5, dtype=torch.float64)
    g[2] = math.nan  # a diverged member
    r = torch.rand(3, 4, 5, dtype=torch.float64)
    lr = torch.tensor([1e-3, 1e-2, 1.0], dtype=torch.float64)
    p0, r0 = p.clone(), r.clone()
    rmsprop_step([p], [g], [r], lr, torch.tensor([True, True, False]), rho=0.9, eps=1e-6)
    for k in range(2):
        expected_r = 0.9 * r0[k] + 0.1 * g[k] ** 2
        torch.testing.assert_close(r[k], expected_r, rtol=0, atol=1e-15)
        torch.testing.assert_close(p[k], p0[k] - lr[k] * g[k] / torch.sqrt(expected_r + 1e-6),
                                   rtol=0, atol=1e-15)
    assert torch.equal(p[2], p0[2]) and torch.equal(r[2], r0[2])


def test_oinit_starts_from_orthogonal_matrices_and_plain_from_its_draw():
    configs = [Config(variant="oinit", init_std=0.01, seed=3),
               Config(variant="plain", init_std=0.01, seed=3),
               Config(variant="oinit", init_std=0.01, seed=3, pretrain_weights="recurrent")]
    model, steps = pixel_mnist.initial_model(configs, torch.float32, torch.device("cpu"))
    drawn = init_srnn(1, 100, 10, [SRNNInit(3, "gaussian", 0.01)] * 3)
    for name, index in pixel_mnist.WEIGHTS.items():
        w = list(model.parameters())[index].detach().double()
        assert float(ortho_error(w[0])) < 1e-5, name  # float32 of a matrix with Eᵖ < 1e-6
        assert torch.equal(list(model.parameters())[index][1],
                           list(drawn.parameters())[index][1])
        pretrained_third = name == "W_hh"
        assert (float(ortho_error(w[2])) < 1e-5) == pretrained_third, name
    assert steps[0] > steps[2] > 0 and steps[1] == 0


def test_permuted_pixels_follow_one_fixed_bijection_kept_with_the_run():
    perm = pixel_permutation(7)
    assert torch.equal(perm.sort().values, torch.arange(N_PIXELS))
    assert torch.equal(perm, pixel_permutation(7))
    assert not torch.equal(perm, pixel_permutation(8))
    cfg = Config(permute="fixed", data_seed=7, test_size=30)
    data = pixel_mnist.load_data(cfg, torch.float32, torch.device("cpu"))
    raster, _ = load_mnist("train", sequence=True, preprocessing="standardise")
    assert torch.equal(data.x_train[:5], raster[:5, perm])
    [result] = pixel_mnist.train([Config(permute="fixed", data_seed=7, **SHORT)],
                                 lambda report: None)
    assert result.artifacts["permutation"] == perm.tolist()


def test_a_pack_member_gives_what_it_gives_alone():
    members = [Config(variant="oinit", lr=1e-4, init_std=0.01, seed=1, **SHORT),
               Config(variant="open", lr=1e-3, penalty=0.1, init_std=0.001, seed=2, **SHORT),
               Config(variant="plain", lr=1e-3, init_std=0.1, seed=3, **SHORT)]
    reports: list[Report] = []
    packed = pixel_mnist.train(members, reports.append)
    for k, cfg in enumerate(members):
        alone_reports: list[Report] = []
        [alone] = pixel_mnist.train([cfg], alone_reports.append)
        assert alone.outcome == packed[k].outcome
        for key, value in alone.summary.items():
            if key != "wall_time":
                assert packed[k].summary[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
        mine = [r for r in reports if r.member == k]
        assert [r.step for r in mine] == [r.step for r in alone_reports] == [0, 2, 4]
        for a, b in zip(mine, alone_reports, strict=True):
            for key in ("test_accuracy", "spectral_radius", "grad_norm_whh", "train_loss"):
                if key in b.metrics:
                    assert a.metrics[key] == pytest.approx(b.metrics[key], rel=1e-3), key


def test_reports_hold_the_curves_of_fig_3b():
    reports: list[Report] = []
    [result] = pixel_mnist.train([Config(variant="oinit", lr=1e-4, **SHORT)], reports.append)
    assert [r.step for r in reports] == [0, 2, 4]
    assert reports[0].metrics["samples"] == 0 and reports[-1].metrics["samples"] == 64
    assert set(reports[-1].metrics) == {"samples", "test_accuracy", "test_loss",
                                        "spectral_radius", "ortho_error", "train_loss",
                                        "grad_norm_whh", "grad_norm"}
    assert reports[0].metrics["spectral_radius"] == pytest.approx(1.0, abs=1e-3)
    assert reports[0].metrics["ortho_error"] < 1e-5
    assert result.summary["iterations"] == 4
    assert 0.0 < result.summary["baseline_accuracy"] < 0.5
    assert result.summary["pretrain_steps"] > 0


@pytest.mark.parametrize(("setting", "field"), [
    ("seq_len=100", "seq_len"), ("permute=shuffled", "permute"), ("optimizer=adam", "optimizer"),
    ("preprocessing=minmax", "preprocessing"), ("variant=lstm", "variant")])
def test_bad_input_exits_2_naming_the_field(setting, field, capsys):
    assert main(["train", "pixel-mnist", "--set", setting]) == 2
    assert field in capsys.readouterr().err
    with pytest.raises(ConfigError, match=field):
        Config(**{field: setting.split("=")[1] if field != "seq_len" else 100})
