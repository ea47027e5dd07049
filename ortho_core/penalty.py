"""The orthogonality penalty of M (§II-B, eqs. 29-31): λ·Eᵖ with Eᵖ = ‖WWᵀ − I‖²_F.

M's text (eqs. 29-31) adds the *squared* norm λ‖WWᵀ − I‖²_F; M's recurrent reference code adds
the gradient of the *unsquared* norm λ‖WWᵀ − I‖_F instead (the published λ were tuned under
it). :func:`ortho_penalty_grad` gives the exact gradient of either (``form``).

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

PENALTY_FORMS = ("squared", "unsquared")
"""``squared``: λ‖WWᵀ − I‖²_F (M eqs. 29-31); ``unsquared``: λ‖WWᵀ − I‖_F (M's code)."""


def gram_residual(w: Tensor) -> Tensor:
    """WWᵀ − I (m ≤ n) or WᵀW − I (m > n), shape (..., min(m, n), min(m, n))."""
    if w.dim() < 2:
        raise ValueError(f"gram_residual: expected (..., m, n), got {tuple(w.shape)}")
    m, n = w.shape[-2], w.shape[-1]
    wt = w.transpose(-2, -1)
    gram = wt @ w if m > n else w @ wt
    gram.diagonal(dim1=-2, dim2=-1).sub_(1.0)  # − I, on the diagonal the product just wrote
    return gram


def ortho_error(w: Tensor) -> Tensor:
    """Eᵖ = ‖WWᵀ − I‖²_F (M eq. 16), or ‖WᵀW − I‖²_F for a tall W; shape (...)."""
    return gram_residual(w).square().sum(dim=(-2, -1))


def ortho_penalty_grad(w: Tensor, penalty: float | Tensor, form: str = "squared") -> Tensor:
    """The exact gradient of the penalty with respect to W.

    ``form="squared"`` (M eqs. 29-31): the gradient of λ·Eᵖ = λ‖R‖²_F, 4λ(WWᵀ − I)W, or
    4λW(WᵀW − I) if tall. ``form="unsquared"`` (M's reference code): the gradient of λ‖R‖_F,
    which is the squared form's divided by 2‖R‖_F, i.e. 2λRW/‖R‖_F (2λWR/‖R‖_F if tall); at
    R = 0, where the norm has no gradient, it is 0 (the minimum; a subgradient).

    ``penalty`` (λ) is a float or a tensor of shape (...) (one λ per member). M eq. 31 prints
    the product as W(WWᵀ − I); that order is the gradient only when W is normal, so the exact
    gradient is used (for a square W, (WWᵀ − I)W = W(WᵀW − I)).
    """
    residual = gram_residual(w)
    grad = ortho_grad_from_residual(w, residual, penalty)
    if form == "squared":
        return grad
    if form != "unsquared":
        raise ValueError(f"ortho_penalty_grad: form must be one of {PENALTY_FORMS}, got {form!r}")
    norm = residual.square().sum(dim=(-2, -1)).sqrt()[..., None, None]
    return torch.where(norm > 0, grad / (2 * norm), torch.zeros_like(grad))


def ortho_grad_from_residual(w: Tensor, residual: Tensor, penalty: float | Tensor) -> Tensor:
    """4λ·R·W (wide or square) or 4λ·W·R (tall) for ``residual`` R = :func:`gram_residual`
    of ``w``, for callers that also need R itself (Eᵖ = ‖R‖²_F)."""
    grad = w @ residual if w.shape[-2] > w.shape[-1] else residual @ w
    lam = torch.as_tensor(penalty, dtype=w.dtype, device=w.device)
    return grad * (4.0 * lam)[..., None, None]
