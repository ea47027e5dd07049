"""Experiment ``lcw-mlp``: K's deep MLPs, plain, LCW, batch- and weight-normalised (K §5).

Run one configuration (or a pack) with ``ortho train lcw-mlp --set variant=lcw --set
layers=100 --set epochs=2``. The net is MLP(L, M): L hidden layers of M sigmoid (or ReLU)
units, a linear output and softmax cross-entropy, trained by SGD with minibatches of 128; the
rate starts at 0.1 and is multiplied by 0.95 after every two epochs (K §5).

Variants (K §5 "Network structure" and "Initialization"):

- ``plain``: Glorot's normalised initialisation, biases 0.
- ``lcw``: every weight vector, output layer included, is w = B_m v (K eq. 7,
  :mod:`ortho_core.models.lcw`), initialised on a minibatch with σ_z = 0.5 (K §3.3).
- ``bn``: every hidden preactivation batch normalised (``Linear`` then ``BatchNorm1d``),
  Glorot initialisation; test accuracy uses the running statistics.
- ``wn``: every weight vector w = g·v/‖v‖ with Salimans & Kingma's data-dependent
  initialisation (:mod:`ortho_core.models.normalization`).

Inputs: images flattened to values in [0, 1] (``input_range="unit"``), or rescaled to [−1, 1]
(``"symmetric"``, as K §2.2 does for its visualisation; K §5 does not say). With [0, 1]
inputs, the mean input vector is far from 0, so angle bias (K Prop. 2) already acts on the
first layer.

Diagnostics (``diagnostics=True``): on ``diag_samples`` training images, once after the
initialisation and once after the last epoch, the angle θ between each neuron's weight vector
and its input (K eq. 3, footnote 1; K Figs. 3, 5, 7) and the activations per hidden layer
(K Figs. 2, 4, 6), and once at initialisation the distribution of the weight gradients of every
layer on one minibatch (K Fig. 13); they are returned in ``Result.artifacts``.

Packs: configurations that differ only in α (``lr``), the decay factor, σ_z, ``seed`` or
``solved_accuracy`` train together (same variant, shape and data); each member gives the
numbers it would give alone (up to float rounding of batched matrix products).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor
from torch.nn.utils import parametrize

from ortho_core.config import (
    check_pack,
    fraction,
    integer_at_least,
    one_of,
    optional_integer_in,
    positive,
    require,
)
from ortho_core.data.datasets import DATASETS, dataset_info
from ortho_core.devices import check_device, resolve_device
from ortho_core.experiments.feedforward import load_splits, train_step
from ortho_core.init import normalised
from ortho_core.models.lcw import BASES, apply_lcw, lcw_minibatch_init
from ortho_core.models.mlp import (
    PackedLinear,
    PackedMLP,
    member_accuracy,
    member_correct,
    member_cross_entropy,
    neuron_angles,
)
from ortho_core.models.normalization import PackedWeightNorm, weight_norm_data_init
from ortho_core.reporting import Outcome, Report, Reporter, Result

VARIANTS = ("plain", "lcw", "bn", "wn")
"""K's models: MLP, MLP_LCW, MLP_BN, MLP_WN."""

QUANTILES = (0.01, 0.25, 0.5, 0.75, 0.99)
"""The quantiles of K's boxplots (Figs. 3, 5, 7, 13): whiskers at 1 % and 99 %."""

BOXPLOT_NEURONS = 10
"""K's angle boxplots show the first ten neurons of a layer."""

HEATMAP_NEURONS = 128
"""At most this many neurons of a layer are kept in the activation heat maps."""


@dataclass
class Config:
    """One configuration of K's deep-MLP experiment (K §5, Figs. 2-15)."""

    variant: Literal["plain", "lcw", "bn", "wn"] = "lcw"
    """The model: ``plain`` (Glorot init), ``lcw`` (linearly constrained weights w = B_m v with
    K's minibatch init), ``bn`` (batch normalisation), ``wn`` (weight normalisation with
    Salimans & Kingma's data-dependent init)."""
    dataset: str = "mnist"
    """The images: ``mnist``, ``cifar10``, ``cifar100`` or ``svhn`` (K: CIFAR-10, with SVHN and
    CIFAR-100 in its appendix; only MNIST is shipped with the project)."""
    layers: int = 100
    """L: number of hidden layers of MLP(L, M) (K: 100, 50, 5)."""
    hidden: int = 128
    """M: units per hidden layer (K: 128, 256, 512)."""
    activation: Literal["sigmoid", "relu"] = "sigmoid"
    """Hidden nonlinearity (K §5.1 sigmoid, §5.2 ReLU)."""
    lr: float = 0.1
    """α: initial SGD learning rate (K: 0.1)."""
    lr_decay: float = 0.95
    """The rate is multiplied by this after every ``lr_decay_every`` epochs (K: 0.95)."""
    lr_decay_every: int = 2
    """Epochs between two decays of the rate (K: 2)."""
    batch_size: int = 128
    """Minibatch size of SGD and of the minibatch initialisations (K: 128)."""
    epochs: int = 100
    """Passes over the training set (K: 100)."""
    sigma_z: float = 0.5
    """σ_z: standard deviation of the preactivations after LCW's minibatch initialisation
    (K §3.3, §5: 0.5); used by ``lcw`` only."""
    lcw_basis: Literal["orthonormal", "eq7"] = "orthonormal"
    """B_m of LCW: an orthonormal basis of the zero-sum subspace, or K eq. 7's
    [I; −1ᵀ] (which K's experiments used, reporting little difference)."""
    input_range: Literal["unit", "symmetric"] = "unit"
    """Pixel scaling: ``unit`` [0, 1] or ``symmetric`` [−1, 1] (K §2.2)."""
    train_size: int | None = None
    """Train on a random subset of this many training images (drawn with ``data_seed``);
    None: the whole training split."""
    test_size: int | None = None
    """Measure test accuracy on a random subset of this many test images (drawn with
    ``data_seed``); None: the whole test split."""
    diagnostics: bool = True
    """Record angles, activations and initial gradient distributions in the artifacts."""
    diag_samples: int = 100
    """Training images the angle and activation diagnostics use (K: 100)."""
    solved_accuracy: float = 0.5
    """A member whose best training accuracy reaches this fraction is ``solved`` (it trains;
    K's plain MLP(100, 128) stays at chance); training still runs all epochs."""
    data_dir: str | None = None
    """Directory holding the datasets; None: ``$ORTHO_DATA_DIR``, else
    ``~/.cache/ortho-sweeps/data``."""
    seed: int = 0
    """Seed of this member's initial weights."""
    data_seed: int = 0
    """Seed of the data stream (subsets, initialisation batch, diagnostic samples and the
    shuffle of every epoch), shared by a pack."""
    device: str = "cpu"
    """Where to train: ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (CUDA when available)."""

    def __post_init__(self) -> None:
        one_of(self.variant, VARIANTS, "variant")
        one_of(self.dataset, tuple(DATASETS), "dataset")
        one_of(self.activation, ("sigmoid", "relu"), "activation")
        one_of(self.lcw_basis, BASES, "lcw_basis")
        one_of(self.input_range, ("unit", "symmetric"), "input_range")
        for name in ("layers", "hidden", "lr_decay_every", "batch_size", "epochs",
                     "diag_samples"):
            integer_at_least(getattr(self, name), name, 1)
        require(self.batch_size >= 2, "batch_size", "at least 2 (batch statistics)",
                self.batch_size)
        positive(self.lr, "lr")
        positive(self.lr_decay, "lr_decay")
        positive(self.sigma_z, "sigma_z")
        info = DATASETS[self.dataset]
        optional_integer_in(self.train_size, "train_size", self.batch_size, info.n_train)
        optional_integer_in(self.test_size, "test_size", 1, info.n_test)
        fraction(self.solved_accuracy, "solved_accuracy")
        check_device(self.device)


PACK_FIELDS: tuple[str, ...] = (
    "variant", "dataset", "layers", "hidden", "activation", "lr_decay_every", "batch_size",
    "epochs", "lcw_basis", "input_range", "train_size", "test_size", "diagnostics",
    "diag_samples", "data_dir", "data_seed", "device",
)
"""Fields equal across a pack; α, the decay factor, σ_z, seed and solved_accuracy may differ."""


def build_model(configs: Sequence[Config], x_init: Tensor, device: torch.device) -> PackedMLP:
    """The pack's MLP(L, M) with the variant's reparameterisation and initialisation.

    Member k draws all its random numbers from a generator seeded with its ``seed``, layer by
    layer, so its initial weights do not depend on the rest of the pack; ``x_init`` (B, in) is
    the minibatch of the data-dependent initialisations (``lcw``, ``wn``).
    """
    cfg = configs[0]
    info = dataset_info(cfg.dataset)
    sizes = [info.n_features, *[cfg.hidden] * cfg.layers, info.n_classes]
    model = PackedMLP(sizes, len(configs), cfg.activation, batch_norm=cfg.variant == "bn",
                      device=device)
    generators = [torch.Generator().manual_seed(c.seed) for c in configs]
    if cfg.variant in ("plain", "bn"):
        with torch.no_grad():
            for layer in model.layers:
                shape = tuple(layer.weight.shape[1:])
                layer.weight.copy_(torch.stack([normalised(shape, g) for g in generators]))
    elif cfg.variant == "lcw":
        apply_lcw(model, cfg.lcw_basis)
        sigma = torch.tensor([c.sigma_z for c in configs], dtype=torch.float64)
        lcw_minibatch_init(model, x_init, sigma, generators)
    else:
        for layer in model.layers:
            parametrize.register_parametrization(layer, "weight", PackedWeightNorm())
        weight_norm_data_init(model, x_init, generators)
    return model


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


def _quantiles(values: Tensor, dim: int = -1) -> Tensor:
    """K's boxplot quantiles (1, 25, 50, 75, 99 %) along ``dim``, moved to the last axis."""
    q = torch.tensor(QUANTILES, dtype=values.dtype, device=values.device)
    return torch.quantile(values, q, dim=dim).movedim(0, -1)


def _diag_layers(layers: int) -> list[int]:
    """Five hidden layers (1-based) spread from the first to the last, as K's figures show."""
    picks = {1, layers} | {round(1 + i * (layers - 1) / 4) for i in range(1, 4)}
    return sorted(picks)


def angle_diagnostics(model: PackedMLP, x: Tensor) -> list[dict[str, Any]]:
    """Per member: angles θ and activations of every hidden layer on the samples ``x``.

    Per hidden layer l (1-based), over samples i and neurons j of θ_ij (degrees, K eq. 3) and
    of the activations a_ij: ``angle_mean``; ``angle_std_samples`` (the spread over samples,
    averaged over neurons: it shrinks when a neuron's input stops depending on the sample);
    ``angle_std_neurons`` (the spread of the neurons' mean angles: angle bias); the same three
    for the activations (``act_*``; the last is K's horizontal stripes). For five layers
    (``detail_layers``): the boxplot quantiles of θ of the first ten neurons and the activation
    heat map (samples × at most 128 neurons).
    """
    with torch.no_grad(), batch_statistics_only(model):
        trace = model.trace(x)[:-1]
        weights = model.weight_params()
        hidden = range(len(trace))
        angles = [neuron_angles(trace[i].inputs, weights[i]) for i in hidden]
    detail = _diag_layers(len(trace))
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
    """The summary scalars of the initial diagnostics (see :func:`train`)."""
    angles, rms = artifacts["angles_init"], artifacts["gradients_init"]["grad_rms"]
    last_hidden = len(angles["layer"]) - 1
    return {"init_act_std_first": angles["act_std_samples"][0],
            "init_act_std_last": angles["act_std_samples"][last_hidden],
            "init_angle_std_neurons_last": angles["angle_std_neurons"][last_hidden],
            "init_grad_ratio": rms[0] / rms[last_hidden] if rms[last_hidden] > 0 else math.inf}


def train(configs: Sequence[Config], reporter: Reporter) -> list[Result]:
    """Train a pack of lcw-mlp configurations; report after every epoch; one Result each.

    Before training, a minibatch of ``batch_size`` training images (drawn with ``data_seed``)
    initialises ``lcw`` and ``wn`` and gives the gradient diagnostics. Every epoch is one pass
    over the shuffled training set in full minibatches (a remainder smaller than
    ``batch_size`` is left out). A member whose loss becomes NaN or inf is ``diverged`` and
    frozen from that step on (K §5.2: ReLU MLP_LCW explodes).

    Metrics per report: ``epoch``, ``lr``, ``train_loss`` and ``train_accuracy`` (means over
    the epoch's minibatches, as the model trained on them), ``test_accuracy`` (BN with its
    running statistics), ``epoch_time`` (seconds of training in that epoch for the whole pack,
    evaluation excluded).

    Summary: ``train_accuracy``, ``best_train_accuracy``, ``test_accuracy``,
    ``best_test_accuracy``, ``train_loss`` (last epoch), ``seconds_per_epoch`` (mean
    ``epoch_time``), ``pack_size`` (K: a pack's epoch time covers K members), ``epochs`` run,
    ``baseline_accuracy`` (majority-class fraction of the training set) and ``wall_time``.
    With ``diagnostics``, the summary also holds the initial state at a glance:
    ``init_act_std_first`` and ``init_act_std_last`` (activations' spread over samples in the
    first and last hidden layer: angle bias makes the last one vanish, K Fig. 2),
    ``init_angle_std_neurons_last`` (spread of the neurons' mean angles in the last hidden
    layer, K Fig. 3) and ``init_grad_ratio`` (RMS weight gradient of the first hidden layer
    over the last one's, K Fig. 13); the artifacts hold ``gradients_init``, ``angles_init``
    and ``angles_final`` (:func:`gradient_diagnostics`, :func:`angle_diagnostics`).
    """
    check_pack(configs, PACK_FIELDS)
    started = time.monotonic()
    cfg = configs[0]
    device = resolve_device(cfg.device)
    k = len(configs)
    data_gen = torch.Generator().manual_seed(cfg.data_seed)
    data = load_splits(cfg.dataset, cfg.data_dir, cfg.train_size, cfg.test_size, data_gen,
                       device)
    if cfg.input_range == "symmetric":
        data.x_train, data.x_test = data.x_train * 2.0 - 1.0, data.x_test * 2.0 - 1.0
    n = len(data.y_train)
    init_idx = torch.randperm(n, generator=data_gen)[:cfg.batch_size].to(device)
    diag_idx = torch.randperm(n, generator=data_gen)[:cfg.diag_samples].to(device)
    model = build_model(configs, data.x_train[init_idx], device)
    artifacts: list[dict[str, Any]] = [{} for _ in configs]
    if cfg.diagnostics:
        grads = gradient_diagnostics(model, data.x_train[init_idx], data.y_train[init_idx])
        angles = angle_diagnostics(model, data.x_train[diag_idx])
        for member in range(k):
            artifacts[member].update(gradients_init=grads[member], angles_init=angles[member])

    params = list(model.parameters())
    base_lr = torch.tensor([c.lr for c in configs], device=device)
    decay = torch.tensor([c.lr_decay for c in configs], device=device)
    active = torch.ones(k, dtype=torch.bool, device=device)
    best_train = torch.zeros(k, dtype=torch.float64, device=device)
    best_test = torch.zeros(k, dtype=torch.float64, device=device)
    epochs_run = torch.zeros(k, dtype=torch.long, device=device)
    epoch_times = []
    step = 0
    batches = n // cfg.batch_size
    for epoch in range(1, cfg.epochs + 1):
        lr = base_lr * decay ** ((epoch - 1) // cfg.lr_decay_every)
        tick = time.monotonic()
        model.train()
        order = torch.randperm(n, generator=data_gen).to(device)
        loss_sum = torch.zeros(k, device=device)
        correct = torch.zeros(k, dtype=torch.long, device=device)
        for b in range(batches):
            idx = order[b * cfg.batch_size:(b + 1) * cfg.batch_size]
            targets = data.y_train[idx]
            loss, _, logits = train_step(model, params, data.x_train[idx], targets, lr, active)
            loss_sum += torch.where(active, loss, 0.0)
            correct += member_correct(logits, targets)
            step += 1
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        epoch_times.append(time.monotonic() - tick)
        epochs_run += active
        train_acc = correct.double() / (batches * cfg.batch_size)
        model.eval()
        test_acc = member_accuracy(model, data.x_test, data.y_test)
        best_train = torch.where(active, torch.maximum(best_train, train_acc), best_train)
        best_test = torch.where(active, torch.maximum(best_test, test_acc), best_test)
        for member in active.nonzero().flatten().tolist():
            reporter(Report(member=member, step=step, metrics={
                "epoch": float(epoch), "lr": float(lr[member]),
                "train_loss": float(loss_sum[member]) / batches,
                "train_accuracy": float(train_acc[member]),
                "test_accuracy": float(test_acc[member]),
                "epoch_time": epoch_times[-1]}))
        last = (loss_sum / batches, train_acc, test_acc)
        if not bool(active.any()):
            break
    model.train()
    if cfg.diagnostics:
        angles = angle_diagnostics(model, data.x_train[diag_idx])
        for member in range(k):
            artifacts[member]["angles_final"] = angles[member]
    wall = time.monotonic() - started
    baseline = float(torch.bincount(data.y_train).max()) / n
    results = []
    for member, c in enumerate(configs):
        summary = {"train_accuracy": float(last[1][member]),
                   "best_train_accuracy": float(best_train[member]),
                   "test_accuracy": float(last[2][member]),
                   "best_test_accuracy": float(best_test[member]),
                   "train_loss": float(last[0][member]),
                   "seconds_per_epoch": sum(epoch_times) / len(epoch_times),
                   "pack_size": float(k),
                   "epochs": float(epochs_run[member]),
                   "baseline_accuracy": baseline,
                   "wall_time": wall}
        if cfg.diagnostics:
            summary.update(glance(artifacts[member]))
        if not bool(active[member]):
            outcome = Outcome.DIVERGED
        elif float(best_train[member]) >= c.solved_accuracy:
            outcome = Outcome.SOLVED
        else:
            outcome = Outcome.UNSOLVED
        results.append(Result(outcome=outcome, summary=summary, artifacts=artifacts[member]))
    return results
