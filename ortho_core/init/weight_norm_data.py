"""Salimans & Kingma's data-dependent initialisation of weight-normalised layers (§3).

K's baseline MLP_WN (K §5, footnote 3) starts from it: every direction v is drawn from
N(0, 0.05²), then g and b are chosen per neuron so that the preactivations of one minibatch
have zero mean and unit variance, layer after layer. PyTorch's ``weight_norm`` does not
implement it. The layers carry :class:`~ortho_core.models.normalization.PackedWeightNorm`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from ortho_core.models.mlp import PackedMLP

WN_INIT_STD = 0.05
"""Standard deviation of the initial directions v in Salimans & Kingma's initialisation (§3)."""


@torch.no_grad()
def weight_norm_data_init(model: PackedMLP, x: Tensor,
                          generators: Sequence[torch.Generator]) -> None:
    """Salimans & Kingma's data-dependent initialisation of a weight-normalised model (§3).

    For each layer in turn: every member draws v ~ N(0, 0.05²) from its own generator (so a
    member initialises identically alone or in a pack); t = v·a/‖v‖ is computed on the
    minibatch ``x`` (B, in) passed through the layers already initialised; then per neuron
    g = 1/σ[t] and b = −μ[t]/σ[t] (population statistics over the minibatch), which gives
    every preactivation zero mean and unit variance on ``x``. Every layer of ``model``
    must carry a :class:`~ortho_core.models.normalization.PackedWeightNorm` parametrisation
    and a bias.
    """
    h: Tensor = x
    for index, layer in enumerate(model.layers):
        k, out, n = layer.weight.shape
        v = torch.stack([torch.randn((out, n), generator=g, dtype=torch.float64) * WN_INIT_STD
                         for g in generators]).to(layer.weight)
        params = layer.parametrizations.weight
        params.original1.copy_(v)
        params.original0.fill_(1.0)
        layer.bias.zero_()
        t = layer(h).view(k, -1, out)
        mean = t.mean(dim=1)
        std = t.std(dim=1, correction=0)
        params.original0.copy_((1.0 / std).unsqueeze(-1))
        layer.bias.copy_(-mean / std)
        h = model.layer_forward(index, h)[1]
