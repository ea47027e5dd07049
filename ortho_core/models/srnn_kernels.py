"""The time loops of the packed SRNN (:mod:`ortho_core.models.srnn`): forward states, hand-written
BPTT and the weight gradients, with the hidden states in a (K, T, B, H) buffer.

A 100-unit network is far too small for per-operation overhead to hide behind its arithmetic,
so every step is a few whole-pack operations writing into preallocated buffers
(``benchmarks/srnn_throughput.py`` and ``benchmarks/pixel_throughput.py`` measure them):

- forward: the input projection of every :data:`PROJECTION_STEPS` steps is one batched matmul
  into the states buffer (pre-activations b_h + W_xh x_t, still in cache when the steps read
  them); on CPU step t is then one ``baddbmm`` computing −2·a_t
  (a_t = that + W_hh h_{t−1}, by a contiguous copy of W_hhᵀ, :func:`step_weights`; scaling
  by −2 is exact) into a scratch and two elementwise passes,
  σ in place and h_t = 1 − 2σ(−2a_t) = tanh(a_t) written back into the buffer (PyTorch's CPU
  sigmoid is several times faster than its tanh); elsewhere a ``baddbmm`` and a ``tanh``;
- backward: step t is one fused ``tanh_backward`` (∂L/∂a_t = ∂L/∂h_t · (1 − h_t²), one pass)
  and one ``bmm`` (∂L/∂h_{t−1} = ∂L/∂a_t · W_hh); the weight gradients are single matmuls over
  all T·B rows (:func:`weight_grads`).

On a CPU with several intra-op threads, running each small operation across all threads costs a
synchronisation per operation, 3 per step — and on a shared machine a thread that waits for a
busy core stalls all of them. The pack's members are independent, so :func:`in_member_blocks`
instead splits the pack into one contiguous block of members per thread, and each thread runs
the whole time loop of its block with single-threaded operations (PyTorch releases the GIL inside
them): no synchronisation until the end of the loop. Every member's numbers are those of the
same operations on the whole pack.

On CPU the loops of :func:`forward_states` and :func:`backward` run in C++
(:mod:`ortho_core.models.srnn_native`: the same operations with one fused elementwise pass
per step) where that extension builds, and as written here otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

import torch
from torch import Tensor

from ortho_core.models import srnn_native
from ortho_core.subnormals import Subnormals, apply_mode, current_mode

PROJECTION_STEPS = 16
"""Steps whose input projection the forward computes at once, just before stepping through
them, so that the pre-activations are still in cache when each step reads them."""

_POOLS: dict[tuple[int, int], ThreadPoolExecutor] = {}


def states_shape(x: Tensor, w_hh: Tensor) -> tuple[int, int, int, int]:
    """(K, T, B, H) for input ``x`` (B, T, I) and recurrent weights ``w_hh`` (K, H, H)."""
    batch, steps, _ = x.shape
    if steps == 0:
        raise ValueError("PackedSRNN: the input has no time steps")
    return w_hh.shape[0], steps, batch, w_hh.shape[1]


def step_weights(w_hh: Tensor) -> Tensor:
    """W_hhᵀ (K, H, H) as the forward steps multiply by it: on CPU a contiguous copy, made once
    per pass of T steps, since there a batched product h_{t−1}W_hhᵀ that reads W_hh through a
    transposed view runs 1.2 to 1.5 times slower than one reading the copy
    (``benchmarks/step_layout.py``); elsewhere the view (cuBLAS reads either layout). The
    backward steps multiply by W_hh itself, already contiguous."""
    view = w_hh.transpose(1, 2)
    return view.contiguous() if w_hh.device.type == "cpu" else view


def member_blocks(n_members: int, device: torch.device) -> list[slice]:
    """The blocks of members :func:`in_member_blocks` runs in parallel: one per intra-op thread
    (at most one per member) on CPU, the whole pack elsewhere or with one thread."""
    workers = min(torch.get_num_threads(), n_members) if device.type == "cpu" else 1
    bounds = [round(i * n_members / workers) for i in range(workers + 1)]
    return [slice(lo, hi) for lo, hi in pairwise(bounds)]


def in_member_blocks(fn: Callable[[slice], None], n_members: int, device: torch.device) -> None:
    """Call ``fn`` on every block of :func:`member_blocks`, in parallel threads when there are
    several, each without autograd and in the calling thread's subnormal mode
    (:mod:`ortho_core.subnormals`). On CPU the operations run single-threaded (one member's
    16 × 100 operations are too small to gain from more threads): PyTorch's thread count is
    process-wide, so it is set to 1 for the duration and restored afterwards."""
    blocks = member_blocks(n_members, device)
    if device.type != "cpu":
        fn(blocks[0])
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        if len(blocks) == 1:
            fn(blocks[0])
            return
        pool = _POOLS.get((os.getpid(), len(blocks)))
        if pool is None:
            pool = _POOLS[(os.getpid(), len(blocks))] = ThreadPoolExecutor(len(blocks))
        mode = current_mode()
        for done in [pool.submit(_in_block, fn, block, mode) for block in blocks]:
            done.result()
    finally:
        torch.set_num_threads(threads)


def _in_block(fn: Callable[[slice], None], block: slice, mode: Subnormals) -> None:
    """``fn(block)`` with autograd off and subnormals in the submitting thread's ``mode`` (both
    are per thread and the pool's threads outlive a call; the loops are never differentiated
    through)."""
    apply_mode(mode)
    with torch.no_grad():
        fn(block)


def tanh_into(a: Tensor, out: Tensor, one: Tensor) -> None:
    """``out`` = tanh(``a``), overwriting ``a`` (which may be ``out``); ``one`` is a 0-d tensor
    holding 1.

    On CPU this is 1 − 2σ(−2a): the absolute error stays below 2·10⁻⁷ in float32 (tanh's
    own: 3·10⁻⁸) and 4·10⁻¹⁶ in float64. Elsewhere tanh itself.
    """
    if a.device.type == "cpu":
        a.mul_(-2.0)
    _activate(a, out, one)


def _pre_scale(device: torch.device) -> float:
    """The factor the forward step applies to a_t for :func:`_activate` (exact: a power of 2)."""
    return -2.0 if device.type == "cpu" else 1.0


def _activate(scaled: Tensor, out: Tensor, one: Tensor) -> None:
    """``out`` = tanh(a) from ``scaled`` = a·:func:`_pre_scale`, overwriting ``scaled``."""
    if scaled.device.type != "cpu":
        torch.tanh(scaled, out=out)
        return
    scaled.sigmoid_()
    torch.sub(one, scaled, alpha=2.0, out=out)


def forward_states(x: Tensor, w_xh: Tensor, w_hh: Tensor, b_h: Tensor, out: Tensor) -> Tensor:
    """All hidden states h_1 … h_T (K, T, B, H) for x (B, T, I), written into ``out``."""
    steps, batch = x.shape[1], x.shape[0]
    n_hidden = w_hh.shape[1]
    x_rows = x.transpose(0, 1).reshape(-1, x.shape[2])

    if srnn_native.applies(out):
        def native(m: slice) -> None:
            srnn_native.forward_states(x_rows, w_xh[m], w_hh[m], b_h[m], out[m],
                                       PROJECTION_STEPS)

        in_member_blocks(native, out.shape[0], out.device)
        return out

    def block(m: slice) -> None:
        hs = out[m]
        k = hs.shape[0]
        bias, w_xh_t, w_hh_t = b_h[m].unsqueeze(1), w_xh[m].transpose(1, 2), step_weights(w_hh[m])
        one = hs.new_ones(())
        scratch = torch.empty_like(hs[:, 0])
        scale = _pre_scale(hs.device)
        for start in range(0, steps, PROJECTION_STEPS):
            stop = min(start + PROJECTION_STEPS, steps)
            rows, pre = x_rows[start * batch:stop * batch], hs[:, start:stop].view(k, -1, n_hidden)
            if rows.shape[1] == 1:  # one input (pixels): an outer product, half a GEMM's time
                torch.addcmul(bias, rows, w_xh_t, out=pre)
            else:
                torch.baddbmm(bias, rows.expand(k, -1, -1), w_xh_t, out=pre)
            for t in range(start, stop):
                if t == 0:
                    tanh_into(hs[:, 0], hs[:, 0], one)
                    continue
                torch.baddbmm(hs[:, t], hs[:, t - 1], w_hh_t, beta=scale, alpha=scale,
                              out=scratch)
                _activate(scratch, hs[:, t], one)

    in_member_blocks(block, out.shape[0], out.device)
    return out


def last_state(x: Tensor, w_xh: Tensor, w_hh: Tensor, b_h: Tensor) -> Tensor:
    """h_T (K, B, H) for x (B, T, I) without keeping the earlier states (no gradients)."""
    k, steps, batch, n_hidden = states_shape(x, w_hh)
    h = torch.zeros(k, batch, n_hidden, dtype=x.dtype, device=x.device)

    def block(m: slice) -> None:
        h_m = h[m]
        bias = b_h[m].unsqueeze(1)
        w_xh_t, w_hh_t = w_xh[m].transpose(1, 2), step_weights(w_hh[m])
        a = torch.empty_like(h_m)
        one = h.new_ones(())
        for t in range(steps):
            torch.baddbmm(bias, x[:, t].expand(h_m.shape[0], -1, -1), w_xh_t, out=a)
            a.baddbmm_(h_m, w_hh_t)
            tanh_into(a, h_m, one)

    in_member_blocks(block, k, x.device)
    return h


def backward_states(hs: Tensor, w_hh: Tensor, grad: Tensor, out: Tensor,
                    inputs: Tensor | None = None, sums: Tensor | None = None) -> Tensor:
    """∂L/∂a_t for all steps (K, T, B, H) into ``out``, from the hidden states ``hs`` and
    ∂L/∂h_T ``grad`` (K, B, H), for the whole pack (member blocks are the caller's). With
    ``inputs`` (J, T·B), the rows [x_t, 1]ᵀ of every step, ``sums`` (K, J, H) gains
    Σ_t inputs_t ∂a_t, every :data:`PROJECTION_STEPS` steps (:func:`backward`)."""
    steps, batch, n_hidden = hs.shape[1], hs.shape[2], hs.shape[3]
    k = hs.shape[0]
    da = out
    dh = grad.clone(memory_format=torch.contiguous_format)
    torch.ops.aten.tanh_backward.grad_input(dh, hs[:, -1], grad_input=da[:, -1])
    done = steps  # ∂a of the steps from here on are written and not yet summed
    for t in range(steps - 1, -1, -1):
        if t:
            torch.bmm(da[:, t], w_hh, out=dh)
            torch.ops.aten.tanh_backward.grad_input(dh, hs[:, t - 1], grad_input=da[:, t - 1])
        first = t - 1 if t else 0
        if sums is not None and inputs is not None and first % PROJECTION_STEPS == 0 \
                and done > first:
            rows = da[:, first:done].reshape(k, (done - first) * batch, n_hidden)
            sums.baddbmm_(inputs[:, first * batch:done * batch].expand(k, -1, -1), rows)
            done = first
    return da


def backward(x: Tensor, hs: Tensor, w_hh: Tensor, grad: Tensor, out: Tensor,
             needs: Sequence[bool] = (True, True, True)) -> tuple[Tensor | None, ...]:
    """∂L/∂a_t into ``out`` and the weight gradients (those of :func:`weight_grads`) from
    ∂L/∂h_T ``grad``, in member blocks (:func:`in_member_blocks`).

    ∂W_xh and ∂b_h (Σ_t ∂a_tᵀ x_t and Σ_t ∂a_t) are accumulated every
    :data:`PROJECTION_STEPS` steps inside the time loop, from the rows of ∂a just written
    (still in cache), as one product with [x_t, 1]; a pass over the whole (K, T, B, H) buffer
    afterwards would read it from memory again. ∂W_hh is one product over all steps at the
    end, as in :func:`weight_grads` (in C++, :mod:`.srnn_native`, accumulated with them)."""
    parts: dict[int, tuple[Tensor | None, ...]] = {}
    native = srnn_native.applies(out)
    steps, batch = x.shape[1], x.shape[0]
    inputs = None
    if needs[0] or needs[2]:
        x_rows = x.transpose(0, 1).reshape(steps * batch, x.shape[2])
        inputs = torch.cat([x_rows, x_rows.new_ones(steps * batch, 1)], 1).t().contiguous()

    def block(m: slice) -> None:
        sums = None if inputs is None else hs.new_zeros(hs[m].shape[0], inputs.shape[0],
                                                         hs.shape[3])
        if native:
            k, n_hidden = hs[m].shape[0], hs.shape[3]
            grad_hh = hs.new_zeros(k, n_hidden, n_hidden) if needs[1] else None
            srnn_native.backward_states(hs[m], w_hh[m], grad[m], out[m], inputs, sums, grad_hh,
                                        PROJECTION_STEPS)
        else:
            backward_states(hs[m], w_hh[m], grad[m], out[m], inputs, sums)
            _, grad_hh, _ = weight_grads(x, hs[m], out[m], (False, needs[1], False))
        grad_xh = grad_bh = None
        if sums is not None:
            grad_xh = sums[:, :-1].transpose(1, 2) if needs[0] else None
            grad_bh = sums[:, -1] if needs[2] else None
        parts[m.start] = grad_xh, grad_hh, grad_bh

    in_member_blocks(block, hs.shape[0], hs.device)
    ordered = [parts[start] for start in sorted(parts)]
    if len(ordered) == 1:
        return ordered[0]
    return tuple(None if gs[0] is None else torch.cat(gs) for gs in zip(*ordered, strict=True))


def weight_grads(x: Tensor, hs: Tensor, da: Tensor,
                 needs: Sequence[bool] = (True, True, True)) -> tuple[Tensor | None, ...]:
    """∂L/∂W_xh (K, H, I), ∂L/∂W_hh (K, H, H) and ∂L/∂b_h (K, H) from the input ``x``
    (B, T, I), the hidden states ``hs`` and ∂L/∂a_t ``da`` (both (K, T, B, H)): the BPTT sums
    Σ_t ∂a_tᵀ x_t, Σ_{t≥2} ∂a_tᵀ h_{t−1} and Σ_t ∂a_t (G eq. 3.2), each as one matmul over all
    T·B rows. ``needs`` says which of the three to compute (None for the others).

    Scaling ``da`` at step t by c_t gives Σ_t c_t·(temporal gradient at t), which is how
    :func:`ortho_core.temporal.combine` weights temporal gradients without storing them."""
    k, steps, batch, n_hidden = hs.shape
    rows = da.reshape(k, steps * batch, n_hidden)
    grad_w_xh = grad_w_hh = grad_b_h = None
    if needs[0]:
        x_rows = x.transpose(0, 1).reshape(steps * batch, x.shape[2])
        grad_w_xh = torch.matmul(x_rows.t(), rows).transpose(1, 2)
    if needs[1]:
        if steps > 1:
            later = da[:, 1:].reshape(k, (steps - 1) * batch, n_hidden)
            earlier = hs[:, :-1].reshape(k, (steps - 1) * batch, n_hidden)
            grad_w_hh = torch.bmm(later.transpose(1, 2), earlier)
        else:
            grad_w_hh = hs.new_zeros((k, n_hidden, n_hidden))
    if needs[2]:
        grad_b_h = rows.sum(dim=1)
    return grad_w_xh, grad_w_hh, grad_b_h
