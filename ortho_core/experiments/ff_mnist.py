"""Experiment ``ff-mnist``: M's deep feedforward net on MNIST, plain, OPEN and OINIT (M §III-C).

Run one configuration (or a pack) with ``ortho train ff-mnist --set variant=oinit --set
epochs=1``. The net is 784-100×L-10 (L = 10), tanh hidden layers, softmax output (M eq. 6),
all weights W ~ N(0, σ²) with σ = 0.001 and biases 0, trained by SGD with minibatches of 20
for 100 epochs; test accuracy is measured after every epoch (Tables III and IV report the best).
Pixels are scaled to [0, 1] or, as in M's code, standardised per pixel (``preprocessing``).

Variants (M Table III):

- ``plain`` (FF): at σ = 0.001 the signal and its gradient vanish through ten layers, so only
  the output bias learns and the net predicts the most frequent class: 11.35 % on the test set.
- ``open`` (FF+OPEN): the loss gains λ‖WWᵀ − I‖²_F for every weight matrix (M eq. 30), whose
  exact gradient 4λ(WWᵀ − I)W is added to each layer's; for the non-square first (100 × 784)
  and output (10 × 100) matrices the rows are pushed to orthonormality (semi-orthogonality).
- ``oinit`` (FF+OINIT): before training, every weight matrix, input and output layers
  included, is pre-trained alone to Eᵖ < tol with rate αₚ (M eqs. 16-17); M pre-trains "each
  hidden layer", and the two non-square matrices are treated like the square ones here, as
  OPEN treats them.

Packs: configurations that differ only in the variant, α (``lr``), λ (``penalty``), αₚ
(``pretrain_lr``), σ (``init_std``), ``seed`` or ``solved_accuracy`` train together; each
member gives the numbers it would give alone (up to float rounding of batched matrix
products). In a pack that mixes variants, only the OPEN members compute the penalty's products
and only the OINIT members are pre-trained, so a pack costs the sum of its members: mixing
FF (cheap) with FF+OPEN (two to four times FF per iteration, by machine) is what lets packs of
equal cost share a machine's cores.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import torch
from torch import Tensor

from ortho_core.config import (
    check_pack,
    fraction,
    integer_at_least,
    non_negative,
    one_of,
    optional_integer_in,
    positive,
)
from ortho_core.data.datasets import DATASETS
from ortho_core.data.mnist import PREPROCESSINGS
from ortho_core.devices import check_device, resolve_device
from ortho_core.experiments import PROBE_PRETRAIN_TOL
from ortho_core.experiments.data_check import DataFile, image_files
from ortho_core.experiments.feedforward import load_splits, train_step
from ortho_core.init import gaussian, orthogonal_pretrain, require_converged
from ortho_core.metrics import member_norm
from ortho_core.models.mlp import PackedMLP, member_accuracy
from ortho_core.penalty import ortho_error
from ortho_core.reporting import Outcome, Report, Reporter, Result
from ortho_core.subnormals import SUBNORMAL_MODES, Subnormals, honours_subnormals

VARIANTS = ("plain", "open", "oinit")
"""M's feedforward models: FF, FF+OPEN, FF+OINIT."""


@dataclass
class Config:
    """One configuration of M's feedforward MNIST experiment (M §III-C, Tables III-IV)."""

    variant: Literal["plain", "open", "oinit"] = "plain"
    """The model: ``plain`` (FF), ``open`` (FF+OPEN: penalty λ‖WWᵀ − I‖²_F on every weight
    matrix, M eq. 30) or ``oinit`` (FF+OINIT: every weight matrix pre-trained to
    (semi-)orthogonality before training, M eqs. 16-17)."""
    layers: int = 10
    """L: number of hidden layers (M: 10)."""
    hidden: int = 100
    """Width of each hidden layer (M: 100)."""
    lr: float = 0.01
    """α: SGD learning rate (M's grid 10⁻¹…10⁻⁵; best 0.01 for OPEN and OINIT)."""
    penalty: float = 0.01
    """λ: weight of the orthogonality penalty; used by ``open`` only (M's grid 1, 0.1, 0.01,
    0.001; best 0.01)."""
    init_std: float = 0.001
    """σ: initial weights are drawn from N(0, σ²) (M: 0.001); biases start at 0."""
    pretrain_lr: float = 0.1
    """αₚ: rate of the orthogonal pre-training of ``oinit`` (M: 0.1)."""
    pretrain_tol: float = 1e-6
    """Pre-training of ``oinit`` stops once Eᵖ = ‖WWᵀ − I‖²_F < this, per matrix (M: 10⁻⁶)."""
    pretrain_max_steps: int = 10_000
    """Pre-training steps after which ``oinit`` gives up with an error."""
    batch_size: int = 20
    """Minibatch size of SGD (M: 20)."""
    epochs: int = 100
    """Passes over the training set (M: 100, i.e. 6·10⁶ samples)."""
    train_size: int | None = None
    """Train on a random subset of this many training images (drawn with ``data_seed``);
    None: all 60,000. For cheap profiles."""
    test_size: int | None = None
    """Measure accuracy on a random subset of this many test images (drawn with
    ``data_seed``); None: all 10,000 (M's protocol; the majority-class baseline is then
    11.35 %)."""
    solved_accuracy: float = 0.5
    """A member whose best test accuracy reaches this fraction is ``solved`` (it escaped the
    majority-class baseline); training still runs all epochs."""
    preprocessing: Literal["unit", "standardise"] = "unit"
    """How pixels become inputs. ``unit``: value / 255, in [0, 1] (this experiment's choice
    before issue 12, kept as the default so that tracked runs keep their meaning).
    ``standardise``: M's code (``FF_MNIST.py``, ``loadMNIST(rescaling=True)``:
    ``sklearn.preprocessing.scale``), each pixel at zero mean and unit variance over its split,
    the training and test sets each with their own statistics; the paper's text does not say,
    the ``paper`` profile uses it (:mod:`ortho_core.data.mnist`)."""
    data_dir: str | None = None
    """Directory holding ``mnist/``; None: ``$ORTHO_DATA_DIR``, else
    ``~/.cache/ortho-sweeps/data``."""
    seed: int = 0
    """Seed of this member's initial weights."""
    data_seed: int = 0
    """Seed of the data stream (subsets and the shuffle of every epoch), shared by a pack."""
    device: str = "cpu"
    """Where to train: ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (CUDA when available)."""
    subnormals: Subnormals = "flush"
    """CPU arithmetic on subnormal numbers (below 1.2e-38 in float32): ``flush`` reads and
    writes them as 0, several times faster where gradients vanish; ``keep`` computes them as
    IEEE 754 does (:mod:`ortho_core.subnormals`). No effect on a GPU."""

    def __post_init__(self) -> None:
        one_of(self.variant, VARIANTS, "variant")
        for name in ("layers", "hidden", "batch_size", "epochs", "pretrain_max_steps"):
            integer_at_least(getattr(self, name), name, 1)
        positive(self.lr, "lr")
        non_negative(self.penalty, "penalty")
        positive(self.init_std, "init_std")
        positive(self.pretrain_lr, "pretrain_lr")
        positive(self.pretrain_tol, "pretrain_tol")
        info = DATASETS["mnist"]
        optional_integer_in(self.train_size, "train_size", self.batch_size, info.n_train)
        optional_integer_in(self.test_size, "test_size", 1, info.n_test)
        fraction(self.solved_accuracy, "solved_accuracy")
        one_of(self.preprocessing, PREPROCESSINGS, "preprocessing")
        check_device(self.device)
        one_of(self.subnormals, SUBNORMAL_MODES, "subnormals")


PACK_FIELDS: tuple[str, ...] = (
    "layers", "hidden", "pretrain_tol", "pretrain_max_steps", "batch_size", "epochs",
    "train_size", "test_size", "preprocessing", "data_dir", "data_seed", "device", "subnormals",
)
"""Fields equal across a pack; the variant, α, λ, αₚ, σ, seed and solved_accuracy may differ
per member."""

ADDED_FIELDS: tuple[str, ...] = ("preprocessing",)
"""Fields added after sweeps of this experiment were first tracked (issue 12): a trial key
leaves each out while it holds its default, so that configurations tracked before keep their
keys (:func:`sweeps.spec.trial_key`)."""

def iteration_budget(config: Config) -> int:
    """The most training iterations (minibatches) ``config`` can take: ``epochs`` of whole
    minibatches of its training images. ``pack_size: auto`` weighs a pack's set-up against
    it (:mod:`sweeps.pack_size`)."""
    n_train = config.train_size or DATASETS["mnist"].n_train
    return config.epochs * (n_train // config.batch_size)


PROBE_BATCHES = 100
"""Minibatches per epoch of a probe configuration (:func:`probe_config`)."""


def probe_config(config: Config) -> Config:
    """``config`` as ``pack_size: auto`` times it (:mod:`sweeps.pack_size`): three epochs of
    :data:`PROBE_BATCHES` minibatches (a report after each), accuracy on 100 test images and
    OINIT's pre-training stopped at once; depth, width and batch, which set the cost of an
    iteration, are kept."""
    n_train = DATASETS["mnist"].n_train
    return replace(config, epochs=3,
                   train_size=min(PROBE_BATCHES * config.batch_size, n_train),
                   test_size=100, pretrain_tol=PROBE_PRETRAIN_TOL)


def build_model(configs: Sequence[Config], device: torch.device) -> PackedMLP:
    """The pack's 784-hidden×L-10 tanh net, member k's weights ~ N(0, σ_k²) from its seed.

    Each member draws its layers in order from its own generator (in float64, then rounded),
    so its initial weights do not depend on the rest of the pack.
    """
    cfg = configs[0]
    sizes = [DATASETS["mnist"].n_features, *[cfg.hidden] * cfg.layers, DATASETS["mnist"].n_classes]
    model = PackedMLP(sizes, len(configs), "tanh", device=device)
    generators = [torch.Generator().manual_seed(c.seed) for c in configs]
    with torch.no_grad():
        for layer in model.layers:
            shape = tuple(layer.weight.shape[1:])
            layer.weight.copy_(torch.stack([gaussian(shape, c.init_std, g)
                                            for c, g in zip(configs, generators, strict=True)]))
    return model


def pretrain(model: PackedMLP, configs: Sequence[Config]) -> Tensor:
    """OINIT (M eqs. 16-17) on every weight matrix of the ``oinit`` members; returns each
    member's total steps (K,; 0 for the others).

    Raises :class:`~ortho_core.errors.PretrainError` naming the members whose matrix does not
    converge.
    """
    cfg = configs[0]
    device = model.layers[0].weight.device
    members = [i for i, c in enumerate(configs) if c.variant == "oinit"]
    index = torch.tensor(members, dtype=torch.long, device=device)
    rates = torch.tensor([configs[i].pretrain_lr for i in members], dtype=torch.float64,
                         device=device)
    steps = torch.zeros(len(configs), dtype=torch.long, device=device)
    if not members:
        return steps
    with torch.no_grad():
        for layer in model.layers:
            result = orthogonal_pretrain(layer.weight[index], rates, cfg.pretrain_tol,
                                         cfg.pretrain_max_steps)
            require_converged(result, members=members)
            layer.weight[index] = result.weights
            steps[index] += result.steps
    return steps


def data_files(config: Config) -> tuple[DataFile, ...]:
    """The files ``config`` reads: MNIST (:mod:`ortho_core.experiments.data_check`)."""
    return image_files("mnist")


SUMMARY: dict[str, str] = {
    "test_accuracy": "test accuracy after the last epoch",
    "best_test_accuracy": "best test accuracy over the epochs",
    "best_epoch": "the epoch of best_test_accuracy",
    "train_loss": "the last epoch's mean training loss",
    "epochs": "epochs trained",
    "baseline_accuracy": "accuracy of always answering the test set's commonest class",
    "wall_time": "seconds the pack trained",
    "pretrain_steps": "OINIT pre-training steps (variant oinit only)",
}
"""The keys a member's ``Result.summary`` can hold and their meanings: what a spec's
``metric.name`` may name (checked when the spec is resolved), listed by ``ortho train --keys``."""


@honours_subnormals
def train(configs: Sequence[Config], reporter: Reporter) -> list[Result]:
    """Train a pack of ff-mnist configurations; report after every epoch; one Result each.

    Every epoch is one pass over the shuffled training set in full minibatches (a remainder
    smaller than ``batch_size`` is left out of that epoch). A member whose loss becomes NaN
    or inf is ``diverged`` and frozen from that step on.

    Metrics per report: ``epoch``; ``train_loss`` (mean cross-entropy over the epoch);
    ``test_accuracy`` (a fraction); ``ortho_error`` (Eᵖ averaged over the weight matrices);
    ``grad_norm`` and ``grad_norm_layer{l}`` (‖∂CE/∂W_l‖ on the epoch's last minibatch, l = 1
    for the input layer … L + 1 for the output layer).

    Summary: ``test_accuracy`` (after the last epoch), ``best_test_accuracy``, ``best_epoch``,
    ``train_loss`` (last epoch), ``epochs`` run, ``baseline_accuracy`` (the majority-class
    fraction of the test set), ``wall_time`` (seconds for the whole pack) and, for ``oinit``,
    ``pretrain_steps`` (summed over the matrices).
    """
    check_pack(configs, PACK_FIELDS)
    started = time.monotonic()
    cfg = configs[0]
    device = resolve_device(cfg.device)
    k = len(configs)
    data_gen = torch.Generator().manual_seed(cfg.data_seed)
    data = load_splits("mnist", cfg.data_dir, cfg.train_size, cfg.test_size, data_gen, device,
                       cfg.preprocessing)
    model = build_model(configs, device)
    pretrain_steps = pretrain(model, configs)
    penalised = torch.tensor([i for i, c in enumerate(configs) if c.variant == "open"],
                             dtype=torch.long, device=device)
    params = list(model.parameters())
    weights = model.weight_params()
    weight_index = [next(i for i, p in enumerate(params) if p is w) for w in weights]
    lr = torch.tensor([c.lr for c in configs], device=device)
    penalty = torch.tensor([c.penalty for c in configs], device=device)
    open_penalty = penalty if len(penalised) else None
    if len(penalised) == k:
        penalised = None  # every member: no gather
    active = torch.ones(k, dtype=torch.bool, device=device)
    best = torch.zeros(k, dtype=torch.float64, device=device)
    best_epoch = torch.zeros(k, dtype=torch.long, device=device)
    n = len(data.y_train)
    step = 0
    epochs_run = torch.zeros(k, dtype=torch.long, device=device)
    for epoch in range(1, cfg.epochs + 1):
        order = torch.randperm(n, generator=data_gen).to(device)
        loss_sum = torch.zeros(k, device=device)
        batches = 0
        for start in range(0, n - cfg.batch_size + 1, cfg.batch_size):
            idx = order[start:start + cfg.batch_size]
            # CE's own gradients are read after the epoch's last minibatch only.
            last = start + 2 * cfg.batch_size > n
            loss, loss_grads, _ = train_step(model, params, data.x_train[idx],
                                             data.y_train[idx], lr, active,
                                             open_penalty, penalised, keep_loss_grads=last)
            loss_sum += torch.where(active, loss, 0.0)
            batches += 1
            step += 1
        epochs_run += active
        accuracy = member_accuracy(model, data.x_test, data.y_test)
        improved = active & (accuracy > best)
        best = torch.where(improved, accuracy, best)
        best_epoch = torch.where(improved, epoch, best_epoch)
        layer_norms = torch.stack([member_norm([loss_grads[i]]) for i in weight_index])
        errors = torch.stack([ortho_error(w.detach()) for w in weights]).mean(dim=0)
        for member in active.nonzero().flatten().tolist():
            metrics = {"epoch": float(epoch),
                       "train_loss": float(loss_sum[member]) / batches,
                       "test_accuracy": float(accuracy[member]),
                       "ortho_error": float(errors[member]),
                       "grad_norm": float(layer_norms[:, member].norm())}
            metrics.update({f"grad_norm_layer{i + 1}": float(layer_norms[i, member])
                            for i in range(len(weights))})
            reporter(Report(member=member, step=step, metrics=metrics))
        last_loss = loss_sum / batches
        final_accuracy = accuracy
        if not bool(active.any()):
            break
    wall = time.monotonic() - started
    baseline = float(torch.bincount(data.y_test).max()) / len(data.y_test)
    results = []
    for member, c in enumerate(configs):
        summary = {"test_accuracy": float(final_accuracy[member]),
                   "best_test_accuracy": float(best[member]),
                   "best_epoch": float(best_epoch[member]),
                   "train_loss": float(last_loss[member]),
                   "epochs": float(epochs_run[member]),
                   "baseline_accuracy": baseline,
                   "wall_time": wall}
        if c.variant == "oinit":
            summary["pretrain_steps"] = float(pretrain_steps[member])
        if not bool(active[member]):
            outcome = Outcome.DIVERGED
        elif float(best[member]) >= c.solved_accuracy:
            outcome = Outcome.SOLVED
        else:
            outcome = Outcome.UNSOLVED
        results.append(Result(outcome=outcome, summary=summary))
    return results
