"""The orthogonality penalty λ‖WWᵀ − I‖²_F and its gradient (M eqs. 29-31)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ortho_core.penalty import gram_residual, ortho_error, ortho_penalty_grad

SHAPES = [(12, 12), (15, 6), (6, 15)]


def weights(shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64) * 0.3


@pytest.mark.parametrize("shape", SHAPES)
def test_ortho_error_is_frobenius_distance_of_smaller_gram(shape: tuple[int, int]) -> None:
    w = weights((2, *shape))
    m, n = shape
    for k in range(2):
        gram = w[k].T @ w[k] if m > n else w[k] @ w[k].T
        expected = sum((gram[i, j].item() - float(i == j)) ** 2
                       for i in range(min(m, n)) for j in range(min(m, n)))
        assert ortho_error(w)[k].item() == pytest.approx(expected, rel=1e-12)


def test_tall_matrix_with_orthonormal_columns_has_zero_error() -> None:
    q, _ = torch.linalg.qr(weights((15, 6)))
    assert ortho_error(q).item() < 1e-24
    assert gram_residual(q).shape == (6, 6)
    assert ortho_error(q.T).item() < 1e-24


@pytest.mark.parametrize("shape", SHAPES)
def test_penalty_grad_equals_autograd(shape: tuple[int, int]) -> None:
    w = weights((3, *shape), seed=1).requires_grad_()
    lam = torch.tensor([1.0, 0.1, 1e-3], dtype=torch.float64)
    (expected,) = torch.autograd.grad((lam * ortho_error(w)).sum(), w)
    torch.testing.assert_close(ortho_penalty_grad(w.detach(), lam), expected)


def _ortho_error_numpy(w: np.ndarray) -> float:
    """‖WWᵀ − I‖²_F (or ‖WᵀW − I‖²_F for a tall W), written independently in numpy."""
    gram = w.T @ w if w.shape[0] > w.shape[1] else w @ w.T
    return float(np.sum((gram - np.eye(len(gram))) ** 2))


@pytest.mark.parametrize("shape", SHAPES)
def test_penalty_grad_matches_central_finite_differences(shape: tuple[int, int]) -> None:
    """λ∂Eᵖ/∂W_ij ≈ λ(Eᵖ(W + hE_ij) − Eᵖ(W − hE_ij))/2h, float64, with a float λ."""
    w = weights(shape, seed=2)
    lam, h = 0.5, 1e-6
    base = w.numpy()
    expected = np.zeros_like(base)
    for i, j in np.ndindex(*base.shape):
        step = np.zeros_like(base)
        step[i, j] = h
        expected[i, j] = lam * (_ortho_error_numpy(base + step)
                                - _ortho_error_numpy(base - step)) / (2 * h)
    np.testing.assert_allclose(ortho_penalty_grad(w, lam).numpy(), expected, rtol=1e-6,
                               atol=1e-8)
    assert torch.equal(ortho_penalty_grad(w, 0.0), torch.zeros_like(w))


def test_penalty_grad_of_a_scaled_orthogonal_matrix() -> None:
    """For W = cQ with Q orthogonal, WWᵀ − I = (c² − 1)I, so ∂Eᵖ/∂W = 4(c² − 1)cQ: a
    hand-computed value (zero at c = 1, pointing inwards for c > 1)."""
    q, _ = torch.linalg.qr(weights((7, 7), seed=3))
    for c in (1.0, 2.0, 0.5):
        torch.testing.assert_close(ortho_penalty_grad(c * q, 1.0), 4 * (c * c - 1) * c * q,
                                   atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("shape", SHAPES)
def test_unsquared_penalty_grad_equals_autograd(shape: tuple[int, int]) -> None:
    """``form="unsquared"`` is the gradient of λ‖WWᵀ − I‖_F (M's reference code), per member."""
    w = weights((3, *shape), seed=2).requires_grad_()
    lam = torch.tensor([1.0, 0.1, 1e-3], dtype=torch.float64)
    m, n = shape
    gram = w.transpose(1, 2) @ w if m > n else w @ w.transpose(1, 2)
    eye = torch.eye(min(m, n), dtype=torch.float64)
    value = (lam * torch.linalg.matrix_norm(gram - eye)).sum()
    (expected,) = torch.autograd.grad(value, w)
    got = ortho_penalty_grad(w.detach(), lam, "unsquared")
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-14)
    squared = ortho_penalty_grad(w.detach(), lam)
    ratio = squared / got
    torch.testing.assert_close(ratio, 2 * ortho_error(w.detach()).sqrt()[:, None, None]
                               .expand_as(ratio), rtol=1e-10, atol=0)


def test_unsquared_penalty_grad_is_zero_at_an_orthogonal_matrix() -> None:
    """‖R‖_F has no gradient at R = 0; the minimum's subgradient 0 is used (no NaN)."""
    eye = torch.eye(5, dtype=torch.float64)[None]
    assert torch.equal(ortho_penalty_grad(eye, 1.0, "unsquared"), torch.zeros_like(eye))
    with pytest.raises(ValueError, match="form"):
        ortho_penalty_grad(eye, 1.0, "cubed")


@pytest.mark.parametrize("shape", SHAPES)
def test_a_pack_mixing_the_forms_gets_each_members_own_gradient(shape: tuple[int, int]) -> None:
    """A bool ``form`` (true: squared) gives every member the gradient of its own form's
    penalty, by autograd."""
    w = weights((4, *shape), seed=3).requires_grad_()
    lam = torch.tensor([1.0, 0.1, 0.5, 1e-2], dtype=torch.float64)
    squared = torch.tensor([True, False, False, True])
    m, n = shape
    gram = w.transpose(1, 2) @ w if m > n else w @ w.transpose(1, 2)
    norm = torch.linalg.matrix_norm(gram - torch.eye(min(m, n), dtype=torch.float64))
    value = (lam * torch.where(squared, norm.square(), norm)).sum()
    (expected,) = torch.autograd.grad(value, w)
    torch.testing.assert_close(ortho_penalty_grad(w.detach(), lam, squared), expected,
                               rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("lead", [(), (3,), (2, 3)], ids=["matrix", "pack", "packs"])
@pytest.mark.parametrize("shape", SHAPES)
def test_the_gradient_added_into_out_is_out_plus_the_gradient(shape: tuple[int, int],
                                                              lead: tuple[int, ...]) -> None:
    w = weights((*lead, *shape), seed=4)
    lam = torch.full(lead, 0.3, dtype=torch.float64) if lead else 0.3
    grad = weights((*lead, *shape), seed=5)
    expected = grad + ortho_penalty_grad(w, lam, "unsquared")
    got = ortho_penalty_grad(w, lam, "unsquared", out=grad)
    assert got is grad
    torch.testing.assert_close(grad, expected, rtol=1e-12, atol=1e-14)
