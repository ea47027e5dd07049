"""Temporal gradients of a pack of SRNNs (G §3.1, eqs. 3.1-3.3), from one backward pass.

With the loss L read at the last step T only (the synthetic problems), G defines the temporal
gradient at step k as the gradient with respect to the k-th replicate of a variable in the
unrolled network ("replicate the variable and take the derivative w.r.t. its k-th
replicate"); the gradient is their sum over k (eq. 3.2). For the SRNN
a_t = W_xh x_t + W_hh h_{t−1} + b_h, h_t = tanh(a_t), y = W_hy h_T + b_y:

- W_hh (eq. 3.1): ∇|_k = ∂L/∂a_k · ∂⁺a_k/∂W_hh = Σ_b δ_k h_{k−1}ᵀ, with δ_k = ∂L/∂a_k; zero
  at k = 1, since h_0 = 0 (G's code: "gW_rec[0] is null by design");
- W_xh and b_h (same definition): Σ_b δ_k x_kᵀ and Σ_b δ_k;
- W_hy and b_y (eq. 3.3): the readout acts at step T only, so its replicates at k < T do
  not touch L: ∇|_T is the whole ∂L/∂W_hy (∂L/∂b_y) and ∇|_k = 0 for k < T.

The temporal gradient of θ at step k stacks all five (G Alg. 3.2: {∇_θ L|_t}). All of them
come from ∂L/∂a_t of the one hand-written BPTT pass (:meth:`PackedSRNN.bptt
<ortho_core.models.srnn.PackedSRNN.bptt>`), which already loops over time; nothing is
recomputed per step.

Memory: the temporal gradients themselves would take K·T·|θ| numbers. What G's method needs
is less: the per-step norms (:func:`temporal_sq_norms`, K·T·5 numbers, computed over chunks
of steps so that at most :data:`CHUNK_ELEMENTS` numbers are held) and weighted sums
Σ_k c_k ∇|_k (:func:`combine`, which scales δ_k by c_k and reuses the gradient's own
matmuls: the cost of one more gradient).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ortho_core.models.srnn import Trace, weight_grads

CHUNK_ELEMENTS = 1 << 22
"""Bound on the numbers of per-step weight gradients that :func:`temporal_sq_norms` holds at
once (memory only, not results)."""

PARAMETERS = ("w_xh", "w_hh", "b_h", "w_hy", "b_y")
"""The order of the last axis of :func:`temporal_sq_norms` (that of the pack's parameters)."""


def temporal_sq_norms(trace: Trace) -> Tensor:
    """‖∇_p L|_t‖² for every member, step t and parameter p: (K, T, 5), the last axis in the
    order of :data:`PARAMETERS`; the norm of the stacked temporal gradient of θ, what G
    Fig. 3.1 plots ("w.r.t. all the variables of the model"), is the square root of their
    sum."""
    x, hs, da = trace.x, trace.hs, trace.da
    k, steps, _, n_hidden = hs.shape
    out = hs.new_zeros((k, steps, len(PARAMETERS)))
    chunk = max(1, CHUNK_ELEMENTS // (k * n_hidden * max(n_hidden, x.shape[2])))
    x_steps = x.transpose(0, 1)
    for start in range(0, steps, chunk):
        end = min(steps, start + chunk)
        d = da[:, start:end].transpose(-1, -2)
        out[:, start:end, 0] = torch.matmul(d, x_steps[start:end]).square().sum((-2, -1))
        first = max(start, 1)
        if first < end:
            g_hh = torch.matmul(da[:, first:end].transpose(-1, -2), hs[:, first - 1:end - 1])
            out[:, first:end, 1] = g_hh.square().sum((-2, -1))
    out[:, :, 2] = da.sum(dim=2).square().sum(-1)
    for j, grad in enumerate(trace.grads[3:], start=3):
        out[:, -1, j] = grad.reshape(k, -1).square().sum(-1)
    return out


def combine(trace: Trace, weights: Tensor) -> list[Tensor]:
    """Σ_t c_t ∇_θ L|_t for per-member, per-step weights ``weights`` c (K, T): one tensor per
    parameter, shaped like it. With c = 1 this is the gradient (G eq. 3.2)."""
    scaled = trace.da * weights[:, :, None, None]
    last = weights[:, -1]
    readout = [g * last.view(-1, *[1] * (g.dim() - 1)) for g in trace.grads[3:]]
    return [*weight_grads(trace.x, trace.hs, scaled), *readout]
