"""Experiment M-pre (M §II-A): convergence of orthogonal pre-training over many matrices."""

from __future__ import annotations

import pytest
import torch

from ortho_core.config import field_docs, from_dict
from ortho_core.errors import ConfigError
from ortho_core.experiments import get
from ortho_core.experiments.pretrain_convergence import (
    PACK_FIELDS,
    SUMMARY,
    Config,
    draw_matrices,
    orthogonalise,
    train,
)
from ortho_core.init import orthogonal_pretrain
from ortho_core.reporting import Outcome


def run(configs):
    reports = []
    return train(configs, reports.append), reports


def test_registered_and_documented():
    assert get("orth-pretrain-convergence").train is train
    assert set(field_docs(Config)) == set(Config.__dataclass_fields__)
    assert {"pretrain_lr", "seed", "init_std"}.isdisjoint(PACK_FIELDS)


def test_small_run_converges_in_a_plausible_number_of_steps():
    """M: 100 % success, 22.77 (normal) and 24.00 (uniform) steps on average for 100 × 100."""
    (result,), reports = run([Config(repeats=60, batch=30)])
    s = result.summary
    assert result.outcome is Outcome.SOLVED
    for dist in ("normal", "uniform"):
        assert s[f"{dist}_success_rate"] == 1.0
        assert s[f"{dist}_repeats"] == 60
        assert 18 < s[f"{dist}_mean_steps"] < 27
        assert s[f"{dist}_min_steps"] <= s[f"{dist}_mean_steps"] <= s[f"{dist}_max_steps"]
        assert s[f"{dist}_std_steps"] > 0
        hist = result.artifacts["steps_histogram"][dist]
        assert sum(hist.values()) == 60
        mean = sum(int(k) * v for k, v in hist.items()) / 60
        assert mean == pytest.approx(s[f"{dist}_mean_steps"])
    assert [r.step for r in reports] == [30, 60, 90, 120]
    assert reports[-1].metrics["uniform_mean_steps"] == pytest.approx(s["uniform_mean_steps"])
    assert set(s) == set(SUMMARY)  # every key it declares, and no other


def test_steps_are_updates_applied_before_convergence_was_observed():
    """Recount one matrix by hand: after ``steps`` updates Eᵖ < tol, after one fewer not."""
    cfg = Config(size=20, repeats=1)
    w = draw_matrices(cfg, "normal", torch.Generator().manual_seed(0), 1)
    steps, converged, finite = orthogonalise(w, torch.tensor([0.1]), torch.tensor([1e-6]), 1000)
    n = int(steps[0])
    assert bool(converged[0]) and bool(finite[0]) and n > 5
    x = w[0].clone()
    eye = torch.eye(20, dtype=torch.float64)
    errors = []
    for _ in range(n + 1):
        r = x @ x.T - eye
        errors.append(float(r.square().sum()))
        x = x - 0.1 * 4 * r @ x
    assert errors[n] < 1e-6 <= errors[n - 1]


def test_rounds_match_one_call():
    cfg = Config(size=30)
    w = draw_matrices(cfg, "uniform", torch.Generator().manual_seed(3), 12)
    lr, tol = torch.full((12,), 0.1, dtype=torch.float64), torch.full((12,), 1e-6,
                                                                      dtype=torch.float64)
    steps, converged, _ = orthogonalise(w, lr, tol, 1000)
    single = orthogonal_pretrain(w, lr, tol, 1000)
    assert torch.equal(steps, single.steps) and torch.equal(converged, single.converged)


def test_a_pack_member_gives_the_numbers_it_gives_alone():
    pack = [Config(repeats=20, size=40, batch=10, pretrain_lr=0.1, seed=1),
            Config(repeats=20, size=40, batch=10, pretrain_lr=0.05, seed=2,
                   distributions=("normal", "uniform"))]
    results, _ = run(pack)
    for cfg, packed in zip(pack, results, strict=True):
        (alone,), _ = run([cfg])
        for key, value in alone.summary.items():
            if key != "wall_time":
                assert packed.summary[key] == pytest.approx(value), key
    assert results[1].summary["normal_mean_steps"] > results[0].summary["normal_mean_steps"]


def test_too_few_steps_or_too_large_a_rate_fail():
    (short,), _ = run([Config(repeats=5, size=20, pretrain_max_steps=3,
                              distributions=("normal",))])
    assert short.outcome is Outcome.UNSOLVED
    assert short.summary["normal_success_rate"] == 0.0
    assert "normal_mean_steps" not in short.summary
    (wild,), _ = run([Config(repeats=5, size=20, pretrain_lr=5.0, init_std=1.0,
                             distributions=("uniform",), uniform_bound=1.0)])
    assert wild.outcome is Outcome.DIVERGED


def test_distributions_draw_what_they_say():
    cfg = Config(size=50, init_std=0.2, uniform_bound=0.3)
    g = torch.Generator().manual_seed(0)
    normal = draw_matrices(cfg, "normal", g, 20)
    uniform = draw_matrices(cfg, "uniform", g, 20)
    assert normal.std().item() == pytest.approx(0.2, rel=0.02)
    assert uniform.abs().max().item() <= 0.3
    assert uniform.std().item() == pytest.approx(0.3 / 3 ** 0.5, rel=0.02)


@pytest.mark.parametrize(("values", "field"), [
    ({"repeats": "0"}, "repeats"), ({"size": "1"}, "size"), ({"batch": "0"}, "batch"),
    ({"distributions": "cauchy"}, "distributions"), ({"pretrain_lr": "0"}, "pretrain_lr"),
    ({"pretrain_tol": "0"}, "pretrain_tol"), ({"init_std": "-1"}, "init_std"),
    ({"uniform_bound": "0"}, "uniform_bound"), ({"device": "gpu"}, "device"),
    ({"steps": "3"}, "steps"), ({"pretrain_max_steps": "0"}, "pretrain_max_steps"),
])
def test_bad_configuration_names_the_field(values, field):
    with pytest.raises(ConfigError) as err:
        from_dict(Config, values)
    assert err.value.field == field


def test_one_distribution_from_a_string():
    cfg = from_dict(Config, {"distributions": "uniform"})
    assert cfg.distributions == ("uniform",)
