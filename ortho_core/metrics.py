"""Quantities logged during training: the spectral radius ρ(W_hh) of M Fig. 2 and G Alg. 3.1,
and per-member gradient norms ‖∇W‖ (M Figs. 2 and 3b; the clipped step of G §3.4).

All functions take packed tensors whose leading dimension(s) index the members.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def spectral_radius(w: Tensor) -> Tensor:
    """ρ(W) = max |λ| over the eigenvalues of each square matrix in ``w`` (..., n, n).

    Computed with ``torch.linalg.eigvals`` in float64 (eigenvalues of a non-symmetric matrix
    are sensitive to rounding), on ``w``'s device; the result is float64 of shape (...).
    """
    if w.dim() < 2 or w.shape[-1] != w.shape[-2]:
        raise ValueError(f"spectral_radius: expected (..., n, n), got {tuple(w.shape)}")
    return torch.linalg.eigvals(w.detach().to(torch.float64)).abs().amax(dim=-1)


def member_norm(tensors: Sequence[Tensor]) -> Tensor:
    """The L2 norm of each member's entries across several packed tensors, each (K, ...).

    ‖(g₁[k], g₂[k], …)‖₂ over all entries of member k: the norm of that member's whole gradient
    when ``tensors`` are the gradients of its parameters. Returns shape (K,), in the tensors'
    dtype.
    """
    if not tensors:
        raise ValueError("member_norm: needs at least one tensor")
    squares = [t.detach().reshape(t.shape[0], -1).square().sum(dim=1) for t in tensors]
    return torch.stack(squares).sum(dim=0).sqrt()
