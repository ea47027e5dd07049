"""Experiment ``ff-mnist``: M's deep feedforward net on MNIST, plain, OPEN and OINIT (M §III-C).

Run one configuration (or a pack) with ``ortho train ff-mnist --set variant=oinit --set
epochs=1``. The net is 784-100×L-10, tanh hidden layers, softmax output (M eq. 6), all
weights W ~ N(0, σ²) with σ = 0.001 and biases 0, trained by SGD with minibatches of 20 for
100 epochs; test accuracy is measured after every epoch, or every ``eval_every`` samples as
M's code does (Tables III and IV report the best). Pixels are scaled to [0, 1] or, as in M's
code, standardised per pixel (``preprocessing``); minibatches come from a fresh shuffle of
the training set every epoch or, as in M's code, in the training set's order (``shuffle``).

Where M's code (``FF_MNIST.py``), which produced Tables III and IV, differs from M's text,
the fields keep the text's reading as their defaults and take the code's as options, which
the ``paper`` profile of ``sweeps/specs/ff-mnist.yaml`` sets: the text (§III-C) says ten
hidden layers, but the code's ``--layers 10`` builds eleven (the input matrix 784 → 100, ten
more 100 → 100, then the output matrix), i.e. ``layers=11``; the text says nothing of when
the test accuracy is measured nor of the order of the minibatches, and the code measures it
every 10,000 samples (``--chk``, ``eval_every=10000``) and slices its minibatches from the
training set in order (``shuffle=False``).

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
    batch_fits,
    check_pack,
    fraction,
    integer_at_least,
    non_negative,
    one_of,
    optional_count,
    positive,
    require,
    seed_value,
)
from ortho_core.data.datasets import DATASETS
from ortho_core.data.mnist import PREPROCESSINGS
from ortho_core.devices import check_runtime, resolve_device
from ortho_core.experiments import PROBE_PRETRAIN_TOL
from ortho_core.experiments.data_check import DataFile, image_files
from ortho_core.experiments.feedforward import load_splits, train_step
from ortho_core.init import gaussian, orthogonal_pretrain, require_converged
from ortho_core.metrics import member_norm
from ortho_core.models.mlp import PackedMLP, member_accuracy
from ortho_core.penalty import ortho_error
from ortho_core.reporting import Outcome, Report, Reporter, Result
from ortho_core.subnormals import Subnormals, honours_subnormals

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
    """L: number of tanh hidden layers, so L + 1 weight matrices (M's text, §III-C: 10; M's
    code with its ``--layers 10`` builds 11: an input matrix 784 → 100, then 10 matrices
    100 → 100, then the output matrix)."""
    hidden: int = 100
    """Width of each hidden layer (M: 100)."""
    lr: float = 0.01
    """α: SGD learning rate (M's grid 10⁻¹…10⁻⁵; best 0.01 for OPEN and OINIT)."""
    penalty: float = 0.0
    """λ: weight of the orthogonality penalty, > 0 with ``open`` and 0 with the other
    variants, so that a run's params say which nets were penalised (M's grid 1, 0.1, 0.01,
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
    eval_every: int | None = None
    """Measure the test accuracy every this many training samples, counted over the whole
    run (epochs run on), as M's code does (``FF_MNIST.py``: ``--chk`` 10,000, the best of
    those checkpoints reported); a multiple of ``batch_size`` (M's checkpoints fall on
    minibatch boundaries) no larger than the run's samples. None: after every epoch (the
    text says nothing of it)."""
    shuffle: bool = True
    """Take every epoch's minibatches from a fresh shuffle of the training set (drawn with
    ``data_seed``); False: in the training set's order, the same every epoch, as M's code
    slices them (``X_train[index*bs:(index+1)*bs]``; with ``train_size``, the subset's
    order)."""
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
    """Seed of the data stream (subsets and, with ``shuffle``, the shuffle of every epoch),
    shared by a pack."""
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
        for name in ("layers", "hidden", "batch_size", "epochs", "pretrain_max_steps"):
            integer_at_least(getattr(self, name), name, 1)
        positive(self.lr, "lr")
        non_negative(self.penalty, "penalty")
        if self.variant == "open":
            require(self.penalty > 0, "penalty", "a number > 0 with variant open", self.penalty)
        else:
            require(self.penalty == 0, "penalty", "0 unless variant is open", self.penalty)
        positive(self.init_std, "init_std")
        positive(self.pretrain_lr, "pretrain_lr")
        positive(self.pretrain_tol, "pretrain_tol")
        info = DATASETS["mnist"]
        batch_fits(self.batch_size, self.train_size, info.n_train)
        optional_count(self.test_size, "test_size", info.n_test)
        fraction(self.solved_accuracy, "solved_accuracy")
        if self.eval_every is not None:
            samples = self.epochs * epoch_samples(self)
            require(isinstance(self.eval_every, int) and not isinstance(self.eval_every, bool)
                    and self.eval_every % self.batch_size == 0
                    and self.batch_size <= self.eval_every <= samples, "eval_every",
                    f"None or a multiple of batch_size ({self.batch_size}) in "
                    f"{self.batch_size}..{samples} (the samples of the run)", self.eval_every)
        require(isinstance(self.shuffle, bool), "shuffle", "true or false", self.shuffle)
        one_of(self.preprocessing, PREPROCESSINGS, "preprocessing")
        check_runtime(self.device, self.subnormals)


PACK_FIELDS: tuple[str, ...] = (
    "layers", "hidden", "pretrain_tol", "pretrain_max_steps", "batch_size", "epochs",
    "eval_every", "shuffle", "train_size", "test_size", "preprocessing", "data_dir",
    "data_seed", "device", "subnormals",
)
"""Fields equal across a pack; the variant, α, λ, αₚ, σ, seed and solved_accuracy may differ
per member."""

ADDED_FIELDS: tuple[str, ...] = ("preprocessing", "eval_every", "shuffle")
"""Fields added after sweeps of this experiment were first tracked (issue 12; M's code's
checkpoints and minibatch order): a trial key leaves each out while it holds its default, so
that configurations tracked before keep their keys (:func:`sweeps.spec.trial_key`)."""

FORMER_DEFAULTS: dict[str, object] = {"penalty": 0.01}
"""Defaults changed after sweeps of this experiment were first tracked (2026-12-07: λ of FF
and FF+OINIT from 0.01, which they never used, to 0): a trial key hashes such a field at its
former default while it holds the new one, so that configurations tracked before keep their
keys and a sweep resumed across the change trains none of them again
(:func:`sweeps.spec.trial_key`). A spec that wrote ``penalty: 0`` on FF itself (keys hashed
at 0 before) is the exception: its FF configurations get new keys, and a resume trains them
again."""


def epoch_samples(config: Config) -> int:
    """Training samples in one epoch of ``config``: its whole minibatches of its training
    images (a remainder smaller than ``batch_size`` is left out, as M's code does)."""
    n_train = config.train_size or DATASETS["mnist"].n_train
    return n_train // config.batch_size * config.batch_size


def iteration_budget(config: Config) -> int:
    """The most training iterations (minibatches) ``config`` can take: ``epochs`` of whole
    minibatches of its training images. ``pack_size: auto`` weighs a pack's set-up against
    it (:mod:`sweeps.pack_size`)."""
    return config.epochs * epoch_samples(config) // config.batch_size


def planned_steps(config: Config) -> int:
    """The ``step`` (minibatches trained) of the last report of a member that trains all its
    ``epochs``: that of the last evaluation, the end of the last epoch or, with
    ``eval_every``, the last multiple of ``eval_every`` samples the run reaches, which falls
    before its end when ``eval_every`` does not divide the run's samples (the minibatches after
    it are trained but not reported). Reaching the solved accuracy does not stop training, so
    only a diverging member ends before it."""
    samples = config.epochs * epoch_samples(config)
    every = config.eval_every or epoch_samples(config)
    return samples // every * every // config.batch_size


PROBE_BATCHES = 100
"""Minibatches per epoch of a probe configuration (:func:`probe_config`)."""


def probe_config(config: Config) -> Config:
    """``config`` as ``pack_size: auto`` times it (:mod:`sweeps.pack_size`): three epochs of
    :data:`PROBE_BATCHES` minibatches (a report after each, whatever ``eval_every``),
    accuracy on 100 test images and OINIT's pre-training stopped at once; depth, width and
    batch, which set the cost of an iteration, are kept."""
    n_train = DATASETS["mnist"].n_train
    return replace(config, epochs=3,
                   train_size=min(PROBE_BATCHES * config.batch_size, n_train),
                   test_size=100, eval_every=None, pretrain_tol=PROBE_PRETRAIN_TOL)


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


METRICS: dict[str, str] = {
    "epoch": "epochs trained (a fraction at a checkpoint inside an epoch)",
    "samples": "training samples seen",
    "train_loss": "mean cross-entropy over the minibatches since the previous evaluation",
    "test_accuracy": "test accuracy, a fraction",
    "ortho_error": "Eᵖ averaged over the weight matrices",
    "grad_norm": "‖∂CE/∂W‖ over every weight matrix, on the last minibatch",
    "grad_norm_layer{l}": "‖∂CE/∂W_l‖ (l = 1 the input layer … L + 1 the output layer)",
}
"""Every key a report's metrics can hold, with its meaning (what a spec's
``scheduler.metric_step`` may name; ``{l}`` stands for a layer's number): see
:func:`train`."""

SUMMARY: dict[str, str] = {
    "test_accuracy": "test accuracy at the last evaluation",
    "best_test_accuracy": "best test accuracy over the evaluations",
    "best_epoch": "epochs trained at the evaluation of best_test_accuracy (a fraction with "
                  "eval_every mid-epoch)",
    "best_samples": "training samples seen at the evaluation of best_test_accuracy",
    "train_loss": "the mean training loss of the last epoch the member completed (NaN if it "
                  "diverged in its first)",
    "epochs": "epochs trained",
    "baseline_accuracy": "accuracy of always answering the test set's commonest class",
    "wall_time": "seconds the pack trained",
    "pretrain_steps": "OINIT pre-training steps (variant oinit only)",
}
"""The keys a member's ``Result.summary`` can hold and their meanings: what a spec's
``metric.name`` may name (checked when the spec is resolved), listed by ``ortho train --keys``."""


@dataclass
class _Tally:
    """What the trainer keeps of each member's evaluations, (K,) each."""

    accuracy: Tensor
    """Test accuracy at the latest evaluation (NaN before the first)."""
    best: Tensor
    """Best test accuracy so far (0 before the first evaluation)."""
    best_samples: Tensor
    """Training samples seen at the evaluation of ``best``."""


@honours_subnormals
def train(configs: Sequence[Config], reporter: Reporter) -> list[Result]:
    """Train a pack of ff-mnist configurations; report at every evaluation; one Result each.

    Every epoch is one pass over the training set in full minibatches (a remainder smaller
    than ``batch_size`` is left out of that epoch), shuffled afresh or, without ``shuffle``,
    in its order. The test accuracy is measured after every epoch or, with ``eval_every``,
    each time the samples trained since the start reach a multiple of it (M's code's
    checkpoints, which run on across epochs). A member whose loss becomes NaN or inf is
    ``diverged`` and frozen from that step on.

    Metrics per report (``step``: minibatches trained): ``epoch`` (epochs trained, a fraction
    at a checkpoint inside an epoch) and ``samples`` (samples trained); ``train_loss`` (mean
    cross-entropy over the minibatches since the previous evaluation); ``test_accuracy`` (a
    fraction); ``ortho_error`` (Eᵖ averaged over the weight matrices); ``grad_norm`` and
    ``grad_norm_layer{l}`` (‖∂CE/∂W_l‖ on the minibatch just before the evaluation, l = 1
    for the input layer … L + 1 for the output layer).

    Summary: ``test_accuracy`` (at the last evaluation), ``best_test_accuracy`` (best over
    the evaluations, as M's code reports), ``best_epoch`` and ``best_samples`` (when it was
    reached, as the report's ``epoch`` and ``samples``), ``train_loss`` (last epoch),
    ``epochs`` run, ``baseline_accuracy`` (the majority-class fraction of the test set),
    ``wall_time`` (seconds for the whole pack) and, for ``oinit``, ``pretrain_steps`` (summed
    over the matrices).
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
    tally = _Tally(accuracy=torch.full((k,), torch.nan, dtype=torch.float64, device=device),
                   best=torch.zeros(k, dtype=torch.float64, device=device),
                   best_samples=torch.zeros(k, dtype=torch.long, device=device))
    n = len(data.y_train)
    per_epoch = epoch_samples(cfg)
    every = cfg.eval_every or per_epoch
    samples = 0
    window_sum, window_batches = torch.zeros(k, device=device), 0
    last_loss = torch.full((k,), torch.nan, device=device)
    epochs_run = torch.zeros(k, dtype=torch.long, device=device)
    for _ in range(cfg.epochs):
        order = torch.randperm(n, generator=data_gen).to(device) if cfg.shuffle else None
        epoch_sum = torch.zeros(k, device=device)
        for start in range(0, per_epoch, cfg.batch_size):
            rows = (slice(start, start + cfg.batch_size) if order is None
                    else order[start:start + cfg.batch_size])
            samples += cfg.batch_size
            evaluates = samples % every == 0
            # CE's own gradients are read on the minibatch before an evaluation only.
            loss, loss_grads, _ = train_step(model, params, data.x_train[rows],
                                             data.y_train[rows], lr, active, open_penalty,
                                             penalised, keep_loss_grads=evaluates)
            loss = torch.where(active, loss, 0.0)
            epoch_sum += loss
            window_sum += loss
            window_batches += 1
            if evaluates:
                _evaluate(model, data.x_test, data.y_test, active, tally, samples)
                window_loss = window_sum / window_batches
                norms = torch.stack([member_norm([loss_grads[i]]) for i in weight_index])
                errors = torch.stack([ortho_error(w.detach()) for w in weights]).mean(dim=0)
                for member in active.nonzero().flatten().tolist():
                    metrics = {"epoch": samples / per_epoch,
                               "samples": float(samples),
                               "train_loss": float(window_loss[member]),
                               "test_accuracy": float(tally.accuracy[member]),
                               "ortho_error": float(errors[member]),
                               "grad_norm": float(norms[:, member].norm())}
                    metrics.update({f"grad_norm_layer{i + 1}": float(norms[i, member])
                                    for i in range(len(weights))})
                    reporter(Report(member=member, step=samples // cfg.batch_size,
                                    metrics=metrics))
                window_sum, window_batches = torch.zeros(k, device=device), 0
        epochs_run += active
        last_loss = torch.where(active, epoch_sum / (per_epoch // cfg.batch_size), last_loss)
        if not bool(active.any()):
            break
    wall = time.monotonic() - started
    baseline = float(torch.bincount(data.y_test).max()) / len(data.y_test)
    results = []
    for member, c in enumerate(configs):
        summary = {"test_accuracy": float(tally.accuracy[member]),
                   "best_test_accuracy": float(tally.best[member]),
                   "best_epoch": float(tally.best_samples[member]) / per_epoch,
                   "best_samples": float(tally.best_samples[member]),
                   "train_loss": float(last_loss[member]),
                   "epochs": float(epochs_run[member]),
                   "baseline_accuracy": baseline,
                   "wall_time": wall}
        if c.variant == "oinit":
            summary["pretrain_steps"] = float(pretrain_steps[member])
        if not bool(active[member]):
            outcome = Outcome.DIVERGED
        elif float(tally.best[member]) >= c.solved_accuracy:
            outcome = Outcome.SOLVED
        else:
            outcome = Outcome.UNSOLVED
        results.append(Result(outcome=outcome, summary=summary))
    return results


def _evaluate(model: PackedMLP, x_test: Tensor, y_test: Tensor, active: Tensor,
              tally: _Tally, samples: int) -> None:
    """Measure the test accuracy of every member still training into ``tally`` (a frozen,
    diverged member keeps its last), and its best so far with the ``samples`` trained."""
    accuracy = member_accuracy(model, x_test, y_test)
    tally.accuracy = torch.where(active, accuracy, tally.accuracy)
    improved = active & (accuracy > tally.best)
    tally.best = torch.where(improved, accuracy, tally.best)
    tally.best_samples = torch.where(improved, samples, tally.best_samples)
