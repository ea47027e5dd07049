"""The orthogonality penalty of M (§II-B, eqs. 29-31): λ·Eᵖ with Eᵖ = ‖WWᵀ − I‖²_F.

Variant OPEN adds λ·Eᵖ(W_hh) to the loss (for feedforward nets, one term per layer); OINIT
minimises Eᵖ alone before training (M eqs. 16-18, :mod:`ortho_core.init.orthogonal_pretrain`).
For a non-square W the Gram matrix of the fewer vectors is compared with the identity: the rows
of a wide matrix (m ≤ n: WWᵀ, m × m) or the columns of a tall one (m > n: WᵀW, n × n), the
only one of the two that can equal I.

All functions take ``w`` of shape (..., m, n), leading dimensions indexing pack members.
"""

from __future__ import annotations

import torch
from torch import Tensor


def gram_residual(w: Tensor) -> Tensor:
    """WWᵀ − I (m ≤ n) or WᵀW − I (m > n), shape (..., min(m, n), min(m, n))."""
    if w.dim() < 2:
        raise ValueError(f"gram_residual: expected (..., m, n), got {tuple(w.shape)}")
    m, n = w.shape[-2], w.shape[-1]
    wt = w.transpose(-2, -1)
    gram = wt @ w if m > n else w @ wt
    eye = torch.eye(min(m, n), dtype=w.dtype, device=w.device)
    return gram - eye


def ortho_error(w: Tensor) -> Tensor:
    """Eᵖ = ‖WWᵀ − I‖²_F (M eq. 16), or ‖WᵀW − I‖²_F for a tall W; shape (...)."""
    return gram_residual(w).square().sum(dim=(-2, -1))


def ortho_penalty_grad(w: Tensor, penalty: float | Tensor) -> Tensor:
    """The exact gradient of λ·Eᵖ with respect to W: 4λ(WWᵀ − I)W, or 4λW(WᵀW − I) if tall.

    ``penalty`` (λ) is a float or a tensor of shape (...) (one λ per member). M eq. 31 prints
    the product as W(WWᵀ − I); that order is the gradient only when W is normal, so the exact
    gradient is used (for a square W, (WWᵀ − I)W = W(WᵀW − I)).
    """
    return ortho_grad_from_residual(w, gram_residual(w), penalty)


def ortho_grad_from_residual(w: Tensor, residual: Tensor, penalty: float | Tensor) -> Tensor:
    """4λ·R·W (wide or square) or 4λ·W·R (tall) for ``residual`` R = :func:`gram_residual`
    of ``w``, for callers that also need R itself (Eᵖ = ‖R‖²_F)."""
    grad = w @ residual if w.shape[-2] > w.shape[-1] else residual @ w
    lam = torch.as_tensor(penalty, dtype=w.dtype, device=w.device)
    return grad * (4.0 * lam)[..., None, None]
