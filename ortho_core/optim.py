"""Plain SGD over a pack, with per-member learning rates, gradient-norm clipping and a mask of
the members still training (DESIGN.md "Packs").

M trains with plain SGD (M §III); G clips the step when the gradient norm exceeds τ, which
is the rescaling g · min(1, τ/‖g‖) (G §3.4, after Pascanu et al.).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def clip_factors(grad_norm: Tensor, clip: float | Tensor | None) -> Tensor:
    """Per-member factors min(1, τ/‖g‖) that scale each gradient to norm at most τ.

    ``grad_norm`` is (K,) (e.g. from :func:`ortho_core.metrics.member_norm`); ``clip`` (τ) is a
    float, a tensor (K,) or None. τ = None or τ = 0 means no clipping (factor 1), per member
    when given as a tensor. A zero gradient gets factor 1; a NaN norm gives a NaN factor, so
    that a diverged member stays visibly diverged.
    """
    ones = torch.ones_like(grad_norm)
    if clip is None:
        return ones
    tau = torch.as_tensor(clip, dtype=grad_norm.dtype, device=grad_norm.device)
    return torch.where(tau > 0, torch.clamp(tau / grad_norm, max=1.0), ones)


def sgd_step(
    params: Sequence[Tensor],
    grads: Sequence[Tensor],
    lr: float | Tensor,
    active: Tensor,
) -> None:
    """In place, p[k] := p[k] − α[k]·g[k] for every active member k; others stay bit-identical.

    ``params`` and ``grads`` are matching packed tensors (K, ...); ``lr`` (α) is a float or a
    tensor (K,) and may already include clipping factors; ``active`` is a bool tensor (K,).
    Inactive members are skipped by selection, not by a zero rate, so that a NaN or inf
    gradient of a finished or diverged member cannot leak into its weights.
    """
    if len(params) != len(grads):
        raise ValueError(f"sgd_step: {len(params)} parameters but {len(grads)} gradients")
    with torch.no_grad():
        for p, g in zip(params, grads, strict=True):
            shape = (-1,) + (1,) * (p.dim() - 1)
            rate = torch.as_tensor(lr, dtype=p.dtype, device=p.device)
            rate = rate.reshape(shape) if rate.dim() else rate
            p.copy_(torch.where(active.reshape(shape), p - rate * g, p))
