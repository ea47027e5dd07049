"""The packed SRNN's time loops captured as CUDA graphs, so that a training iteration launches
two graphs instead of a few kernels per time step.

At T = 784 the forward and backward loops launch about 4·T small kernels; on a GPU each costs
more to launch than to run for a 100-unit network. :class:`GraphedLoops` captures the forward
loop (:func:`~ortho_core.models.srnn_kernels.forward_states`) and the backward loop with the
weight gradients (:func:`~ortho_core.models.srnn_kernels.backward`) once per input shape and
dtype, reading the input and ∂L/∂h_T from static buffers it copies into, and the weights from
the pack's parameters themselves (updated in place by the optimisers, so the graphs see every
new value). A pack of K members then costs the launches of two graphs, whatever K and T.

:func:`graphs_apply` says when the graphs are used: on CUDA only, and not while another capture
is under way. The kernels are the same as without graphs, so are the numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor
from torch.autograd.graph import increment_version

from ortho_core.models.srnn_kernels import backward, forward_states, states_shape

GraphKey = tuple[tuple[int, ...], torch.dtype, torch.device]
"""What one pair of graphs is captured for: the input's shape, the dtype and the device."""


GRAPH_BYTES = 1 << 30
"""Bytes of state buffers (two (K, T, B, H) tensors per graph pair) that the graphs one pack
keeps for its input shapes may hold together. A pack of 28 of M's SRNN (B = 20, H = 100,
float32) holds 0.43 MiB per step, so every length ``length_jitter`` draws around T₀ (T₀/10 of
them, in [T₀, 1.1T₀)) stays captured up to T₀ ≈ 150 (M's adding problem stops near T₀ = 100:
about 450 MiB); past that, lengths drawn again after the least recently used ones went are
captured again."""


def graph_key(x: Tensor) -> GraphKey:
    """What the graphs for input ``x`` are captured for."""
    return (tuple(x.shape), x.dtype, x.device)


def graph_bytes(x: Tensor, w_hh: Tensor) -> int:
    """Bytes of the state buffers a pair of graphs for input ``x`` holds."""
    return 2 * math.prod(states_shape(x, w_hh)) * x.element_size()


def graphs_apply(x: Tensor) -> bool:
    """Whether the time loops for input ``x`` run as CUDA graphs: on a CUDA device, outside
    any capture under way."""
    return x.device.type == "cuda" and not torch.cuda.is_current_stream_capturing()


class GraphedLoops:
    """The forward and backward time loops of one pack for one input shape, as CUDA graphs.

    The weights are read where they are at capture; :meth:`matches` tells whether the graphs
    still fit (same input shape, dtype and device, weights at the same addresses).
    """

    def __init__(self, x: Tensor, w_xh: Tensor, w_hh: Tensor, b_h: Tensor):
        self.key: GraphKey = graph_key(x)
        self._weights = (w_xh, w_hh, b_h)
        self._addresses = _addresses(self._weights)
        self.nbytes = graph_bytes(x, w_hh)
        """Bytes of :attr:`hs` and :attr:`da`."""
        shape = states_shape(x, w_hh)
        self.x = x.detach().clone()
        self.hs = x.new_empty(shape)
        """(K, T, B, H) the hidden states of the last :meth:`forward`."""
        self.da = x.new_empty(shape)
        """(K, T, B, H) ∂L/∂a_t of the last :meth:`backward`."""
        self._grad = x.new_zeros((shape[0], shape[2], shape[3]))
        self._forward, _ = _capture(lambda: forward_states(self.x, w_xh, w_hh, b_h, self.hs))
        self._backward, self._grads = _capture(
            lambda: backward(self.x, self.hs, w_hh, self._grad, self.da))

    def matches(self, x: Tensor, w_xh: Tensor, w_hh: Tensor, b_h: Tensor) -> bool:
        """Whether these graphs compute the loops for ``x`` and these weights."""
        return graph_key(x) == self.key and self.reads(w_xh, w_hh, b_h)

    def reads(self, w_xh: Tensor, w_hh: Tensor, b_h: Tensor) -> bool:
        """Whether these graphs read these weights (they are where they were at capture)."""
        return _addresses((w_xh, w_hh, b_h)) == self._addresses

    def forward(self, x: Tensor) -> Tensor:
        """The hidden states (K, T, B, H) for ``x``: :attr:`hs`, overwritten at every call
        (its version counter is bumped, so autograd refuses a stale backward through it)."""
        self.x.copy_(x)
        self._forward.replay()
        increment_version(self.hs)
        return self.hs

    def backward(self, grad: Tensor) -> tuple[Tensor, ...]:
        """∂L/∂W_xh, ∂L/∂W_hh, ∂L/∂b_h (fresh tensors) from ∂L/∂h_T ``grad`` (K, B, H), for
        the states of the last :meth:`forward`; ∂L/∂a_t is left in :attr:`da`."""
        self._grad.copy_(grad)
        self._backward.replay()
        return tuple(g.clone() for g in self._grads if g is not None)


def _addresses(tensors: tuple[Tensor, ...]) -> tuple[int, ...]:
    return tuple(t.data_ptr() for t in tensors)


def _capture(fn: Callable[[], object]) -> tuple[torch.cuda.CUDAGraph, object]:
    """``fn`` run once on a side stream (warm-up: cuBLAS allocates its workspace) and then
    captured on it; returns the graph and what the captured call returned (tensors that the
    graph's replays overwrite)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        result = fn()
    return graph, result
