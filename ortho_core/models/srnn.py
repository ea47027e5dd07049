"""A pack of K independent simple recurrent networks (SRNN, M §III-A; G §1.3), trained together.

Member k computes h_t = tanh(W_xh x_t + W_hh h_{t-1} + b_h) from h_0 = 0 and reads out
y = W_hy h_T + b_y at the last step only (logits for softmax CE, or a linear output for MSE).
All members see the same input batch x (B, T, I) and own their weights, which carry a leading
pack dimension K.

The recurrence is a custom autograd function with hand-written backpropagation through time,
because a 100-unit network is far too small for per-operation overhead to hide behind its
arithmetic (benchmarks/srnn_throughput.py measures the result):

- forward: the input projection of all T steps is one batched matmul into a buffer
  (K, T, B, H) of pre-activations; each step then costs one ``baddbmm`` (adding W_hh h_{t-1})
  into a preallocated scratch and a tanh written back into the buffer (on CPU through the
  faster sigmoid, :func:`_tanh_into`), which ends up holding every hidden state;
- backward: 1 − h² for all steps in one pass; each step costs one ``bmm``
  (∂L/∂h_{t-1} = ∂L/∂a_t · W_hh) and one in-place product with 1 − h²_{t-1}; the weight
  gradients are then single matmuls over all T·B rows at once (∂W_hh = Σ_t ∂a_tᵀ h_{t-1}
  as one (K, H, (T−1)B) × (K, (T−1)B, H) product, ∂W_xh likewise with x).

Nothing is allocated per step, and the cost is linear in T. The two (K, T, B, H) buffers are
kept by the pack and reused from one training iteration to the next (:class:`_Workspace`).
Without gradients (evaluation) the forward keeps only the current state, so memory does not
grow with T. The same code runs on CPU and CUDA.
"""

from __future__ import annotations

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
            h_last = _Recurrence.apply(x, *weights, self._workspace)
        else:
            h_last = _last_state(x, *(w.detach() for w in weights))
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
        shape = _states_shape(x, w_hh)
        hs = _forward_states(x, w_xh, w_hh, b_h, out=self._workspace.take("states", shape, x))
        h_last = hs[:, -1].clone().requires_grad_()
        with torch.enable_grad():
            loss = losses(self.readout(h_last))
            grad_hy, grad_by, grad_h = torch.autograd.grad(loss.sum(),
                                                           [self.w_hy, self.b_y, h_last])
        da = _backward_states(hs, w_hh, grad_h, out=self._workspace.take("grads", shape, hs))
        grad_xh, grad_hh, grad_bh = weight_grads(x, hs, da)
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
    """The (K, T, B, H) buffers of a pack, reused from one training iteration to the next.

    On CPU a fresh tensor of many megabytes is paid for again at every iteration in page faults
    (glibc hands large blocks back to the system when they are freed);
    ``benchmarks/srnn_throughput.py`` measures what reusing them saves. Writing into a buffer
    bumps its version counter, so autograd refuses (rather than miscomputes) a backward pass
    through a forward whose buffer has since been reused.
    """

    def __init__(self) -> None:
        self._buffers: dict[str, Tensor] = {}

    def take(self, name: str, shape: tuple[int, ...], like: Tensor) -> Tensor:
        """The buffer ``name`` with ``shape`` and ``like``'s dtype and device (contents
        undefined), allocated only when no such buffer is held yet."""
        buffer = self._buffers.get(name)
        if (buffer is None or buffer.shape != shape or buffer.dtype != like.dtype
                or buffer.device != like.device):
            buffer = torch.empty(shape, dtype=like.dtype, device=like.device)
            self._buffers[name] = buffer
        return buffer


def _states_shape(x: Tensor, w_hh: Tensor) -> tuple[int, int, int, int]:
    """(K, T, B, H) for input ``x`` (B, T, I) and recurrent weights ``w_hh`` (K, H, H)."""
    batch, steps, _ = x.shape
    if steps == 0:
        raise ValueError("PackedSRNN: the input has no time steps")
    return w_hh.shape[0], steps, batch, w_hh.shape[1]


def _forward_states(
    x: Tensor, w_xh: Tensor, w_hh: Tensor, b_h: Tensor, out: Tensor | None = None
) -> Tensor:
    """All hidden states (K, T, B, H) for x (B, T, I), written into ``out`` if given; see
    the module docstring."""
    k, steps, batch, n_hidden = _states_shape(x, w_hh)
    hs = out if out is not None else x.new_empty((k, steps, batch, n_hidden))
    x_rows = x.transpose(0, 1).reshape(steps * batch, x.shape[2])
    torch.baddbmm(b_h.unsqueeze(1), x_rows.expand(k, -1, -1), w_xh.transpose(1, 2),
                  out=hs.view(k, steps * batch, n_hidden))
    one = hs.new_ones(())
    _tanh_into(hs[:, 0], hs[:, 0], one)
    w_hh_t = w_hh.transpose(1, 2)
    scratch = torch.empty(k, batch, n_hidden, dtype=hs.dtype, device=hs.device)
    for t in range(1, steps):
        torch.baddbmm(hs[:, t], hs[:, t - 1], w_hh_t, out=scratch)
        _tanh_into(scratch, hs[:, t], one)
    return hs


def _last_state(x: Tensor, w_xh: Tensor, w_hh: Tensor, b_h: Tensor) -> Tensor:
    """h_T (K, B, H) for x (B, T, I) without keeping the earlier states (no gradients)."""
    k, steps, batch, n_hidden = _states_shape(x, w_hh)
    bias = b_h.unsqueeze(1)
    w_xh_t, w_hh_t = w_xh.transpose(1, 2), w_hh.transpose(1, 2)
    h = torch.zeros(k, batch, n_hidden, dtype=x.dtype, device=x.device)
    a = torch.empty_like(h)
    one = h.new_ones(())
    for t in range(steps):
        torch.baddbmm(bias, x[:, t].expand(k, -1, -1), w_xh_t, out=a)
        a.baddbmm_(h, w_hh_t)
        _tanh_into(a, h, one)
    return h


def _tanh_into(a: Tensor, out: Tensor, one: Tensor) -> None:
    """``out`` = tanh(``a``), overwriting ``a``; ``one`` is a 0-d tensor holding 1.

    On CPU this is computed as 1 − 2σ(−2a): PyTorch's CPU sigmoid is several times faster than its
    tanh, which dominated the forward pass of large packs. The absolute error stays below 2·10⁻⁷
    in float32 (tanh's own: 3·10⁻⁸) and 4·10⁻¹⁶ in float64.
    Elsewhere tanh itself.
    """
    if a.device.type != "cpu":
        torch.tanh(a, out=out)
        return
    a.mul_(-2.0).sigmoid_()
    torch.sub(one, a, alpha=2.0, out=out)


def _backward_states(hs: Tensor, w_hh: Tensor, grad: Tensor, out: Tensor | None = None) -> Tensor:
    """∂L/∂a_t for all steps (K, T, B, H), from the hidden states ``hs`` and ∂L/∂h_T ``grad``
    (K, B, H); written into ``out`` if given."""
    steps = hs.shape[1]
    da = out if out is not None else torch.empty_like(hs)
    torch.addcmul(hs.new_ones(()), hs, hs, value=-1.0, out=da)
    dh = grad.clone(memory_format=torch.contiguous_format)
    for t in range(steps - 1, -1, -1):
        da[:, t].mul_(dh)
        if t == 0:
            break
        torch.bmm(da[:, t], w_hh, out=dh)
    return da


class _Recurrence(torch.autograd.Function):
    """h_1 … h_T of the pack with manual BPTT; returns h_T (K, B, H). Buffers come from
    ``workspace`` when one is given."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: FunctionCtx,
        x: Tensor,
        w_xh: Tensor,
        w_hh: Tensor,
        b_h: Tensor,
        workspace: _Workspace | None = None,
    ) -> Tensor:
        out = None if workspace is None else workspace.take("states", _states_shape(x, w_hh), x)
        hs = _forward_states(x, w_xh, w_hh, b_h, out=out)
        ctx.save_for_backward(x, w_xh, w_hh, hs)
        ctx.workspace = workspace
        return hs[:, -1].clone()

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        x, w_xh, w_hh, hs = ctx.saved_tensors
        out = None if ctx.workspace is None else ctx.workspace.take("grads", hs.shape, hs)
        da = _backward_states(hs, w_hh, grad, out=out)
        grad_x = None
        if ctx.needs_input_grad[0]:
            k, steps, batch, n_hidden = hs.shape
            rows = da.view(k, steps * batch, n_hidden)
            grad_x = (torch.matmul(rows, w_xh).sum(dim=0).view(steps, batch, x.shape[2])
                      .transpose(0, 1))
        grads = weight_grads(x, hs, da, ctx.needs_input_grad[1:4])
        return (grad_x, *grads, None)


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
