"""Initialisations: normalised and Gaussian draws, spectral rescaling (G Alg. 3.1) and
orthogonal pre-training (M eqs. 16-18)."""

from __future__ import annotations

import math

import pytest
import torch

from analysis.published.manchev import PRETRAIN
from ortho_core.errors import PretrainError
from ortho_core.init import (
    gaussian,
    normalised,
    orthogonal_pretrain,
    require_converged,
    rescale_spectral_radius,
)
from ortho_core.metrics import spectral_radius
from ortho_core.penalty import ortho_error


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_normalised_bounds_and_variance() -> None:
    fan_out, fan_in = 200, 300
    w = normalised((fan_out, fan_in), gen(0))
    bound = math.sqrt(6 / (fan_in + fan_out))
    assert w.shape == (fan_out, fan_in) and w.dtype == torch.float64
    assert w.abs().max() <= bound
    assert w.abs().max() > 0.999 * bound
    assert w.var().item() == pytest.approx(2 / (fan_in + fan_out), rel=0.03)
    assert abs(w.mean().item()) < 0.01 * bound


def test_normalised_uses_last_two_dims_as_fans_and_is_reproducible() -> None:
    w = normalised((4, 10, 40), gen(1), dtype=torch.float32)
    assert w.shape == (4, 10, 40) and w.dtype == torch.float32
    assert w.abs().max() <= math.sqrt(6 / 50)
    assert torch.equal(w, normalised((4, 10, 40), gen(1), dtype=torch.float32))


def test_gaussian_std() -> None:
    w = gaussian((300, 300), 0.1, gen(2))
    assert w.std().item() == pytest.approx(0.1, rel=0.02)
    assert abs(w.mean().item()) < 0.002
    assert torch.equal(w, gaussian((300, 300), 0.1, gen(2)))


def test_rescale_spectral_radius_hits_rho_and_keeps_direction() -> None:
    w = gaussian((3, 100, 100), 0.1, gen(3))
    rho = torch.tensor([0.8, 1.0, 1.2], dtype=torch.float64)
    scaled = rescale_spectral_radius(w, rho)
    torch.testing.assert_close(spectral_radius(scaled), rho, rtol=1e-6, atol=0)
    ratio = scaled / w
    torch.testing.assert_close(ratio, ratio[:, :1, :1].expand_as(ratio))


def test_rescale_spectral_radius_float_target() -> None:
    w = gaussian((50, 50), 1.0, gen(4))
    assert spectral_radius(rescale_spectral_radius(w, 1.1)).item() == pytest.approx(1.1, rel=1e-6)


def naive_pretrain(w: torch.Tensor, lr: float, tol: float) -> tuple[torch.Tensor, int]:
    """Independent recomputation: W := W − lr·∂‖WWᵀ − I‖²/∂W by autograd until E < tol."""
    steps = 0
    while True:
        x = w.clone().requires_grad_()
        error = ((x @ x.T - torch.eye(w.shape[0], dtype=w.dtype)) ** 2).sum()
        if error.item() < tol:
            return w, steps
        (grad,) = torch.autograd.grad(error, x)
        w = w - lr * grad
        steps += 1


def test_pretrain_members_match_their_own_runs_with_per_member_lr() -> None:
    w = gaussian((3, 20, 20), 0.2, gen(5))
    lrs = [0.1, 0.05, 0.02]
    result = orthogonal_pretrain(w, torch.tensor(lrs, dtype=torch.float64), tol=1e-8)
    assert result.converged.all()
    for k, lr in enumerate(lrs):
        expected_w, expected_steps = naive_pretrain(w[k], lr, 1e-8)
        assert result.steps[k].item() == expected_steps
        torch.testing.assert_close(result.weights[k], expected_w, rtol=1e-10, atol=1e-12)
    assert len(set(result.steps.tolist())) == 3  # the rates really differed
    torch.testing.assert_close(result.error, ortho_error(result.weights))
    assert (result.error < 1e-8).all()


@pytest.mark.parametrize(("shape", "tall"), [((25, 25), False), ((30, 10), True),
                                             ((10, 30), False)])
def test_pretrain_makes_fewer_vectors_orthonormal(shape: tuple[int, int], tall: bool) -> None:
    w = normalised(shape, gen(6))
    result = orthogonal_pretrain(w, 0.1, tol=1e-6)
    assert result.converged.item()
    q = result.weights
    gram = q.T @ q if tall else q @ q.T
    torch.testing.assert_close(gram, torch.eye(min(shape), dtype=q.dtype), rtol=0, atol=1e-3)


def test_pretrain_of_orthogonal_matrix_takes_zero_steps() -> None:
    q, _ = torch.linalg.qr(gaussian((2, 40, 40), 1.0, gen(7)))
    result = orthogonal_pretrain(q, 0.1)
    assert result.steps.tolist() == [0, 0]
    assert result.converged.all()
    assert torch.equal(result.weights, q)


def test_pretrain_float32_input_runs_in_float64_and_returns_float32() -> None:
    w = gaussian((30, 30), 0.1, gen(8))
    r64 = orthogonal_pretrain(w, 0.1)
    r32 = orthogonal_pretrain(w.float(), 0.1)
    assert r32.weights.dtype == torch.float32
    assert r32.steps.item() == orthogonal_pretrain(w.float().double(), 0.1).steps.item()
    assert abs(r32.steps.item() - r64.steps.item()) <= 1
    torch.testing.assert_close(r32.weights, r64.weights.float(), rtol=0, atol=1e-5)


def test_pretrain_failure_is_reported_and_raised() -> None:
    w = gaussian((3, 30, 30), 0.1, gen(9))
    result = orthogonal_pretrain(w, torch.tensor([0.1, 10.0, 0.1], dtype=torch.float64))
    assert result.converged.tolist() == [True, False, True]
    assert not torch.isfinite(result.error[1])
    with pytest.raises(PretrainError, match=r"pretrain_tol.*member 1"):
        require_converged(result)

    one_step = orthogonal_pretrain(w[0], 0.1, max_steps=1)
    assert one_step.steps.item() == 1 and not one_step.converged.item()
    torch.testing.assert_close(one_step.error, ortho_error(one_step.weights))
    with pytest.raises(PretrainError, match="my_field"):
        require_converged(one_step, field="my_field")

    require_converged(orthogonal_pretrain(w, 0.1))


PRETRAIN_REPEATS = 1000
"""Matrices per distribution in the convergence-speed test (hence marked slow): a
standard error of about 0.11 steps, so that a band of three (±0.35 with M's own sampling
error) tells apart two counts one step apart."""


@pytest.mark.slow
@pytest.mark.parametrize("distribution", ["normal", "uniform"])
def test_pretrain_convergence_speed_is_m_s_on_m_s_count(distribution: str) -> None:
    """M §II-A: 100 × 100, N(0, 0.1²) or U(−0.1, 0.1), αₚ = 0.1, tol 10⁻⁶ converges every
    time, in the mean number of steps :data:`analysis.published.manchev.PRETRAIN` holds. M's
    code (``rand_ortho``) counts one more than the updates it applies, which ``steps`` counts.
    The published mean must lie within three standard errors of the difference of the two
    means (ours from the sample, M's from the same spread over M's repeats) of the mean on
    M's count, and outside that band on ours: the band settles which count M printed."""
    published = PRETRAIN[distribution]
    shape = (PRETRAIN_REPEATS, 100, 100)
    if distribution == "normal":
        w = gaussian(shape, 0.1, gen(10))
    else:
        w = (2 * torch.rand(shape, generator=gen(10), dtype=torch.float64) - 1) * 0.1
    result = orthogonal_pretrain(w, 0.1, tol=1e-6)
    assert float(result.converged.double().mean()) == published.success_rate
    steps = result.steps.double()
    variance = steps.var().item()
    band = 3 * math.sqrt(variance / PRETRAIN_REPEATS + variance / published.repeats)
    assert band < 0.4
    ours = steps.mean().item()
    assert published.mean_steps == pytest.approx(ours + 1, abs=band)
    assert published.mean_steps != pytest.approx(ours, abs=band)
