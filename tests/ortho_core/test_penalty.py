"""The orthogonality penalty λ‖WWᵀ − I‖²_F and its gradient (M eqs. 29-31)."""

from __future__ import annotations

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


def test_penalty_grad_float_lambda_and_closed_form() -> None:
    w = weights((10, 10), seed=2)
    expected = 4 * 0.5 * (w @ w.T - torch.eye(10, dtype=w.dtype)) @ w
    torch.testing.assert_close(ortho_penalty_grad(w, 0.5), expected)
    assert torch.equal(ortho_penalty_grad(w, 0.0), torch.zeros_like(w))
