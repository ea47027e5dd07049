"""G's descent directions (G eqs. 3.4-3.7, Alg. 3.2): the simplex direction, the switch at ψ,
the step, packs equal to members alone, and configuration errors."""

from __future__ import annotations

import pytest
import torch

from ortho_core.directions import simplex_direction, simplex_weights, uses_simplex
from ortho_core.errors import ConfigError
from ortho_core.experiments.synthetic import Config, initial_weights, train
from ortho_core.experiments.synthetic_stage import Stage
from ortho_core.metrics import member_norm
from tests.ortho_core.test_temporal import K, T, pack_and_batch, temporal_gradients

SMALL = {"hidden": 12, "val_size": 200, "eval_every": 50, "max_iters": 150,
         "protocol": "fixed", "dtype": "float64"}


def flat(tensors: list[torch.Tensor], steps: bool = False) -> torch.Tensor:
    return torch.cat([t.reshape(t.shape[0], *([t.shape[1]] if steps else []), -1)
                      for t in tensors], dim=-1)


def test_simplex_direction_has_the_gradient_norm_and_is_a_positive_combination():
    task, model, x, y = pack_and_batch()
    trace = model.bptt(x, lambda out: task.losses(out, y))
    beta = simplex_weights(T, torch.Generator().manual_seed(3))
    assert (beta > 0).all() and beta.sum().item() == pytest.approx(1.0, abs=1e-15)
    grad_norm = member_norm(trace.grads)
    d = flat(simplex_direction(trace, beta, grad_norm))
    torch.testing.assert_close(d.norm(dim=1), grad_norm, rtol=1e-12, atol=0)
    units = flat(temporal_gradients(trace), steps=True)
    units = units / units.norm(dim=-1, keepdim=True)
    for k in range(K):
        coeffs = torch.linalg.lstsq(units[k].T, d[k][:, None]).solution[:, 0]
        torch.testing.assert_close(units[k].T @ coeffs, d[k], rtol=1e-9, atol=1e-12)
        assert (coeffs > 0).all()
        torch.testing.assert_close(coeffs / coeffs.sum(), beta, rtol=1e-8, atol=1e-12)
    assert (d - flat(trace.grads)).abs().max() > 1e-3, "not the gradient itself"


def test_switching_happens_exactly_at_psi():
    psi = torch.full((3,), 0.5, dtype=torch.float64)
    codes = torch.tensor([2, 2, 2])
    above = torch.nextafter(psi[0], torch.tensor(1.0, dtype=torch.float64))
    norms = torch.stack([psi[0] * 0.9, psi[0], above])
    assert uses_simplex(codes, norms, psi).tolist() == [True, True, False]
    assert uses_simplex(torch.tensor([0, 1, 1]), norms, psi).tolist() == [False, True, True]


def one_step(cfg: Config):
    """A float64 stage of one member after one iteration; its weights before, the batch's
    trace and β."""
    from ortho_core.data.synthetic import get_task
    task, cpu = get_task(cfg.task), torch.device("cpu")
    weights, _ = initial_weights([cfg], task, torch.float64, cpu)
    stage = Stage([cfg], task, cfg.seq_len, [w.clone() for w in weights], torch.float64, cpu)
    ((raw, y, beta),) = stage.draw(1)
    before = [p.detach().clone() for p in stage.params]
    trace = stage.model.bptt(task.encode(raw, torch.float64), lambda out: task.losses(out, y))
    trace.grads = [g.clone() for g in trace.grads]
    simplex = simplex_direction(trace, beta, member_norm(trace.grads))
    grads = trace.grads
    stage.iteration(raw, y, beta)
    moved = [b - p.detach() for b, p in zip(before, stage.params, strict=True)]
    return moved, flat(grads), flat(simplex)


@pytest.mark.parametrize("clip", [None, 100.0, 1e-3])
def test_the_step_is_mu_below_tau_and_mu_tau_over_norm_above(clip):
    """θ_{k+1} = θ_k − α d with α = μ if ‖d‖ ≤ τ, μτ/‖d‖ otherwise (G eq. 3.7)."""
    cfg = Config(**SMALL, direction="simplex", lr=0.3, clip=clip, seq_len=8)
    moved, _, d = one_step(cfg)
    norm = d.norm()
    alpha = 0.3 if clip is None or norm <= clip else 0.3 * clip / norm
    if clip == 1e-3:
        assert norm > clip
    torch.testing.assert_close(flat([m[None] for m in moved])[0], alpha * d[0],
                               rtol=1e-9, atol=1e-15)


def test_simplex_switch_steps_along_the_gradient_above_psi_and_the_simplex_below():
    probe = Config(**SMALL, direction="simplex", lr=0.3, seq_len=8)
    _, grad, d = one_step(probe)
    norm = grad.norm().item()
    for psi, expected in ((norm * 0.999, grad), (norm * 1.001, d)):
        cfg = Config(**SMALL, direction="simplex_switch", switch_norm=psi, lr=0.3, seq_len=8)
        moved, _, _ = one_step(cfg)
        torch.testing.assert_close(flat([m[None] for m in moved])[0], 0.3 * expected[0],
                                   rtol=1e-9, atol=1e-15)


def run(configs):
    reports: dict[int, list] = {}
    results = train(configs, lambda r: reports.setdefault(r.member, []).append(r))
    return results, reports


@pytest.mark.parametrize("jitter", [False, True])
def test_a_pack_member_gives_the_numbers_it_gives_alone_for_every_direction(jitter):
    base = {**SMALL, "task": "adding_galvan", "seq_len": 20, "length_jitter": jitter,
            "clip": 1.0}
    pack = [Config(**base, direction="gradient", lr=0.05, seed=1),
            Config(**base, direction="simplex", lr=0.05, seed=2),
            Config(**base, direction="simplex_switch", switch_norm=0.3, lr=0.1, seed=3,
                   variant="open", penalty=0.01, penalty_form="unsquared"),
            Config(**base, direction="simplex", lr=0.02, seed=4, success="under_one_percent",
                   patience=100)]
    results, reports = run(pack)
    for i, cfg in enumerate(pack):
        (alone,), alone_reports = run([cfg])
        assert [r.step for r in reports[i]] == [r.step for r in alone_reports[0]]
        for ra, rb in zip(reports[i], alone_reports[0], strict=True):
            for key in ra.metrics:
                assert ra.metrics[key] == pytest.approx(rb.metrics[key], rel=1e-9, abs=1e-12)
        assert results[i].outcome == alone.outcome
    first = [r.metrics["train_loss"] for r in reports[0]]
    assert first != [r.metrics["train_loss"] for r in reports[1]]


@pytest.mark.parametrize(("field", "values"), [
    ("direction", {"direction": "newton"}),
    ("switch_norm", {"direction": "simplex_switch", "switch_norm": 0.0}),
    ("switch_norm", {"direction": "simplex_switch", "switch_norm": -1.0}),
    ("switch_norm", {"direction": "simplex_switch"}),
    ("switch_norm", {"direction": "simplex", "switch_norm": 1.0}),
    ("penalty_form", {"penalty_form": "cubic"}),
    ("success", {"success": "most"}),
    ("patience", {"patience": 0}),
    ("length_jitter", {"length_jitter": "yes"}),
])
def test_bad_input_names_the_field(field, values):
    with pytest.raises(ConfigError) as err:
        Config(**values)
    assert err.value.field == field
