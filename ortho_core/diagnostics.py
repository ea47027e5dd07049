"""K's diagnostics of angle bias in deep MLPs (K §2, eq. 3; Figs. 2-7 and 13).

On a few samples of a packed MLP: the angle θ between each neuron's weight vector and its input
(K eq. 3) and the activations of every hidden layer (:func:`angle_diagnostics`), the
distribution of every layer's weight gradient on one minibatch (:func:`gradient_diagnostics`),
and the summary scalars that show the initial state at a glance (:func:`glance`). Angle bias
(K Prop. 2) shows as neurons whose mean angle differs from 90° and as activations that stop
depending on the sample in the deep layers. The trainer ``ortho_core.experiments.lcw_mlp``
records them before and after training.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor
from torch.nn.utils import parametrize

from ortho_core.models.mlp import PackedLinear, PackedMLP, member_cross_entropy

QUANTILES = (0.01, 0.25, 0.5, 0.75, 0.99)
"""The quantiles of K's boxplots (Figs. 3, 5, 7, 13): whiskers at 1 % and 99 %."""

BOXPLOT_NEURONS = 10
"""K's angle boxplots show the first ten neurons of a layer."""

HEATMAP_NEURONS = 128
"""At most this many neurons of a layer are kept in the activation heat maps."""


def neuron_angles(inputs: Tensor, weight: Tensor) -> Tensor:
    """θ between each neuron's weight vector and its input, in degrees (K eq. 3, footnote 1).

    θ_i = arccos(w_i·a / (‖w_i‖‖a‖)) for every sample and neuron: ``inputs`` a^{l-1} is
    (B, in) or (K, B, in), ``weight`` (K, out, in); returns (K, B, out). A zero input or
    weight vector has no angle; it gives NaN.
    """
    a = inputs.expand(weight.shape[0], *inputs.shape) if inputs.dim() == 2 else inputs
    dots = torch.bmm(a, weight.transpose(1, 2))
    norms = a.norm(dim=-1, keepdim=True) * weight.norm(dim=-1).unsqueeze(1)
    return torch.rad2deg(torch.arccos((dots / norms).clamp(-1.0, 1.0)))


def trainable_weight(layer: PackedLinear) -> Tensor:
    """The tensor SGD updates for a layer's weights: W itself, LCW's v or WN's direction v."""
    if not parametrize.is_parametrized(layer, "weight"):
        return layer.weight
    originals = layer.parametrizations.weight
    return originals.original if hasattr(originals, "original") else originals.original1


@contextlib.contextmanager
def batch_statistics_only(model: PackedMLP) -> Iterator[None]:
    """Batch normalisation from the current batch, leaving the running statistics untouched.

    Diagnostics see every model in training mode (BN normalising with the statistics of the
    diagnostic batch); momentum 0 keeps the running averages exactly as they were.
    """
    norms = list(model.norms) if model.norms is not None else []
    saved = [norm.momentum for norm in norms]
    for norm in norms:
        norm.momentum = 0.0
    try:
        yield
    finally:
        for norm, momentum in zip(norms, saved, strict=True):
            norm.momentum = momentum


def _quantiles(values: Tensor) -> Tensor:
    """K's boxplot quantiles (1, 25, 50, 75, 99 %) along the last axis, in the last axis."""
    q = torch.tensor(QUANTILES, dtype=values.dtype, device=values.device)
    return torch.quantile(values, q, dim=-1).movedim(0, -1)


K_DETAIL_LAYERS: dict[int, tuple[int, ...]] = {10: (1, 3, 5, 7, 9), 50: (1, 10, 20, 30, 40)}
"""Hidden layers (1-based) K's figures show, per depth: the 10-layer sigmoid MLP's layers
1, 3, 5, 7, 9 (Figs. 2-3, 6-7) and the 50-layer ReLU MLP's layers 1, 10, 20, 30, 40 (Figs. 4-5,
10-11)."""


def detail_layers(layers: int) -> list[int]:
    """The five hidden layers (1-based) whose angles and activations are kept in detail: K's
    (:data:`K_DETAIL_LAYERS`) for the depths of K's figures, otherwise the first, the last
    and three spread evenly between (fewer when there are fewer than five)."""
    if layers in K_DETAIL_LAYERS:
        return list(K_DETAIL_LAYERS[layers])
    picks = {1, layers} | {round(1 + i * (layers - 1) / 4) for i in range(1, 4)}
    return sorted(picks)


def angle_diagnostics(model: PackedMLP, x: Tensor) -> list[dict[str, Any]]:
    """Per member: angles θ and activations of every hidden layer on the samples ``x``.

    Per hidden layer l (1-based), over samples i and neurons j of θ_ij (degrees, K eq. 3) and
    of the activations a_ij: ``angle_mean``; ``angle_std_samples`` (the spread over samples,
    averaged over neurons: it shrinks when a neuron's input stops depending on the sample);
    ``angle_std_neurons`` (the spread of the neurons' mean angles: angle bias); the same three
    for the activations (``act_*``; the last is K's horizontal stripes). For five layers
    (``detail_layers``, K's where K shows the network: :func:`detail_layers`): the boxplot
    quantiles of θ of the first ten neurons and the activation heat map (samples × at most 128
    neurons).
    """
    with torch.no_grad(), batch_statistics_only(model):
        trace = model.trace(x)[:-1]
        weights = model.weight_params()
        hidden = range(len(trace))
        angles = [neuron_angles(trace[i].inputs, weights[i]) for i in hidden]
    detail = detail_layers(len(trace))
    out = []
    for k in range(model.members):
        stats: dict[str, Any] = {"layer": [i + 1 for i in hidden], "detail_layers": detail}
        for name, values in (("angle", [angles[i][k] for i in hidden]),
                             ("act", [trace[i].activation[k] for i in hidden])):
            stats[f"{name}_mean"] = [float(v.mean()) for v in values]
            stats[f"{name}_std_samples"] = [float(v.std(dim=0).mean()) for v in values]
            stats[f"{name}_std_neurons"] = [float(v.mean(dim=0).std()) for v in values]
        stats["angle_quantiles"] = [
            _quantiles(angles[layer - 1][k][:, :BOXPLOT_NEURONS].T).tolist() for layer in detail]
        stats["activations"] = [
            trace[layer - 1].activation[k][:, :HEATMAP_NEURONS].round(decimals=4).tolist()
            for layer in detail]
        out.append(stats)
    return out


def gradient_diagnostics(model: PackedMLP, x: Tensor, y: Tensor) -> list[dict[str, Any]]:
    """Per member: the distribution of each layer's weight gradient on one minibatch (K Fig. 13).

    The gradient of the mean cross-entropy with respect to the tensor SGD updates
    (:func:`trainable_weight`), per layer l = 1 … L + 1: the boxplot quantiles of its entries
    (``grad_quantiles``) and its root mean square (``grad_rms``). Running statistics of BN are
    left untouched.
    """
    tensors = [trainable_weight(layer) for layer in model.layers]
    with batch_statistics_only(model):
        loss = member_cross_entropy(model(x), y)
        grads = torch.autograd.grad(loss.sum(), tensors)
    out = []
    for k in range(model.members):
        flat = [g[k].reshape(-1).double() for g in grads]
        out.append({"layer": list(range(1, len(flat) + 1)),
                    "grad_quantiles": [_quantiles(g).tolist() for g in flat],
                    "grad_rms": [float(g.square().mean().sqrt()) for g in flat]})
    return out


def glance(artifacts: dict[str, Any]) -> dict[str, float]:
    """The summary scalars of the initial diagnostics (see
    :func:`ortho_core.experiments.lcw_mlp.train`)."""
    angles, rms = artifacts["angles_init"], artifacts["gradients_init"]["grad_rms"]
    last_hidden = len(angles["layer"]) - 1
    return {"init_act_std_first": angles["act_std_samples"][0],
            "init_act_std_last": angles["act_std_samples"][last_hidden],
            "init_angle_std_neurons_last": angles["angle_std_neurons"][last_hidden],
            "init_grad_ratio": rms[0] / rms[last_hidden] if rms[last_hidden] > 0 else math.inf}
