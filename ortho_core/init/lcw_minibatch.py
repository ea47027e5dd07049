"""K's initialisation of linearly constrained weights on a minibatch (K §3.3, App. A).

Seed vectors ŵ are drawn uniformly from the unit ball of W_LC = {w : Σw = 0}, then one scale
η per layer, computed layer after layer on a minibatch, makes the preactivations (η ŵ_i)·a^{l-1}
have standard deviation σ_z; biases start at zero. The model carries LCW's parametrisation
w = B_m v (:func:`ortho_core.models.lcw.apply_lcw`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from ortho_core.models.mlp import PackedMLP


def sample_zero_sum_ball(count: int, m: int, generator: torch.Generator) -> Tensor:
    """``count`` vectors drawn uniformly from W_LC1 = {w ∈ W_LC : ‖w‖ ≤ 1} (K App. A), float64.

    Steps: w ~ N(0, I_m); subtract the mean of its elements (projection onto W_LC); normalise
    to a unit vector; draw ξ ~ U(0, 1); shrink by ξ^{1/(m−1)}. W_LC has dimension m − 1, so the
    radius of a uniform point of its unit ball has density ∝ r^{m−2}, whose inverse CDF is
    ξ^{1/(m−1)}; K App. A prints the exponent 1/(m−2), which is off by one (it would
    concentrate the points slightly towards the centre).
    """
    w = torch.randn((count, m), generator=generator, dtype=torch.float64)
    w = w - w.mean(dim=-1, keepdim=True)
    w = w / w.norm(dim=-1, keepdim=True)
    xi = torch.rand((count, 1), generator=generator, dtype=torch.float64)
    return w * xi.pow(1.0 / (m - 1))


@torch.no_grad()
def lcw_minibatch_init(model: PackedMLP, x: Tensor, sigma_z: float | Tensor,
                       generators: Sequence[torch.Generator]) -> Tensor:
    """K §3.3: initialise an LCW model (see :func:`~ortho_core.models.lcw.apply_lcw`) on the
    minibatch ``x`` (B, in).

    For each layer in turn, every member draws its seed vectors ŵ_i (one per neuron) from
    W_LC1 with its own generator; the layer's input a^{l-1} is ``x`` passed through the layers
    already initialised; η^l = σ_z / std(ŵ_i·a^{l-1}), the standard deviation taken over all
    neurons of the layer and all samples of the minibatch together (population statistics;
    K calls η^l "a scalar variable … calculated in a layer-wise manner", one per layer); then
    w_i = η^l ŵ_i and the biases are zero. ``sigma_z`` is a float or a tensor (K,) (one σ_z per
    member). Returns η (K, layers) for inspection.
    """
    k = len(generators)
    sigma = torch.as_tensor(sigma_z, dtype=torch.float64).expand(k)
    etas = []
    h: Tensor = x
    for index, layer in enumerate(model.layers):
        _, out, n = layer.weight.shape
        seeds = torch.stack([sample_zero_sum_ball(out, n, g) for g in generators])
        seeds = seeds.to(dtype=layer.bias.dtype, device=layer.bias.device)
        layer.bias.zero_()
        layer.weight = seeds
        z_hat = layer(h)
        eta = sigma.to(z_hat) / z_hat.reshape(k, -1).std(dim=1, correction=0)
        layer.weight = seeds * eta[:, None, None]
        etas.append(eta)
        h = model.layer_forward(index, h)[1]
    return torch.stack(etas, dim=1)
