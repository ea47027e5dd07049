"""A pack of K independent simple recurrent networks (SRNN, M §III-A; G §1.3), trained together.

Member k computes h_t = tanh(W_xh x_t + W_hh h_{t-1} + b_h) from h_0 = 0 and reads out
y = W_hy h_T + b_y at the last step only (logits for softmax CE, or a linear output for MSE).
All members see the same input batch x (B, T, I) and own their weights, which carry a leading
pack dimension K.

The recurrence is a custom autograd function with hand-written backpropagation through time,
because a 100-unit network is far too small for per-operation overhead to hide behind its
arithmetic; its time loops are in :mod:`ortho_core.models.srnn_kernels` (whole-pack operations
per step into preallocated buffers; on a multi-core CPU one thread per block of members) and,
on CUDA, captured as graphs by :mod:`ortho_core.models.srnn_cuda_graph`
(``benchmarks/srnn_throughput.py`` and ``benchmarks/pixel_throughput.py`` measure them).

Nothing is allocated per step, and the cost is linear in T. The two (K, T, B, H) buffers
(states and ∂L/∂a_t) are kept by the pack and reused from one training iteration to the next
(:class:`_Workspace`). Without gradients (evaluation) the forward keeps only the current state,
so memory does not grow with T.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn
from torch.autograd.function import FunctionCtx, once_differentiable

from ortho_core.config import one_of, positive, require
from ortho_core.init.gaussian import gaussian
from ortho_core.init.normalised import normalised
from ortho_core.init.spectral import rescale_spectral_radius
from ortho_core.models.srnn_cuda_graph import (
    GRAPH_BYTES,
    GraphedLoops,
    GraphKey,
    graph_bytes,
    graph_key,
    graphs_apply,
)
from ortho_core.models.srnn_kernels import (
    backward,
    forward_states,
    last_state,
    states_shape,
    weight_grads,
)

__all__ = ["PackedSRNN", "SRNNInit", "Trace", "init_srnn", "weight_grads"]


@dataclass(frozen=True)
class SRNNInit:
    """How one member's initial weights are drawn."""

    seed: int
    """Seed of the member's own CPU generator; the same seed gives the same weights on every
    device, dtype and pack."""
    scheme: Literal["normalised", "gaussian"] = "normalised"
    """``normalised``: Glorot's U(−√(6/(fan_in+fan_out)), +…) for all three matrices (M §III-A);
    ``gaussian``: N(0, init_std²) for all three (M §III-B, G Alg. 3.1)."""
    init_std: float = 0.1
    """σ of the Gaussian scheme (unused by ``normalised``)."""
    spectral_radius: float | None = None
    """ρ: if given, W_hh is rescaled to this spectral radius after drawing (G Alg. 3.1)."""

    def __post_init__(self) -> None:
        require(isinstance(self.seed, int) and not isinstance(self.seed, bool),
                "seed", "an integer", self.seed)
        one_of(self.scheme, ("normalised", "gaussian"), "scheme")
        positive(self.init_std, "init_std")
        if self.spectral_radius is not None:
            positive(self.spectral_radius, "spectral_radius")


def init_srnn(
    n_in: int,
    n_hidden: int,
    n_out: int,
    inits: Sequence[SRNNInit],
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> PackedSRNN:
    """A pack with one member per entry of ``inits``.

    Member k draws, from a CPU generator seeded with ``inits[k].seed`` and in float64, W_xh
    (H, I), W_hh (H, H) and W_hy (O, H) in that order; W_hh is then rescaled to
    ``spectral_radius`` if one is given; biases start at zero. Only then are the weights cast
    to ``dtype`` and moved to ``device``, so a member's initial weights are the same on CPU and
    GPU and the same inside a pack as alone.
    """
    if not inits:
        raise ValueError("init_srnn: a pack needs at least one member")
    drawn = [_draw_member(n_in, n_hidden, n_out, init) for init in inits]
    w_xh, w_hh, w_hy = (
        torch.stack(ws).to(dtype=dtype, device=device) for ws in zip(*drawn, strict=True)
    )
    k = len(inits)
    b_h = torch.zeros(k, n_hidden, dtype=dtype, device=device)
    b_y = torch.zeros(k, n_out, dtype=dtype, device=device)
    return PackedSRNN(w_xh, w_hh, b_h, w_hy, b_y)


def _draw_member(n_in: int, n_hidden: int, n_out: int, init: SRNNInit) -> tuple[Tensor, ...]:
    """W_xh, W_hh, W_hy of one member, float64 on CPU (see :func:`init_srnn`)."""
    generator = torch.Generator().manual_seed(init.seed)

    def draw(shape: tuple[int, int]) -> Tensor:
        if init.scheme == "normalised":
            return normalised(shape, generator)
        return gaussian(shape, init.init_std, generator)

    w_xh = draw((n_hidden, n_in))
    w_hh = draw((n_hidden, n_hidden))
    w_hy = draw((n_out, n_hidden))
    if init.spectral_radius is not None:
        w_hh = rescale_spectral_radius(w_hh, init.spectral_radius)
    return w_xh, w_hh, w_hy


class PackedSRNN(nn.Module):
    """K independent tanh SRNNs with a last-step readout; parameters carry a leading K.

    Parameters: ``w_xh`` (K, H, I), ``w_hh`` (K, H, H), ``b_h`` (K, H), ``w_hy`` (K, O, H),
    ``b_y`` (K, O). Inputs are cast to the parameters' dtype.
    """

    cuda_graphs: bool
    """Whether training passes on CUDA run the time loops as CUDA graphs (default True; set to
    False to compare, or when the parameters are replaced rather than updated in place at
    every iteration, which forces a new capture each time)."""

    def __init__(self, w_xh: Tensor, w_hh: Tensor, b_h: Tensor, w_hy: Tensor, b_y: Tensor):
        super().__init__()
        k, h = w_xh.shape[:2]
        o = w_hy.shape[1]
        expected = {"w_hh": (k, h, h), "b_h": (k, h), "w_hy": (k, o, h), "b_y": (k, o)}
        for name, tensor in (("w_hh", w_hh), ("b_h", b_h), ("w_hy", w_hy), ("b_y", b_y)):
            if tuple(tensor.shape) != expected[name]:
                raise ValueError(f"PackedSRNN: {name} must be {expected[name]}, "
                                 f"got {tuple(tensor.shape)}")
        self.w_xh = nn.Parameter(w_xh)
        self.w_hh = nn.Parameter(w_hh)
        self.b_h = nn.Parameter(b_h)
        self.w_hy = nn.Parameter(w_hy)
        self.b_y = nn.Parameter(b_y)
        self._workspace = _Workspace()
        self.cuda_graphs = True

    @property
    def n_members(self) -> int:
        """K, the number of members in the pack."""
        return self.w_xh.shape[0]

    def forward(self, x: Tensor) -> Tensor:
        """Outputs (K, B, O) at the last step for the shared input ``x`` (B, T, I).

        With gradients enabled, the hidden states are kept for the backward pass in a buffer
        the pack reuses at its next such forward: backpropagate through one forward before
        running the next (autograd raises its in-place-modification error otherwise; a wrong
        gradient is impossible). Without gradients only the current state is kept.
        """
        x = x.to(self.w_xh.dtype)
        weights = (self.w_xh, self.w_hh, self.b_h)
        if torch.is_grad_enabled() and any(t.requires_grad for t in (x, *weights)):
            h_last = _Recurrence.apply(x, *weights, self._workspace, self.cuda_graphs)
        else:
            h_last = last_state(x, *(w.detach() for w in weights))
        return self.readout(h_last)

    def readout(self, h: Tensor) -> Tensor:
        """W_hy h + b_y for hidden states ``h`` (K, B, H) → (K, B, O)."""
        return torch.baddbmm(self.b_y.unsqueeze(1), h, self.w_hy.transpose(1, 2))

    def bptt(self, x: Tensor, losses: Callable[[Tensor], Tensor]) -> Trace:
        """Forward and hand-written backward pass for the shared input ``x`` (B, T, I), keeping
        what the temporal gradients need (G eqs. 3.1-3.3, :mod:`ortho_core.temporal`).

        ``losses`` maps the outputs (K, B, O) to one loss per member (K,); the gradients are
        those of their sum, computed by the same operations as autograd through
        :meth:`forward` (so the same numbers). The state and gradient buffers are the pack's
        reused ones: the trace is valid until the next forward with gradients.
        """
        x = x.to(self.w_xh.dtype)
        w_xh, w_hh, b_h = (w.detach() for w in (self.w_xh, self.w_hh, self.b_h))
        loops = None
        if self.cuda_graphs and graphs_apply(x):
            loops = self._workspace.graphs(x, w_xh, w_hh, b_h)
            hs = loops.forward(x)
        else:
            shape = states_shape(x, w_hh)
            hs = forward_states(x, w_xh, w_hh, b_h, self._workspace.take("states", shape, x))
        h_last = hs[:, -1].clone().requires_grad_()
        with torch.enable_grad():
            loss = losses(self.readout(h_last))
            grad_hy, grad_by, grad_h = torch.autograd.grad(loss.sum(),
                                                           [self.w_hy, self.b_y, h_last])
        if loops is not None:
            grad_xh, grad_hh, grad_bh = loops.backward(grad_h)
            da = loops.da
        else:
            da = self._workspace.take("grads", hs.shape, hs)
            grad_xh, grad_hh, grad_bh = backward(x, hs, w_hh, grad_h, da)
        return Trace(loss.detach(), [grad_xh, grad_hh, grad_bh, grad_hy, grad_by], x, hs, da)


@dataclass
class Trace:
    """One hand-written BPTT pass of a pack (:meth:`PackedSRNN.bptt`)."""

    losses: Tensor
    """(K,) each member's loss."""
    grads: list[Tensor]
    """∂L/∂θ in the order of :meth:`PackedSRNN.parameters` (W_xh, W_hh, b_h, W_hy, b_y)."""
    x: Tensor
    """(B, T, I) the input, in the parameters' dtype."""
    hs: Tensor
    """(K, T, B, H) the hidden states h_1 … h_T."""
    da: Tensor
    """(K, T, B, H) ∂L/∂a_t, a_t the pre-activation at step t."""


class _Workspace:
    """The (K, T, B, H) buffers of a pack, reused from one training iteration to the next, and
    its CUDA graphs (:mod:`ortho_core.models.srnn_cuda_graph`).

    On CPU a fresh tensor of many megabytes is paid for again at every iteration in page faults
    (glibc hands large blocks back to the system when they are freed);
    ``benchmarks/srnn_throughput.py`` measures what reusing them saves. Writing into a buffer
    bumps its version counter, so autograd refuses (rather than miscomputes) a backward pass
    through a forward whose buffer has since been reused.
    """

    def __init__(self) -> None:
        self._buffers: dict[str, Tensor] = {}
        self._graphs: OrderedDict[GraphKey, GraphedLoops] = OrderedDict()
        """Captured graphs by input shape, least recently used first."""

    def take(self, name: str, shape: tuple[int, ...], like: Tensor) -> Tensor:
        """The buffer ``name`` with ``shape`` and ``like``'s dtype and device (contents
        undefined), allocated only when no such buffer is held yet."""
        buffer = self._buffers.get(name)
        if (buffer is None or buffer.shape != shape or buffer.dtype != like.dtype
                or buffer.device != like.device):
            buffer = torch.empty(shape, dtype=like.dtype, device=like.device)
            self._buffers[name] = buffer
        return buffer

    def graphs(self, x: Tensor, w_xh: Tensor, w_hh: Tensor, b_h: Tensor) -> GraphedLoops:
        """The CUDA graphs of the time loops for ``x`` and these weights, captured the first
        time this input shape and dtype come.

        A pack keeps the graphs of several shapes, so that batches whose length varies
        (``length_jitter``: each batch's T in [T₀, 1.1T₀)) replay graphs rather than capture
        one at every change of length; the least recently used go first once their state
        buffers would pass :data:`GRAPH_BYTES`. Weights at other addresses (another pack)
        make every graph held stale.
        """
        key = graph_key(x)
        held = self._graphs.get(key)
        if held is not None and held.matches(x, w_xh, w_hh, b_h):
            self._graphs.move_to_end(key)
            return held
        if held is not None or any(not g.reads(w_xh, w_hh, b_h) for g in self._graphs.values()):
            self._graphs.clear()
        need = graph_bytes(x, w_hh)
        while self._graphs and sum(g.nbytes for g in self._graphs.values()) + need > GRAPH_BYTES:
            self._graphs.popitem(last=False)
        self._graphs[key] = GraphedLoops(x, w_xh, w_hh, b_h)
        return self._graphs[key]


class _Recurrence(torch.autograd.Function):
    """h_1 … h_T of the pack with manual BPTT; returns h_T (K, B, H). Buffers come from
    ``workspace`` when one is given, and so do CUDA graphs (:func:`graphs_apply`) when it is
    given with ``graphs``."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: FunctionCtx,
        x: Tensor,
        w_xh: Tensor,
        w_hh: Tensor,
        b_h: Tensor,
        workspace: _Workspace | None = None,
        graphs: bool = False,
    ) -> Tensor:
        shape = states_shape(x, w_hh)
        loops = None
        if workspace is None:
            hs = forward_states(x, w_xh, w_hh, b_h, x.new_empty(shape))
        elif graphs and graphs_apply(x):
            loops = workspace.graphs(x, w_xh, w_hh, b_h)
            hs = loops.forward(x)
        else:
            hs = forward_states(x, w_xh, w_hh, b_h, workspace.take("states", shape, x))
        ctx.save_for_backward(x, w_xh, w_hh, hs)
        ctx.workspace = workspace
        ctx.loops = loops
        return hs[:, -1].clone()

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        x, w_xh, w_hh, hs = ctx.saved_tensors
        needs = ctx.needs_input_grad[1:4]
        if ctx.loops is not None:
            da = ctx.loops.da
            grads: tuple[Tensor | None, ...] = tuple(
                g if need else None for g, need in zip(ctx.loops.backward(grad), needs,
                                                       strict=True))
        else:
            da = (torch.empty_like(hs) if ctx.workspace is None
                  else ctx.workspace.take("grads", hs.shape, hs))
            grads = backward(x, hs, w_hh, grad, da, needs)
        grad_x = None
        if ctx.needs_input_grad[0]:
            k, steps, batch, n_hidden = hs.shape
            rows = da.view(k, steps * batch, n_hidden)
            grad_x = (torch.matmul(rows, w_xh).sum(dim=0).view(steps, batch, x.shape[2])
                      .transpose(0, 1))
        return (grad_x, *grads, None, None)
