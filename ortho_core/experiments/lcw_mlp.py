"""Experiment ``lcw-mlp``: K's deep MLPs, plain, LCW, batch- and weight-normalised (K §5).

Run one configuration (or a pack) with ``ortho train lcw-mlp --set variant=lcw --set
layers=100 --set epochs=2``. The net is MLP(L, M): L hidden layers of M sigmoid (or ReLU)
units, a linear output and softmax cross-entropy, trained by SGD with minibatches of 128; the
rate starts at 0.1 and is multiplied by 0.95 after every two epochs (K §5).

Variants (K §5 "Network structure" and "Initialization"):

- ``plain``: Glorot's normalised initialisation, biases 0.
- ``lcw``: every weight vector, output layer included, is w = B_m v (K eq. 7,
  :mod:`ortho_core.models.lcw`), initialised on a minibatch with σ_z = 0.5 (K §3.3,
  :mod:`ortho_core.init.lcw_minibatch`).
- ``bn``: every hidden preactivation batch normalised (``Linear`` then ``BatchNorm1d``),
  Glorot initialisation; test accuracy uses the running statistics.
- ``wn``: every weight vector w = g·v/‖v‖ with Salimans & Kingma's data-dependent
  initialisation (:mod:`ortho_core.models.normalization`,
  :mod:`ortho_core.init.weight_norm_data`).

Inputs: images flattened to values in [0, 1] (``input_range="unit"``), or rescaled to [−1, 1]
(``"symmetric"``, as K §2.2 does for its visualisation; K §5 does not say). With [0, 1]
inputs, the mean input vector is far from 0, so angle bias (K Prop. 2) already acts on the
first layer.

Diagnostics (``diagnostics=True``): on ``diag_samples`` training images, once after the
initialisation and once after the last epoch, the angle θ between each neuron's weight vector
and its input (K eq. 3, footnote 1; K Figs. 3, 5, 7) and the activations per hidden layer
(K Figs. 2, 4, 6), and once at initialisation the distribution of the weight gradients of every
layer on one minibatch (K Fig. 13); they are returned in ``Result.artifacts``
(:mod:`ortho_core.diagnostics` computes them).

Packs: configurations that differ only in α (``lr``), the decay factor, σ_z, ``seed`` or
``solved_accuracy`` train together (same variant, shape and data); each member gives the
numbers it would give alone (up to float rounding of batched matrix products).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from copy import deepcopy as copy_module
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor
from torch.nn.utils import parametrize

from ortho_core.config import (
    batch_fits,
    check_pack,
    fraction,
    integer_at_least,
    one_of,
    optional_count,
    positive,
    require,
    seed_value,
)
from ortho_core.data.datasets import DATASETS, dataset_info
from ortho_core.devices import check_runtime, resolve_device
from ortho_core.diagnostics import angle_diagnostics, glance, gradient_diagnostics
from ortho_core.experiments.data_check import DataFile, image_files
from ortho_core.experiments.feedforward import load_splits, train_step
from ortho_core.init import lcw_minibatch_init, normalised, weight_norm_data_init
from ortho_core.models.lcw import BASES, apply_lcw
from ortho_core.models.mlp import PackedMLP, member_accuracy, member_correct
from ortho_core.models.normalization import PackedWeightNorm
from ortho_core.reporting import Outcome, Report, Reporter, Result
from ortho_core.subnormals import Subnormals, honours_subnormals

VARIANTS = ("plain", "lcw", "bn", "wn")
"""K's models: MLP, MLP_LCW, MLP_BN, MLP_WN."""

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
    lcw_basis: Literal["orthonormal", "eq7"] = "eq7"
    """B_m of LCW: K eq. 7's [I; −1ᵀ] (K §3.2: "In the experiments in Section 5, we used B_m
    in Equation (7)"; under SGD it moves one direction of each weight vector m times faster
    than the rest), or an orthonormal basis of the zero-sum subspace (projected SGD on w; K
    reports little difference in accuracy)."""
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
    subnormals: Subnormals = "flush"
    """CPU arithmetic on subnormal numbers (below 1.2e-38 in float32): ``flush`` reads and
    writes them as 0, several times faster where gradients vanish; ``keep`` computes them as
    IEEE 754 does (:mod:`ortho_core.subnormals`). No effect on a GPU."""

    def __post_init__(self) -> None:
        seed_value(self.seed, "seed")
        seed_value(self.data_seed, "data_seed")
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
        batch_fits(self.batch_size, self.train_size, info.n_train)
        optional_count(self.test_size, "test_size", info.n_test)
        fraction(self.solved_accuracy, "solved_accuracy")
        require(isinstance(self.diagnostics, bool), "diagnostics", "true or false",
                self.diagnostics)
        check_runtime(self.device, self.subnormals)


PACK_FIELDS: tuple[str, ...] = (
    "variant", "dataset", "layers", "hidden", "activation", "lr_decay_every", "batch_size",
    "epochs", "lcw_basis", "input_range", "train_size", "test_size", "diagnostics",
    "diag_samples", "data_dir", "data_seed", "device", "subnormals",
)
"""Fields equal across a pack; α, the decay factor, σ_z, seed and solved_accuracy may differ."""


def planned_steps(config: Config) -> int:
    """The ``step`` (minibatches trained) of the last report of a member that trains all its
    ``epochs``: the end of the last epoch, each epoch the whole minibatches of its training
    images (``train_size``, or the dataset's training split). Reaching the solved accuracy does
    not stop training, so only a diverging member ends before it."""
    n_train = config.train_size or dataset_info(config.dataset).n_train
    return config.epochs * (n_train // config.batch_size)


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


def warm_up(model: PackedMLP, x: Tensor, y: Tensor) -> None:
    """One training step of a copy of ``model`` on (x, y), which leaves ``model`` as it was:
    the process's first step pays one-time costs (the kernels' set-up, the allocator's first
    blocks; 0.6 s against 4 ms for a later pack of the same size in a fresh sweep worker),
    which would otherwise land in the first epoch's ``epoch_time``, the time K Fig. 12
    compares across models."""
    copy = copy_module(model)
    k = copy.members
    train_step(copy, list(copy.parameters()), x, y, torch.ones(k, device=x.device),
               torch.ones(k, dtype=torch.bool, device=x.device), keep_loss_grads=False)
    if x.device.type == "cuda":
        torch.cuda.synchronize(x.device)


def data_files(config: Config) -> tuple[DataFile, ...]:
    """The files ``config`` reads: its ``dataset`` (:mod:`ortho_core.experiments.data_check`)."""
    return image_files(config.dataset)


METRICS: dict[str, str] = {
    "epoch": "epochs trained",
    "lr": "the epoch's learning rate (after its decays)",
    "train_loss": "mean training loss over the epoch's minibatches",
    "train_accuracy": "mean training accuracy over the epoch's minibatches, a fraction",
    "test_accuracy": "test accuracy, a fraction (BN with its running statistics)",
    "epoch_time": "seconds of training in the epoch for the whole pack",
}
"""Every key a report's metrics can hold, with its meaning (what a spec's
``scheduler.metric_step`` may name): see :func:`train`."""

SUMMARY: dict[str, str] = {
    "train_accuracy": "training accuracy after the last epoch",
    "best_train_accuracy": "best training accuracy over the epochs",
    "mean_train_accuracy": "mean training accuracy over the scheduled epochs (the area under "
                           "the training curve; epochs after a divergence count 0)",
    "test_accuracy": "test accuracy after the last epoch",
    "best_test_accuracy": "best test accuracy over the epochs",
    "train_loss": "the mean training loss of the last epoch the member completed (NaN if it "
                  "diverged in its first)",
    "seconds_per_epoch": "mean seconds per epoch of the pack",
    "pack_size": "members in the pack",
    "epochs": "epochs trained",
    "baseline_accuracy": "accuracy of always answering the training set's commonest class",
    "wall_time": "seconds the pack trained",
    "init_act_std_first": "std of the first hidden layer's activations at initialisation "
                          "(diagnostics only)",
    "init_act_std_last": "the same for the last hidden layer (diagnostics only)",
    "init_angle_std_neurons_last": "std over the last hidden layer's neurons of the angle "
                                   "bias at initialisation (diagnostics only)",
    "init_grad_ratio": "first over last hidden layer's gradient RMS at initialisation "
                       "(diagnostics only)",
}
"""The keys a member's ``Result.summary`` can hold and their meanings: what a spec's
``metric.name`` may name (checked when the spec is resolved), listed by ``ortho train --keys``."""


@honours_subnormals
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

    Summary: ``train_accuracy``, ``best_train_accuracy``, ``mean_train_accuracy`` (the
    training accuracies of the epochs summed and divided by ``epochs``: the area under the
    training curve, which tells a curve that rises sooner from one that ends equal, K Fig. 12's
    "rate of increase"; a diverged member's epochs from its divergence on count 0, as in
    ``best_train_accuracy``), ``test_accuracy``, ``best_test_accuracy``, ``train_loss`` (last
    epoch), ``seconds_per_epoch`` (mean ``epoch_time``), ``pack_size`` (K: a pack's epoch time
    covers K members), ``epochs`` run, ``baseline_accuracy`` (majority-class fraction of the
    training set) and ``wall_time``.
    With ``diagnostics``, the summary also holds the initial state at a glance:
    ``init_act_std_first`` and ``init_act_std_last`` (activations' spread over samples in the
    first and last hidden layer: angle bias makes the last one vanish, K Fig. 2),
    ``init_angle_std_neurons_last`` (spread of the neurons' mean angles in the last hidden
    layer, K Fig. 3) and ``init_grad_ratio`` (RMS weight gradient of the first hidden layer
    over the last one's, K Fig. 13); the artifacts hold ``gradients_init``, ``angles_init``
    and ``angles_final`` (:func:`~ortho_core.diagnostics.gradient_diagnostics`,
    :func:`~ortho_core.diagnostics.angle_diagnostics`).
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

    warm_up(model, data.x_train[init_idx], data.y_train[init_idx])
    params = list(model.parameters())
    base_lr = torch.tensor([c.lr for c in configs], device=device)
    decay = torch.tensor([c.lr_decay for c in configs], device=device)
    active = torch.ones(k, dtype=torch.bool, device=device)
    best_train = torch.zeros(k, dtype=torch.float64, device=device)
    sum_train = torch.zeros(k, dtype=torch.float64, device=device)
    best_test = torch.zeros(k, dtype=torch.float64, device=device)
    epochs_run = torch.zeros(k, dtype=torch.long, device=device)
    last_loss = torch.full((k,), torch.nan, device=device)
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
            loss, _, logits = train_step(model, params, data.x_train[idx], targets, lr, active,
                                          keep_loss_grads=False)
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
        sum_train += torch.where(active, train_acc, 0.0)
        best_test = torch.where(active, torch.maximum(best_test, test_acc), best_test)
        mean_loss = loss_sum / batches
        last_loss = torch.where(active, mean_loss, last_loss)
        for member in active.nonzero().flatten().tolist():
            reporter(Report(member=member, step=step, metrics={
                "epoch": float(epoch), "lr": float(lr[member]),
                "train_loss": float(mean_loss[member]),
                "train_accuracy": float(train_acc[member]),
                "test_accuracy": float(test_acc[member]),
                "epoch_time": epoch_times[-1]}))
        last_acc = (train_acc, test_acc)
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
        summary = {"train_accuracy": float(last_acc[0][member]),
                   "best_train_accuracy": float(best_train[member]),
                   "mean_train_accuracy": float(sum_train[member]) / cfg.epochs,
                   "test_accuracy": float(last_acc[1][member]),
                   "best_test_accuracy": float(best_test[member]),
                   "train_loss": float(last_loss[member]),
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
