"""Experiment ``pixel-mnist``: M's SRNN, SRNN+OPEN and SRNN+OINIT fed MNIST one pixel at a
time (M §III-B, Table II, Fig. 3b; EXPERIMENTS.md M-T2, M-F3b).

Run one configuration (or a pack) with ``ortho train pixel-mnist --set variant=oinit --set
max_iters=2000``. A tanh SRNN with 100 hidden units reads the 784 pixels of an image in
T = 784 steps (one input per step) and classifies it at the last step (softmax, mean
cross-entropy over the minibatch); minibatches of 16 images, 10⁶ iterations; the test
accuracy on the 10,000 test images is measured every 1000 iterations (M's code: every 16,000
samples), and Table II reports each network's best. A network that learns nothing predicts
the most frequent test digit: 11.35 %.

Variants (M §III-B; SRNN = OPEN with λ = 0 = OINIT without pre-training):

- ``plain``: W_xh, W_hh, W_hy ~ N(0, σ²), biases 0.
- ``open``: the W_hh update gains the gradient of the orthogonality penalty (M eq. 31;
  ``penalty_form``, the unsquared norm of M's code by default).
- ``oinit``: before training, the weights (all three with ``pretrain_weights=all``, M's
  code) are pre-trained to (semi-)orthogonality, Eᵖ < 10⁻⁶ at αₚ = 0.1 (M eq. 18).

Where the paper is silent and M's code (``SRNN_MNIST.py``, nmanchev/OO-INIT-ANN) decides,
the code is followed and each choice is a field (:mod:`.pixel_mnist_config`): RMSProp
(``optimizer``), pixels standardised per pixel (``preprocessing``), the unsquared penalty,
all three matrices pre-trained, minibatches in the training set's order epoch after epoch.

Reports at every evaluation (``step`` = iterations trained): ``samples`` (iterations × 16),
``test_accuracy``, ``test_loss``, ``train_loss`` and ``grad_norm_whh`` (‖∇W_hh‖, the penalty
included) and ``grad_norm`` (all parameters) averaged over the iterations since the last
evaluation, ``spectral_radius`` ρ(W_hh) and ``ortho_error`` Eᵖ(W_hh): the curves of M Fig. 3b.

Packs: members may differ in variant, α, λ and its form, σ, αₚ, the tolerance, which weights
are pre-trained, the margin and the seed; each gives the numbers it would give alone (up to
float rounding of batched products).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ortho_core.config import check_pack
from ortho_core.data.mnist import load_mnist, pixel_permutation
from ortho_core.devices import DTYPES, resolve_device
from ortho_core.experiments.data_check import DataFile, image_files
from ortho_core.experiments.pixel_mnist_config import (
    PACK_FIELDS,
    Config,
    iteration_budget,
    planned_steps,
    probe_config,
)
from ortho_core.init import orthogonal_pretrain, require_converged
from ortho_core.metrics import member_norm, spectral_radius
from ortho_core.models.mlp import member_cross_entropy
from ortho_core.models.srnn import PackedSRNN, SRNNInit, init_srnn
from ortho_core.optim import rmsprop_step, sgd_step
from ortho_core.penalty import ortho_error, ortho_penalty_grad
from ortho_core.reporting import Outcome, Report, Reporter, Result
from ortho_core.subnormals import honours_subnormals

__all__ = ["PACK_FIELDS", "Config", "data_files", "iteration_budget", "planned_steps",
           "probe_config", "train"]

EVAL_CHUNK_ELEMENTS = 1 << 22
"""Bound on K·b·H, the hidden states of one evaluation chunk of b test images (memory only)."""
WEIGHTS = {"W_xh": 0, "W_hh": 1, "W_hy": 3}
"""The weight matrices among :class:`PackedSRNN`'s parameters (W_xh, W_hh, b_h, W_hy, b_y)."""


@dataclass
class Data:
    """The pack's data: training and test images as pixel sequences, on the device."""

    x_train: Tensor
    """(60000, 784, 1) in the order minibatches are taken."""
    y_train: Tensor
    x_test: Tensor
    """(N, 784, 1), all test images or the ``test_size`` subset."""
    y_test: Tensor
    permutation: Tensor | None
    """The pixel order of permuted MNIST, or None."""


def load_data(cfg: Config, dtype: torch.dtype, device: torch.device) -> Data:
    """MNIST as sequences, preprocessed and permuted as ``cfg`` says; the test subset drawn
    with ``data_seed``."""
    perm_seed = cfg.data_seed if cfg.permute == "fixed" else None
    splits = [load_mnist(split, sequence=True, permutation_seed=perm_seed,
                         preprocessing=cfg.preprocessing, data_dir=cfg.data_dir)
              for split in ("train", "test")]
    (x_train, y_train), (x_test, y_test) = splits
    if cfg.test_size is not None:
        keep = torch.randperm(len(y_test), generator=torch.Generator().manual_seed(
            cfg.data_seed))[:cfg.test_size]
        x_test, y_test = x_test[keep], y_test[keep]
    return Data(x_train.to(device, dtype), y_train.to(device), x_test.to(device, dtype),
                y_test.to(device), pixel_permutation(cfg.data_seed) if perm_seed is not None
                else None)


def initial_model(configs: Sequence[Config], dtype: torch.dtype,
                  device: torch.device) -> tuple[PackedSRNN, Tensor]:
    """The pack's SRNN, member k's weights ~ N(0, σ_k²) from its seed, ``oinit`` members'
    pre-trained (M eq. 18); and each member's pre-training steps, summed over its matrices
    (K,). A member whose pre-training does not converge raises
    :class:`~ortho_core.errors.PretrainError`."""
    cfg = configs[0]
    inits = [SRNNInit(c.seed, "gaussian", c.init_std) for c in configs]
    model = init_srnn(1, cfg.hidden, 10, inits, dtype=dtype, device=device)
    steps = torch.zeros(len(configs), dtype=torch.long)
    params = list(model.parameters())
    for name, p in WEIGHTS.items():
        chosen = [i for i, c in enumerate(configs) if c.variant == "oinit"
                  and (name == "W_hh" or c.pretrain_weights == "all")]
        if not chosen:
            continue
        index = torch.tensor(chosen, device=device)
        sub = [configs[i] for i in chosen]
        result = orthogonal_pretrain(
            params[p].detach().index_select(0, index),
            torch.tensor([c.pretrain_lr for c in sub], dtype=torch.float64, device=device),
            torch.tensor([c.pretrain_tol for c in sub], dtype=torch.float64, device=device),
            cfg.pretrain_max_steps)
        require_converged(result, members=chosen)
        with torch.no_grad():
            params[p].index_copy_(0, index, result.weights.to(dtype))
        steps.index_add_(0, index.cpu(), result.steps.cpu())
    return model, steps


def evaluate(model: PackedSRNN, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """Each member's test loss and accuracy (K,), float64, without gradients, in chunks."""
    k, hidden = model.n_members, model.w_hh.shape[1]
    chunk = max(1, EVAL_CHUNK_ELEMENTS // (k * hidden))
    loss = torch.zeros(k, dtype=torch.float64, device=x.device)
    correct = torch.zeros(k, dtype=torch.long, device=x.device)
    with torch.no_grad():
        for start in range(0, len(y), chunk):
            logits = model(x[start:start + chunk])
            target = y[start:start + chunk]
            loss += member_cross_entropy(logits, target).double() * len(target)
            correct += (logits.argmax(dim=-1) == target).sum(dim=1)
    return loss / len(y), correct.double() / len(y)


class Optimiser:
    """The pack's update rule: RMSProp or SGD at each member's α, with the OPEN term."""

    def __init__(self, configs: Sequence[Config], params: Sequence[Tensor]):
        cfg = configs[0]
        device, dtype = params[0].device, params[0].dtype
        self.cfg = cfg
        self.lr = torch.tensor([c.lr for c in configs], dtype=dtype, device=device)
        lam = [c.penalty for c in configs]  # 0 unless the member is OPEN (its Config)
        self.penalty = torch.tensor(lam, dtype=dtype, device=device) if any(lam) else None
        self.squared = torch.tensor([c.penalty_form == "squared" for c in configs],
                                    device=device)
        self.averages = [torch.zeros_like(p) for p in params] if cfg.optimizer == "rmsprop" \
            else None

    def add_penalty_grad(self, w_hh: Tensor, grad: Tensor) -> Tensor:
        """``grad`` (W_hh's) plus each member's OPEN term in its form (zero for λ = 0), added
        in place."""
        assert self.penalty is not None
        return ortho_penalty_grad(w_hh, self.penalty, self.squared, out=grad)

    def step(self, params: Sequence[Tensor], grads: Sequence[Tensor], active: Tensor) -> None:
        """Update every active member in place."""
        if self.averages is None:
            sgd_step(params, grads, self.lr, active, overwrite_grads=True)
        else:
            rmsprop_step(params, grads, self.averages, self.lr, active, self.cfg.rmsprop_rho,
                         self.cfg.rmsprop_eps)


def data_files(config: Config) -> tuple[DataFile, ...]:
    """The files ``config`` reads: MNIST (:mod:`ortho_core.experiments.data_check`)."""
    return image_files("mnist")


METRICS: dict[str, str] = {
    "samples": "training samples seen",
    "test_accuracy": "test accuracy, a fraction",
    "test_loss": "test loss",
    "spectral_radius": "ρ(W_hh)",
    "ortho_error": "Eᵖ(W_hh)",
    "train_loss": "training loss, averaged over the iterations since the last evaluation",
    "grad_norm_whh": "‖∇W_hh‖ (the OPEN term included), averaged likewise",
    "grad_norm": "‖∇θ‖, averaged likewise",
}
"""Every key a report's metrics can hold, with its meaning (what a spec's
``scheduler.metric_step`` may name; the first evaluation, before any training, has no
``train_loss`` or gradient norms)."""

SUMMARY: dict[str, str] = {
    "best_test_accuracy": "best test accuracy over the checkpoints",
    "best_samples": "training samples seen at best_test_accuracy",
    "test_accuracy": "test accuracy at the last checkpoint",
    "baseline_accuracy": "accuracy of always answering the test set's commonest class",
    "iterations": "training iterations",
    "wall_time": "seconds the pack trained",
    "learned_samples": "training samples seen when the member first left the baseline "
                       "(when it did)",
    "pretrain_steps": "OINIT pre-training steps (variant oinit only)",
}
"""The keys a member's ``Result.summary`` can hold and their meanings: what a spec's
``metric.name`` may name (checked when the spec is resolved), listed by ``ortho train --keys``."""


@honours_subnormals
def train(configs: Sequence[Config], reporter: Reporter) -> list[Result]:
    """Train a pack of pixel-mnist configurations; report at every evaluation; one Result each.

    A member whose loss or gradient becomes NaN or inf is ``diverged`` and frozen. Summary:
    ``best_test_accuracy`` and the ``best_samples`` it was reached at, ``test_accuracy`` at
    the end, ``baseline_accuracy`` (the majority-class fraction of the test set),
    ``learned_samples`` (samples seen at the first evaluation above the baseline by
    ``learned_margin``; absent if none), ``iterations``, ``wall_time`` and, for ``oinit``,
    ``pretrain_steps``. Outcome: ``solved`` once it learned (left the baseline), else
    ``unsolved``, or ``diverged``. With ``permute=fixed`` the permutation is the artifact
    ``permutation``.
    """
    check_pack(configs, PACK_FIELDS)
    started = time.monotonic()
    cfg = configs[0]
    device, dtype = resolve_device(cfg.device), DTYPES[cfg.dtype]
    data = load_data(cfg, dtype, device)
    model, pretrain_steps = initial_model(configs, dtype, device)
    params = list(model.parameters())
    optimiser = Optimiser(configs, params)
    k = len(configs)
    active = torch.ones(k, dtype=torch.bool, device=device)
    sums = torch.zeros(3, k, dtype=torch.float64, device=device)
    baseline = float(torch.bincount(data.y_test).max()) / len(data.y_test)
    margins = torch.tensor([baseline + c.learned_margin for c in configs],
                           dtype=torch.float64, device=device)
    best = torch.zeros(k, dtype=torch.float64, device=device)
    best_at = torch.zeros(k, dtype=torch.long, device=device)
    learned_at = torch.full((k,), -1, dtype=torch.long, device=device)
    n_batches = len(data.y_train) // cfg.batch_size
    since = 0

    def checkpoint(iteration: int) -> Tensor:
        nonlocal since, best, best_at, learned_at
        test_loss, acc = evaluate(model, data.x_test, data.y_test)
        samples = iteration * cfg.batch_size
        if iteration:  # the untrained network's accuracy is chance, not learning (M's code)
            improved = active & (acc > best)
            best = torch.where(improved, acc, best)
            best_at = torch.where(improved, samples, best_at)
            learned_at = torch.where(active & (learned_at < 0) & (acc > margins), samples,
                                     learned_at)
        w_hh = model.w_hh.detach()
        radius, e_p = spectral_radius(w_hh.double()), ortho_error(w_hh.double())
        means = (sums / max(since, 1)).tolist()
        for member in active.nonzero().flatten().tolist():
            metrics = {"samples": float(samples), "test_accuracy": float(acc[member]),
                       "test_loss": float(test_loss[member]),
                       "spectral_radius": float(radius[member]),
                       "ortho_error": float(e_p[member])}
            if since:
                metrics.update(train_loss=means[0][member], grad_norm_whh=means[1][member],
                               grad_norm=means[2][member])
            reporter(Report(member=member, step=iteration, metrics=metrics))
        sums.zero_()
        since = 0
        return acc

    accuracy = checkpoint(0)
    for iteration in range(1, cfg.max_iters + 1):
        start = ((iteration - 1) % n_batches) * cfg.batch_size
        x = data.x_train[start:start + cfg.batch_size]
        losses = member_cross_entropy(model(x), data.y_train[start:start + cfg.batch_size])
        grads = list(torch.autograd.grad(losses.sum(), params))
        if optimiser.penalty is not None:
            optimiser.add_penalty_grad(params[1].detach(), grads[1])
        norm_whh, norm = member_norm([grads[1]]), member_norm(grads)
        active &= torch.isfinite(losses.detach()) & torch.isfinite(norm)
        sums += torch.stack([losses.detach(), norm_whh, norm]).double()
        since += 1
        optimiser.step(params, grads, active)
        if iteration % cfg.eval_every == 0 or iteration == cfg.max_iters:
            accuracy = checkpoint(iteration)
            if not bool(active.any()):
                break
    wall = time.monotonic() - started
    results = []
    for member, c in enumerate(configs):
        summary = {"best_test_accuracy": float(best[member]),
                   "best_samples": float(best_at[member]),
                   "test_accuracy": float(accuracy[member]),
                   "baseline_accuracy": baseline, "iterations": float(iteration),
                   "wall_time": wall}
        if int(learned_at[member]) >= 0:
            summary["learned_samples"] = float(learned_at[member])
        if c.variant == "oinit":
            summary["pretrain_steps"] = float(pretrain_steps[member])
        if not bool(active[member]):
            outcome = Outcome.DIVERGED
        elif int(learned_at[member]) >= 0:
            outcome = Outcome.SOLVED
        else:
            outcome = Outcome.UNSOLVED
        artifacts = {} if data.permutation is None else {
            "permutation": data.permutation.tolist()}
        results.append(Result(outcome=outcome, summary=summary, artifacts=artifacts))
    return results
