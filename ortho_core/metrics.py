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
    are sensitive to rounding) on the CPU, whatever ``w``'s device; the result is float64 of
    shape (...) on ``w``'s device. On CUDA, ``eigvals`` goes through MAGMA's hybrid ``geev``,
    matrix by matrix with transfers and synchronisations between host and device: on an H100,
    ρ of a pack of 28 SRNNs (100 units) took about 320 ms there against 45 ms on one CPU
    thread, and at every evaluation of ``synthetic-max-length`` it was most of the pack's time
    (RESULTS.md, "spectral radius on a GPU").
    """
    if w.dim() < 2 or w.shape[-1] != w.shape[-2]:
        raise ValueError(f"spectral_radius: expected (..., n, n), got {tuple(w.shape)}")
    host = w.detach().to(device="cpu", dtype=torch.float64)
    return torch.linalg.eigvals(host).abs().amax(dim=-1).to(w.device)


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
