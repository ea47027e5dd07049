"""Quantities logged during training: the spectral radius ρ(W_hh) of M Fig. 2 and G Alg. 3.1,
and per-member gradient norms ‖∇W‖ (M Figs. 2 and 3b; the clipped step of G §3.4).

All functions take packed tensors whose leading dimension(s) index the members.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import Tensor


def _eigvals_pool() -> ThreadPoolExecutor:
    """A pool of one thread per CPU at most, each started by the first split that needs it, so
    a process only ever starts as many as its largest split (a split into more parts than
    CPUs queues the rest)."""
    return ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="eigvals")


_EIGVALS = _eigvals_pool()
"""The threads :func:`spectral_radius` splits a batch over."""


def _new_pool() -> None:
    """A fresh :data:`_EIGVALS` in a forked child, whose copy has no threads behind it."""
    global _EIGVALS
    _EIGVALS = _eigvals_pool()


os.register_at_fork(after_in_child=_new_pool)


def spectral_radius(w: Tensor, threads: int | None = None) -> Tensor:
    """ρ(W) = max |λ| over the eigenvalues of each square matrix in ``w`` (..., n, n).

    Computed with ``torch.linalg.eigvals`` in float64 (eigenvalues of a non-symmetric matrix
    are sensitive to rounding) on the CPU, whatever ``w``'s device; the result is float64 of
    shape (...) on ``w``'s device. On CUDA, ``eigvals`` goes through MAGMA's hybrid ``geev``,
    matrix by matrix with transfers and synchronisations between host and device: on an H100,
    ρ of a pack of 28 SRNNs (100 units) took about 320 ms there against 45 ms on one CPU
    thread, and at every evaluation of ``synthetic-max-length`` it was most of the pack's time
    (RESULTS.md, "spectral radius on a GPU").

    LAPACK's ``geev`` runs one matrix at a time on one thread (about 1.5 ms for 100 units), so
    a pack's matrices are split into ``threads`` near-equal parts (at least 1; default:
    torch's thread count, which a trial sets from its ``resources.cpu``) computed side by side;
    each matrix's value is the same bit for bit whatever the split
    (``benchmarks/spectral_radius.py`` measures the gain).
    """
    if w.dim() < 2 or w.shape[-1] != w.shape[-2]:
        raise ValueError(f"spectral_radius: expected (..., n, n), got {tuple(w.shape)}")
    if threads is not None and threads < 1:
        raise ValueError(f"spectral_radius: threads must be at least 1, got {threads}")
    host = w.detach().to(device="cpu", dtype=torch.float64)
    flat = host.reshape(-1, *host.shape[-2:])
    parts = max(1, min(threads or torch.get_num_threads(), len(flat)))
    if parts == 1:
        radii = _radii(flat)
    else:
        radii = torch.cat(list(_EIGVALS.map(_radii, flat.tensor_split(parts))))
    return radii.reshape(host.shape[:-2]).to(w.device)


def _radii(w: Tensor) -> Tensor:
    """ρ of each matrix of ``w`` (B, n, n), on the calling thread."""
    return torch.linalg.eigvals(w).abs().amax(dim=-1)


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
