"""Packed deep feedforward nets: K independent multilayer perceptrons that share an input batch.

M's feedforward net (M eq. 6: 784-100×10-10, tanh) and K's MLP(L, M) (K eqs. 1-2, sigmoid or
ReLU) are both stacks of fully connected layers. A pack of K members (DESIGN.md "Packs") stores
layer l's weights as one tensor (K, out_l, in_l) and its biases as (K, out_l); every layer is
one batched matrix product (``baddbmm``) over the members, except the first, whose shared input
batch (B, in) meets all members' weights in one plain matrix product, and a pack of one member
uses plain matrix products throughout. Members never mix: member k's outputs and gradients
depend only on member k's parameters.

Layer weights are plain ``nn.Parameter`` tensors, so reparameterisations attach with PyTorch's
``torch.nn.utils.parametrize``: LCW's w = B_m v (:mod:`ortho_core.models.lcw`) and weight
normalisation's w = g·v/‖v‖ (:mod:`ortho_core.models.normalization`); ``layer.weight`` is then
always the effective weight.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ortho_core.models.normalization import PackedBatchNorm

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
}
"""The nonlinearities f of the hidden layers (M eq. 6: tanh; K §5: sigmoid or ReLU)."""


class PackedLinear(nn.Module):
    """z = W a + b for every member: weight (K, out, in), bias (K, out) or none.

    Parameters start at zero; the experiments draw them with their initialisations.
    """

    def __init__(self, members: int, in_features: int, out_features: int, *, bias: bool = True,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None):
        super().__init__()
        kw = {"dtype": dtype, "device": device}
        self.weight = nn.Parameter(torch.zeros(members, out_features, in_features, **kw))
        self.bias = nn.Parameter(torch.zeros(members, out_features, **kw)) if bias else None

    def forward(self, a: Tensor) -> Tensor:
        """a: (B, in) shared by all members or (K, B, in) per member -> z: (K, B, out).

        A shared batch goes through one matrix product with every member's rows stacked,
        (B, in)·(in, K·out), which reads the batch once. A pack of one member computes plain
        matrix products and keeps the batch two-dimensional: (B, in) -> (B, out) (see
        :func:`packed`); its bias enters as (1, out), broadcast, with no view to differentiate.
        """
        w, bias = self.weight, self.bias
        k, out, _ = w.shape
        if k == 1:
            return F.linear(a.squeeze(0) if a.dim() == 3 else a, w.squeeze(0), bias)
        if a.dim() == 2:
            z = F.linear(a, w.flatten(0, 1), None if bias is None else bias.flatten())
            return z.view(-1, k, out).transpose(0, 1)
        # zᵀ = W aᵀ (+ b): the weight enters untransposed, so its gradient comes out
        # contiguous (the update then runs at full speed); z is returned as a transposed view.
        at = a.transpose(1, 2)
        if bias is None:
            return torch.bmm(w, at).transpose(1, 2)
        return torch.baddbmm(bias.unsqueeze(-1), w, at).transpose(1, 2)


def packed(z: Tensor) -> Tensor:
    """``z`` with its pack dimension: (K, B, n) as is, a one-member pack's (B, n) as (1, B, n)."""
    return z if z.dim() == 3 else z.unsqueeze(0)


@dataclass
class LayerTrace:
    """What one layer saw and produced on a batch, for diagnostics (K eqs. 1-3)."""

    inputs: Tensor
    """a^{l-1}: (B, in) for the first layer (the shared input), else (K, B, in)."""
    preactivation: Tensor
    """z^l (K, B, out), after batch normalisation where the model has it."""
    activation: Tensor
    """a^l = f(z^l) (K, B, out); the logits (equal to z) for the output layer."""


class PackedMLP(nn.Module):
    """K multilayer perceptrons ``sizes[0] → sizes[1] → … → sizes[-1]`` (logits).

    Every hidden layer applies ``activation``; the output layer is linear (softmax and the loss
    are the caller's). With ``batch_norm`` every hidden preactivation is batch normalised
    (K's MLP_BN: ``Linear`` then ``BatchNorm1d``); those hidden layers then carry no bias,
    since batch normalisation subtracts any bias again and its β takes the bias's role.
    """

    def __init__(self, sizes: Sequence[int], members: int, activation: str = "tanh", *,
                 batch_norm: bool = False, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None):
        super().__init__()
        if len(sizes) < 2:
            raise ValueError(f"PackedMLP: sizes needs input and output widths, got {sizes}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"PackedMLP: activation must be one of {list(ACTIVATIONS)}")
        self.members = members
        self.sizes = tuple(sizes)
        self.activation = activation
        self._f = ACTIVATIONS[activation]
        n_layers = len(sizes) - 1
        self.layers = nn.ModuleList(
            PackedLinear(members, sizes[i], sizes[i + 1],
                         bias=not (batch_norm and i < n_layers - 1), dtype=dtype, device=device)
            for i in range(n_layers))
        self.norms = nn.ModuleList(
            PackedBatchNorm(members, sizes[i + 1], dtype=dtype, device=device)
            for i in range(n_layers - 1)) if batch_norm else None

    def _layer(self, index: int, a: Tensor) -> tuple[Tensor, Tensor]:
        """(z, f(z)) of layer ``index``, two-dimensional for a one-member pack."""
        z = self.layers[index](a)
        if index == len(self.layers) - 1:
            return z, z
        if self.norms is not None:
            z = self.norms[index](z)
        return z, self._f(z)

    def layer_forward(self, index: int, a: Tensor) -> tuple[Tensor, Tensor]:
        """(z, f(z)) of layer ``index`` on its input ``a``, each (K, B, out); the output layer
        returns (z, z)."""
        z, h = self._layer(index, a)
        return packed(z), packed(h)

    def forward(self, x: Tensor) -> Tensor:
        """Logits (K, B, sizes[-1]) of every member for the shared input x (B, sizes[0])."""
        h = x
        last = len(self.layers) - 1
        for index, layer in enumerate(self.layers):
            h = layer(h)
            if index < last:
                if self.norms is not None:
                    h = self.norms[index](h)
                h = self._f(h)
        return packed(h)

    def trace(self, x: Tensor) -> list[LayerTrace]:
        """Every layer's input, preactivation and activation on x (for diagnostics)."""
        out = []
        h = x
        for index in range(len(self.layers)):
            z, a = self.layer_forward(index, h)
            out.append(LayerTrace(inputs=h, preactivation=z, activation=a))
            h = a
        return out

    def weight_params(self) -> list[Tensor]:
        """The effective weight matrix (K, out, in) of every layer, in order."""
        return [layer.weight for layer in self.layers]


def member_cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean softmax cross-entropy of each member (K,) for logits (K, B, C), targets (B,).

    The sum of these K losses has each member's own gradient, so one backward pass serves
    the whole pack. A pack of one member takes PyTorch's mean-reduced loss, whose backward
    costs half as much for M's batch of 20.
    """
    k, b, _ = logits.shape
    if k == 1:
        return F.cross_entropy(logits.squeeze(0), targets).view(1)
    # (K, C, B) against (K, B): PyTorch's K-dimensional loss, one value per member and sample.
    losses = F.cross_entropy(logits.transpose(1, 2), targets.expand(k, b), reduction="none")
    return losses.mean(dim=1)


def member_correct(logits: Tensor, targets: Tensor) -> Tensor:
    """Number of correctly classified samples per member (K,) (arg-max of the logits)."""
    return (logits.argmax(dim=-1) == targets).sum(dim=1)


def member_accuracy(model: PackedMLP, x: Tensor, y: Tensor, chunk: int = 2000) -> Tensor:
    """Fraction of ``x`` (N, in) each member classifies correctly (K,), in float64.

    Evaluated without gradients in chunks of ``chunk`` samples (bounds memory, not results),
    in whatever mode (``train``/``eval``) the model is in.
    """
    correct = torch.zeros(model.members, dtype=torch.long, device=x.device)
    with torch.no_grad():
        for start in range(0, len(y), chunk):
            correct += member_correct(model(x[start:start + chunk]), y[start:start + chunk])
    return correct.double() / len(y)
