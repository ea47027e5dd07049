"""Packed deep orthogonal networks, plain ReLU networks and Orth/ReLU networks (N §2, §6).

An *orthogonal layer* (N eq. 1) is z = Q a + b with Q square orthogonal, followed by the
sign-flip nonlinearity g of N eq. 2 (:func:`sign_flip`): the second half of the vector changes
sign where the matching entry of the first half is negative. g multiplies every entry by ±1,
so it preserves the norm of the activations and of the back-propagated gradients exactly,
and through an orthogonal stack ‖∂J/∂a^[l]‖ is the same at every layer (N eqs. 3-4).

Layer kinds of a plan (:func:`layer_plan`):

- ``orth``: Q a + b, then g (Q (n, n) kept orthogonal by the optimiser);
- ``flip``: W a + b with an unconstrained W, then g: the first and last layer of an
  orthogonal net whose input or output width differs from the hidden width (N §6.3);
- ``relu``: W a + b, then ReLU;
- ``linear``: W a + b (the output layer of ReLU and Orth/ReLU nets; its z are the logits).

In every net the last layer's activations are the logits of the softmax cross-entropy (N
§6.1: "activations of the last layer before softmax cross entropy").

A pack of K members keeps every orthogonal matrix of the net in one tensor ``q`` (L_orth, K,
n, n) (one batched matrix exponential per optimiser step), their biases in ``q_bias``
(K, L_orth, n), and the other layers as :class:`~ortho_core.models.mlp.PackedLinear`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ortho_core.models.mlp import PackedLinear, packed

Kind = Literal["orth", "flip", "relu", "linear"]


def sign_flip(z: Tensor) -> Tensor:
    """N eq. 2 on the last dimension (even width n): a_i = z_i for i ≤ n/2; for i > n/2,
    a_i = −z_i where z_{i−n/2} < 0, else z_i."""
    half = z.shape[-1] // 2
    first, second = z[..., :half], z[..., half:]
    return torch.cat([first, torch.where(first < 0, -second, second)], dim=-1)


def layer_plan(variant: str, layers: int, n_in: int, hidden: int, n_out: int,
               block: int = 1) -> list[tuple[Kind, int, int]]:
    """The (kind, in width, out width) of every layer of a net of ``layers`` layers.

    - ``relu``: ``layers − 1`` ReLU layers of width ``hidden``, then a linear output layer.
    - ``orth``: orthogonal layers of width ``hidden``; the first is a ``flip`` layer when
      ``n_in`` ≠ ``hidden`` and the last is one when ``n_out`` ≠ ``hidden`` (N §6.3: with
      MNIST, 2 + 50 internal orthogonal layers).
    - ``orth_relu``: blocks of one ReLU layer followed by ``block`` orthogonal layers (N Fig. 2),
      the first layer a ReLU layer, then a linear output layer.
    """
    if variant == "orth":
        if layers == 1:
            return [("orth" if n_in == hidden == n_out else "flip", n_in, n_out)]
        plan: list[tuple[Kind, int, int]] = [("orth" if n_in == hidden else "flip", n_in, hidden)]
        plan += [("orth", hidden, hidden)] * (layers - 2)
        return [*plan, ("orth" if n_out == hidden else "flip", hidden, n_out)]
    plan = []
    for i in range(layers - 1):
        orth = variant == "orth_relu" and i % (block + 1) != 0
        plan.append(("orth" if orth else "relu", n_in if i == 0 else hidden, hidden))
    return [*plan, ("linear", n_in if layers == 1 else hidden, n_out)]


def haar_orthogonal(n: int, generator: torch.Generator) -> Tensor:
    """A Haar-distributed orthogonal n × n matrix in float64 (QR of a Gaussian matrix with
    the signs of R's diagonal moved into Q)."""
    q, r = torch.linalg.qr(torch.randn(n, n, generator=generator, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r)).where(torch.diagonal(r) != 0, 1.0)


class OrthogonalNet(nn.Module):
    """K members of the net described by ``plan`` (:func:`layer_plan`), in ``dtype``.

    Initial weights, drawn per member from its own generator, layer by layer: Q Haar
    orthogonal (``orth_init="haar"``) or I (``"identity"``: with zero biases an orthogonal
    stack then starts as a composition of sign-flips, and g∘g is the identity); ReLU
    weights N(0, 2/fan_in) (He); ``flip`` and ``linear`` weights Glorot normal
    N(0, 2/(fan_in + fan_out)); biases 0 (N does not state its initialisation).
    """

    def __init__(self, plan: Sequence[tuple[Kind, int, int]], generators: Sequence[torch.Generator],
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None,
                 orth_init: str = "haar"):
        super().__init__()
        self.plan = list(plan)
        k = len(generators)
        self.members = k
        orth = [i for i, (kind, _, _) in enumerate(self.plan) if kind == "orth"]
        n = self.plan[orth[0]][1] if orth else 0
        kw = {"dtype": dtype, "device": device}
        self.q = nn.Parameter(torch.zeros(len(orth), k, n, n, **kw))
        self.q_bias = nn.Parameter(torch.zeros(k, len(orth), n, **kw))
        self.dense = nn.ModuleList(PackedLinear(k, i, o, **kw)
                                   for kind, i, o in self.plan if kind != "orth")
        with torch.no_grad():
            for member, g in enumerate(generators):
                index_q, index_d = 0, 0
                for kind, fan_in, fan_out in self.plan:
                    if kind == "orth":
                        q = haar_orthogonal(n, g) if orth_init == "haar" else torch.eye(n)
                        self.q[index_q, member] = q.to(dtype)
                        index_q += 1
                        continue
                    std = (2.0 / (fan_in if kind == "relu" else fan_in + fan_out)) ** 0.5
                    w = torch.randn(fan_out, fan_in, generator=g, dtype=torch.float64) * std
                    self.dense[index_d].weight[member] = w.to(dtype)
                    index_d += 1

    def decayed(self) -> list[bool]:
        """Per tensor of :meth:`dense_params`: whether L2 weight decay applies to it (the
        weight matrices of ReLU layers)."""
        kinds = [kind for kind, _, _ in self.plan if kind != "orth"]
        return [flag for kind in kinds for flag in (kind == "relu", False)]

    def dense_params(self) -> list[Tensor]:
        """The unconstrained parameters: weight and bias of every non-orthogonal layer."""
        return [t for layer in self.dense for t in (layer.weight, layer.bias)]

    def forward(self, x: Tensor, keep: bool = False) -> tuple[Tensor, list[Tensor]]:
        """Logits (K, B, n_out) for the shared input x (B, n_in), and (with ``keep``) the
        activations a^[1..L] of every layer, each (K, B, width) or (B, width) for K = 1, in
        the graph (for ∂J/∂a^[l])."""
        qs, qb = self.q.unbind(0), self.q_bias.unbind(1)
        acts: list[Tensor] = []
        h, index_q, index_d = x, 0, 0
        for kind, _, _ in self.plan:
            if kind == "orth":
                h = self._orth(h, qs[index_q], qb[index_q])
                index_q += 1
            else:
                h = self.dense[index_d](h)
                index_d += 1
                if kind == "flip":
                    h = sign_flip(h)
                elif kind == "relu":
                    h = torch.relu(h)
            if keep:
                acts.append(h)
        return packed(h), acts

    def _orth(self, a: Tensor, q: Tensor, b: Tensor) -> Tensor:
        """g(Q a + b) for every member; a (B, n) shared, (K, B, n), or (B, n) for K = 1."""
        if self.members == 1:
            return sign_flip(F.linear(a, q.squeeze(0), b.squeeze(0)))
        if a.dim() == 2:
            a = a.expand(self.members, *a.shape)
        return sign_flip(torch.baddbmm(b.unsqueeze(1), a, q.transpose(1, 2)))
