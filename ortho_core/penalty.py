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


def ortho_penalty_grad(w: Tensor, penalty: float | Tensor, form: str | Tensor = "squared",
                       out: Tensor | None = None) -> Tensor:
    """The exact gradient of the penalty with respect to W.

    ``form="squared"`` (M eqs. 29-31): the gradient of λ·Eᵖ = λ‖R‖²_F, 4λ(WWᵀ − I)W, or
    4λW(WᵀW − I) if tall. ``form="unsquared"`` (M's reference code): the gradient of λ‖R‖_F,
    which is the squared form's divided by 2‖R‖_F, i.e. 2λRW/‖R‖_F (2λWR/‖R‖_F if tall); at
    R = 0, where the norm has no gradient, it is 0 (the minimum; a subgradient). ``form`` may
    also be a bool tensor of shape (...), true for the members of the squared form: a pack
    that mixes the forms then pays one matrix product per member, not one per form.

    ``penalty`` (λ) is a float or a tensor of shape (...) (one λ per member). M eq. 31 prints
    the product as W(WWᵀ − I); that order is the gradient only when W is normal, so the exact
    gradient is used (for a square W, (WWᵀ − I)W = W(WᵀW − I)). Each form's scalar factor
    multiplies the small residual R before the product, so the gradient costs no elementwise
    pass of W's size; with ``out`` (W's shape) the gradient is added into it in place by the
    product itself, and ``out`` is returned.
    """
    residual = gram_residual(w)
    lam = torch.as_tensor(penalty, dtype=w.dtype, device=w.device)
    squared = form
    if isinstance(form, str):
        if form not in PENALTY_FORMS:
            raise ValueError(f"ortho_penalty_grad: form must be one of {PENALTY_FORMS}, "
                             f"got {form!r}")
        squared = form == "squared"
    factor = 4.0 * lam
    if squared is not True:
        norm = residual.square().sum(dim=(-2, -1)).sqrt()
        unsquared = torch.where(norm > 0, 2.0 * lam / norm, torch.zeros_like(norm))
        factor = unsquared if squared is False else torch.where(squared, factor, unsquared)
    return _residual_product(w, residual * factor[..., None, None], out)


def ortho_grad_from_residual(w: Tensor, residual: Tensor, penalty: float | Tensor) -> Tensor:
    """4λ·R·W (wide or square) or 4λ·W·R (tall) for ``residual`` R = :func:`gram_residual`
    of ``w``, for callers that also need R itself (Eᵖ = ‖R‖²_F)."""
    lam = torch.as_tensor(penalty, dtype=w.dtype, device=w.device)
    return _residual_product(w, residual * (4.0 * lam)[..., None, None])


def _residual_product(w: Tensor, scaled: Tensor, out: Tensor | None = None) -> Tensor:
    """S·W (wide or square W) or W·S (tall) for a scaled residual S; added into ``out`` in
    place when given (fused into the product for one or a pack of matrices)."""
    a, b = (w, scaled) if w.shape[-2] > w.shape[-1] else (scaled, w)
    if out is None:
        return a @ b
    if out.dim() == 2:
        return out.addmm_(a, b)
    if out.dim() == 3:
        return out.baddbmm_(a, b)
    return out.add_(a @ b)
