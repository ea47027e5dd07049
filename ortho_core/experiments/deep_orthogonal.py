"""Experiment ``deep-orthogonal``: N's deep orthogonal networks against ReLU and Orth/ReLU nets
(N §4-6, Figs. 1, 3, 4).

Run one configuration (or a pack) with ``ortho train deep-orthogonal --set variant=orth --set
layers=20 --set lr=0.05,0.1``. Variants (:func:`~ortho_core.models.orthogonal_net.layer_plan`):

- ``relu``: a plain net of ``layers`` layers, ReLU hidden layers of width ``hidden``;
- ``orth``: orthogonal layers z = Q a + b with the sign-flip nonlinearity (N eqs. 1-2), the
  first and last layer a matrix plus sign-flip where the widths differ (N §6.3);
- ``orth_relu``: blocks of one ReLU layer and ``block`` orthogonal layers (N Fig. 2), with L2
  weight decay λ on the ReLU layers only (N §5).

Data (``dataset``): ``two_class`` (N-F1) and ``spiral`` (N-F3), defined in
:mod:`ortho_core.data.planar`, trained full batch unless ``batch_size`` is set; ``mnist``
(N-F4), flattened to [0, 1], in minibatches. Training (N §4-5): the orthogonal matrices move
along geodesics with momentum carried by parallel transport
(:class:`~ortho_core.riemannian.GeodesicMomentum`); every other parameter takes the same
momentum step in Euclidean space (:class:`~ortho_core.riemannian.EuclideanMomentum`); one α
and β per member for both.

Diagnostics: at initialisation and at every evaluation, on a fixed batch (the whole planar
set, or ``batch_size`` MNIST training images), the norm of every layer's activation gradient
‖∂J/∂a^[l]‖ (N Figs. 1a, 4a; summed over the batch of the mean loss) and of every layer's
weight gradient ‖∂J/∂W^[l]‖ (N Figs. 1d, 3), with their spread in orders of magnitude,
log10(max/min) over the layers (N §6.2: "no more than roughly two or three orders of
magnitude"), capped at :data:`SPREAD_CAP` (a gradient that vanished to 0).

Packs: configurations that differ only in α, β, λ, ``seed`` or ``solved_error`` train together
(same variant, shape and data stream); a member gives the numbers it gives alone (to float
rounding of batched and single matrix products).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor

from ortho_core.config import (
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
from ortho_core.data.planar import PLANAR, planar
from ortho_core.devices import check_runtime, resolve_device
from ortho_core.experiments.data_check import DataFile, image_files
from ortho_core.experiments.feedforward import load_splits
from ortho_core.models.mlp import member_correct, member_cross_entropy, packed
from ortho_core.models.orthogonal_net import OrthogonalNet, layer_plan
from ortho_core.reporting import Outcome, Report, Reporter, Result
from ortho_core.riemannian import EuclideanMomentum, GeodesicMomentum, orthogonality_error
from ortho_core.subnormals import Subnormals, honours_subnormals

VARIANTS = ("relu", "orth", "orth_relu")
"""N's nets: plain ReLU, purely orthogonal, alternating Orth/ReLU blocks."""

DTYPES = {"float32": torch.float32, "float64": torch.float64}
"""Training precisions by name."""

SPREAD_CAP = 30.0
"""Largest gradient spread reported, in orders of magnitude (a layer's gradient was 0)."""


@dataclass
class Config:
    """One configuration of N's deep orthogonal network experiments (N-F1, N-F3, N-F4)."""

    variant: Literal["relu", "orth", "orth_relu"] = "orth"
    """The net: ``relu`` (plain ReLU layers), ``orth`` (orthogonal layers with sign-flip, N
    eqs. 1-2) or ``orth_relu`` (blocks of a ReLU layer and ``block`` orthogonal layers)."""
    dataset: Literal["two_class", "spiral", "mnist"] = "two_class"
    """The data: ``two_class`` (N-F1's 200 points), ``spiral`` (N-F3), ``mnist`` (N-F4)."""
    layers: int = 20
    """L: layers with weights, the output layer included (N-F4: 2 + 50 internal)."""
    hidden: int = 2
    """H: width of every hidden layer (even where the sign-flip is used; N-F1: 2, N-F4: 4)."""
    block: int = 1
    """B: orthogonal layers per ReLU layer in ``orth_relu`` (N Fig. 2)."""
    orth_init: Literal["haar", "identity"] = "haar"
    """Initial Q: Haar-random orthogonal or the identity (N does not state its choice)."""
    lr: float = 0.05
    """α: learning rate, the geodesic step length for orthogonal matrices (N §5: ≈ 10⁻³)."""
    momentum: float = 0.9
    """β: momentum, Z' = βZ₀ + (1 − β)π_T(Z) (N §4-5: 0.9); in [0, 1)."""
    weight_decay: float = 0.0
    """λ: L2 weight decay on the ReLU layers' weight matrices only (N §5, Fig. 3: 0.001)."""
    batch_size: int | None = None
    """Minibatch size; None: the whole planar set per step (MNIST needs a size)."""
    max_iters: int = 4000
    """Optimiser steps."""
    eval_every: int = 100
    """Steps between two evaluations (errors, gradient profiles)."""
    n_points: int = 200
    """Points of a planar set (N-F1: 200)."""
    noise: float | None = None
    """Gaussian noise of a planar set's points; None: the set's default
    (:mod:`ortho_core.data.planar`)."""
    train_size: int | None = None
    """MNIST: train on a random subset of this many images (``data_seed``); None: all."""
    test_size: int | None = None
    """MNIST: test error on a random subset of this many test images; None: all."""
    eval_size: int = 2000
    """MNIST: training images the training error is measured on at each evaluation."""
    solved_error: float = 0.05
    """A member whose best training error reaches this fraction or less is ``solved`` (it
    trains on to ``max_iters``: N's tables report the whole run)."""
    reproject_every: int = 100
    """Steps between re-projections of Q onto the orthogonal group (0: never)."""
    dtype: Literal["float32", "float64"] = "float32"
    """Training precision."""
    data_dir: str | None = None
    """Directory holding MNIST; None: ``$ORTHO_DATA_DIR``, else ``~/.cache/ortho-sweeps/data``."""
    seed: int = 0
    """Seed of this member's initial weights."""
    data_seed: int = 0
    """Seed of the data (planar points, subsets, minibatch order), shared by a pack."""
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
        one_of(self.dataset, (*PLANAR, "mnist"), "dataset")
        one_of(self.dtype, tuple(DTYPES), "dtype")
        one_of(self.orth_init, ("haar", "identity"), "orth_init")
        for name in ("layers", "hidden", "block", "max_iters", "eval_every", "eval_size"):
            integer_at_least(getattr(self, name), name, 1)
        integer_at_least(self.n_points, "n_points", 2)
        integer_at_least(self.reproject_every, "reproject_every", 0)
        require(self.variant == "relu" or self.hidden % 2 == 0, "hidden",
                "an even width (the sign-flip pairs the two halves)", self.hidden)
        positive(self.lr, "lr")
        require(isinstance(self.momentum, (int, float)) and 0 <= self.momentum < 1,
                "momentum", "a number in [0, 1)", self.momentum)
        non_negative(self.weight_decay, "weight_decay")
        if self.noise is not None:
            non_negative(self.noise, "noise")
        fraction(self.solved_error, "solved_error")
        info = DATASETS["mnist"]
        if self.dataset == "mnist":
            require(self.batch_size is not None, "batch_size", "a size for mnist", None)
        optional_count(self.batch_size, "batch_size",
                       info.n_train if self.dataset == "mnist" else self.n_points)
        optional_count(self.train_size, "train_size", info.n_train)
        optional_count(self.test_size, "test_size", info.n_test)
        check_runtime(self.device, self.subnormals)


PACK_FIELDS: tuple[str, ...] = (
    "variant", "dataset", "layers", "hidden", "block", "orth_init", "batch_size", "max_iters",
    "eval_every", "n_points", "noise", "train_size", "test_size", "eval_size",
    "reproject_every", "dtype", "data_dir", "data_seed", "device", "subnormals",
)
"""Fields equal across a pack; α, β, λ, seed and solved_error may differ."""


@dataclass
class Data:
    """The training set, the evaluation sets and the diagnostic batch, on the device."""

    x: Tensor
    y: Tensor
    evals: dict[str, tuple[Tensor, Tensor]]
    """``train`` (and for MNIST ``test``) -> the points an error is measured on."""
    diag: tuple[Tensor, Tensor]
    n_in: int
    n_out: int


def load_data(cfg: Config, gen: torch.Generator, device: torch.device,
              dtype: torch.dtype) -> Data:
    """The data of ``cfg`` drawn with ``gen`` (the pack's ``data_seed``)."""
    if cfg.dataset in PLANAR:
        x, y = planar(cfg.dataset, cfg.n_points, cfg.noise, gen)
        x, y = x.to(device, dtype), y.to(device)
        return Data(x, y, {"train": (x, y)}, (x, y), 2, 2)
    s = load_splits("mnist", cfg.data_dir, cfg.train_size, cfg.test_size, gen, device)
    x = s.x_train.to(dtype)
    evals = {"train": (x[:cfg.eval_size], s.y_train[:cfg.eval_size]),
             "test": (s.x_test.to(dtype), s.y_test)}
    diag = torch.randperm(len(s.y_train), generator=gen)[:cfg.batch_size].to(device)
    return Data(x, s.y_train, evals, (x[diag], s.y_train[diag]), x.shape[1], 10)


def spread(norms: Tensor) -> Tensor:
    """log10(max / min) over the last dimension, capped at :data:`SPREAD_CAP`."""
    top = norms.amax(dim=-1)
    low = torch.maximum(norms.amin(dim=-1), top * 10.0 ** -SPREAD_CAP)
    out = torch.log10(top / low)
    return torch.where(top > 0, out, torch.full_like(out, SPREAD_CAP))


def gradient_profile(model: OrthogonalNet, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """Per member and layer ‖∂J/∂a^[l]‖ and ‖∂J/∂W^[l]‖ (W = Q for an orthogonal layer) on
    (x, y), each (K, L) in float64, J the member's mean cross-entropy."""
    logits, acts = model(x, keep=True)
    loss = member_cross_entropy(logits, y)
    weights = [layer.weight for layer in model.dense]
    orth = [model.q] if model.q.numel() else []
    grads = torch.autograd.grad(loss, [*acts, *orth, *weights], torch.ones_like(loss))
    act = torch.stack([packed(g).double().flatten(1).norm(dim=1) for g in grads[:len(acts)]], 1)
    q_norms = grads[len(acts)].double().flatten(2).norm(dim=2) if orth else None  # (L_orth, K)
    dense = iter(grads[len(acts) + len(orth):])
    index_q = iter(range(len(model.q)))
    columns = [q_norms[next(index_q)] if kind == "orth" else next(dense).double().flatten(1)
               .norm(dim=1) for kind, _, _ in model.plan]
    return act, torch.stack(columns, 1)


def errors(model: OrthogonalNet, data: Data, chunk: int = 2000) -> dict[str, tuple[Tensor,
                                                                                    Tensor]]:
    """Per evaluation set: (error fraction, mean loss), each (K,) float64."""
    out = {}
    with torch.no_grad():
        for name, (x, y) in data.evals.items():
            wrong = torch.zeros(model.members, dtype=torch.float64, device=x.device)
            loss = torch.zeros_like(wrong)
            for start in range(0, len(y), chunk):
                logits, _ = model(x[start:start + chunk])
                yb = y[start:start + chunk]
                wrong += len(yb) - member_correct(logits, yb).double()
                loss += member_cross_entropy(logits, yb).double() * len(yb)
            out[name] = (wrong / len(y), loss / len(y))
    return out


def batches(n: int, size: int | None, gen: torch.Generator, device: torch.device):
    """Index tensors of successive minibatches: the whole set each time (``size`` None or
    ≥ n), else reshuffled passes of full minibatches."""
    if size is None or size >= n:
        everything = torch.arange(n, device=device)
        while True:
            yield everything
    while True:
        order = torch.randperm(n, generator=gen).to(device)
        for b in range(n // size):
            yield order[b * size:(b + 1) * size]


def data_files(config: Config) -> tuple[DataFile, ...]:
    """The files ``config`` reads: MNIST for ``dataset=mnist``, none for the planar sets
    (:mod:`ortho_core.experiments.data_check`)."""
    return image_files("mnist") if config.dataset == "mnist" else ()


def planned_steps(config: Config) -> int:
    """The ``step`` (optimiser steps) of the last report of a member that trains its whole
    budget: ``max_iters``, which is always evaluated whether or not ``eval_every`` divides it.
    Reaching ``solved_error`` does not stop training, so only a diverging member ends before
    it."""
    return config.max_iters


METRICS: dict[str, str] = {
    "train_error": "training error, a fraction (the planar set, or eval_size MNIST images)",
    "train_loss": "training loss on the same",
    "test_error": "test error, a fraction (MNIST only)",
    "act_grad_spread": "orders of magnitude between the layers' activation gradients",
    "weight_grad_spread": "the same for the weight gradients",
    "act_grad_first": "‖∂J/∂a^[1]‖",
    "act_grad_last": "‖∂J/∂a^[L]‖",
    "orth_error": "max |QᵀQ − I| over the orthogonal layers (0 without them)",
}
"""Every key a report's metrics can hold, with its meaning (what a spec's
``scheduler.metric_step`` may name): see :func:`train`."""

SUMMARY: dict[str, str] = {
    "train_error": "training error fraction at the last evaluation",
    "train_loss": "training loss at the last evaluation",
    "test_error": "test error fraction at the last evaluation (MNIST only)",
    "best_train_error": "lowest train_error over the evaluations",
    "best_test_error": "lowest test_error over the evaluations (MNIST only)",
    "iters_to_solve": "first evaluation's step at or under solved_error (when one was)",
    "act_grad_spread": "orders of magnitude between the layers' activation gradients, at "
                       "the end",
    "weight_grad_spread": "the same for the weight gradients",
    "act_grad_spread_init": "act_grad_spread at initialisation",
    "weight_grad_spread_init": "weight_grad_spread at initialisation",
    "orth_error": "max |QᵀQ − I| over the orthogonal layers (0 without them)",
    "baseline_error": "1 − the commonest class's fraction",
    "wall_time": "seconds the pack trained",
}
"""The keys a member's ``Result.summary`` can hold and their meanings: what a spec's
``metric.name`` may name (checked when the spec is resolved), listed by ``ortho train --keys``."""


@honours_subnormals
def train(configs: Sequence[Config], reporter: Reporter) -> list[Result]:
    """Train a pack of deep-orthogonal configurations; report every ``eval_every`` steps.

    Metrics per report: ``train_error``, ``train_loss`` (whole planar set, or ``eval_size``
    MNIST training images), ``test_error`` (MNIST), ``act_grad_spread`` and
    ``weight_grad_spread`` (orders of magnitude over the layers), ``act_grad_first`` and
    ``act_grad_last`` (‖∂J/∂a^[1]‖, ‖∂J/∂a^[L]‖), ``orth_error`` (max |QᵀQ − I|).

    Summary: the last ``train_error``, ``train_loss`` (and ``test_error``), ``best_train_error``
    (and ``best_test_error``), ``iters_to_solve`` (first evaluation at or under
    ``solved_error``, else absent), the spreads at initialisation (``*_spread_init``) and at
    the end, ``orth_error``, ``baseline_error`` (1 − majority-class fraction) and
    ``wall_time``. Artifacts: ``grad_profile`` (steps and per-layer norms of every
    evaluation, step 0 the initialisation, and the layer kinds) and, for a planar set,
    ``points`` (x, y, label and the final prediction of every point).

    A member whose loss is not finite is ``diverged`` and frozen from that step on.
    """
    check_pack(configs, PACK_FIELDS)
    started = time.monotonic()
    cfg = configs[0]
    device, dtype = resolve_device(cfg.device), DTYPES[cfg.dtype]
    k = len(configs)
    gen = torch.Generator().manual_seed(cfg.data_seed)
    data = load_data(cfg, gen, device, dtype)
    plan = layer_plan(cfg.variant, cfg.layers, data.n_in, cfg.hidden, data.n_out, cfg.block)
    model = OrthogonalNet(plan, [torch.Generator().manual_seed(c.seed) for c in configs],
                          dtype, device, cfg.orth_init)
    per = {name: torch.tensor([getattr(c, name) for c in configs], dtype=torch.float64,
                              device=device) for name in ("lr", "momentum", "weight_decay")}
    geodesic = GeodesicMomentum(model.q, per["lr"], per["momentum"], cfg.reproject_every)
    orth = [model.q] if model.q.numel() else []
    euclid_params = [model.q_bias][:len(orth)] + model.dense_params()
    euclid = EuclideanMomentum(euclid_params, [False] * len(orth) + model.decayed(), per["lr"],
                               per["momentum"], per["weight_decay"])
    params = [*orth, *euclid_params]
    active = torch.ones(k, dtype=torch.bool, device=device)
    profile: dict[str, Any] = {"kinds": [kind for kind, _, _ in plan], "steps": [],
                               "act_grad": [[] for _ in configs],
                               "weight_grad": [[] for _ in configs]}
    best = {name: torch.ones(k, dtype=torch.float64, device=device) for name in data.evals}
    solved_at: list[int | None] = [None] * k
    last: dict[str, tuple[Tensor, Tensor]] = {}

    def diagnose(step: int) -> dict[str, Tensor]:
        act, weight = gradient_profile(model, *data.diag)
        profile["steps"].append(step)
        for m in range(k):
            profile["act_grad"][m].append(act[m].tolist())
            profile["weight_grad"][m].append(weight[m].tolist())
        return {"act_grad_spread": spread(act), "weight_grad_spread": spread(weight),
                "act_grad_first": act[:, 0], "act_grad_last": act[:, -1]}

    spreads: dict[str, Tensor] = {f"{name}_init": value for name, value in diagnose(0).items()
               if name.endswith("spread")}
    stream = batches(len(data.y), cfg.batch_size, gen, device)
    for step in range(1, cfg.max_iters + 1):
        idx = next(stream)
        logits, _ = model(data.x[idx])
        loss = member_cross_entropy(logits, data.y[idx])
        grads = torch.autograd.grad(loss, params, torch.ones_like(loss))
        active &= torch.isfinite(loss.detach())
        if orth:
            geodesic.step(model.q, grads[0], active)
        euclid.step(list(grads[len(orth):]), active)
        if step % cfg.eval_every and step != cfg.max_iters:
            continue
        last = errors(model, data)
        diag = diagnose(step)
        ortho = orthogonality_error(model.q.detach()).amax(dim=0) if orth else \
            torch.zeros(k, dtype=torch.float64, device=device)
        for name, (err, _) in last.items():
            best[name] = torch.where(active, torch.minimum(best[name], err), best[name])
        for m in active.nonzero().flatten().tolist():
            metrics = {f"{name}_{what}": float(v[m]) for name, pair in last.items()
                       for what, v in zip(("error", "loss"), pair, strict=True)
                       if not (name == "test" and what == "loss")}
            metrics |= {name: float(v[m]) for name, v in diag.items()}
            metrics["orth_error"] = float(ortho[m])
            reporter(Report(member=m, step=step, metrics=metrics))
            if solved_at[m] is None and metrics["train_error"] <= configs[m].solved_error:
                solved_at[m] = step
        spreads |= {name: value for name, value in diag.items() if name.endswith("spread")}
        if not bool(active.any()):
            break
    points = _points(model, data) if cfg.dataset in PLANAR else None
    wall = time.monotonic() - started
    baseline = 1.0 - float(torch.bincount(data.y).max()) / len(data.y)
    ortho = orthogonality_error(model.q.detach()).amax(dim=0) if orth else None
    results = []
    for m, c in enumerate(configs):
        summary = {f"{name}_{what}": float(v[m]) for name, pair in last.items()
                   for what, v in zip(("error", "loss"), pair, strict=True)
                   if not (name == "test" and what == "loss")}
        summary |= {f"best_{name}_error": float(v[m]) for name, v in best.items()}
        summary |= {name: float(v[m]) for name, v in spreads.items()}
        summary |= {"baseline_error": baseline, "wall_time": wall,
                    "orth_error": 0.0 if ortho is None else float(ortho[m])}
        if solved_at[m] is not None:
            summary["iters_to_solve"] = float(solved_at[m])
        artifacts: dict[str, Any] = {"grad_profile": {
            "kinds": profile["kinds"], "steps": profile["steps"],
            "act_grad": profile["act_grad"][m], "weight_grad": profile["weight_grad"][m]}}
        if points is not None:
            artifacts["points"] = {**points, "predicted": points["predicted"][m]}
        if not bool(active[m]):
            outcome = Outcome.DIVERGED
        elif summary["best_train_error"] <= c.solved_error:
            outcome = Outcome.SOLVED
        else:
            outcome = Outcome.UNSOLVED
        results.append(Result(outcome=outcome, summary=summary, artifacts=artifacts))
    return results


def _points(model: OrthogonalNet, data: Data) -> dict[str, Any]:
    """The planar set and every member's final prediction per point (N Fig. 1b)."""
    with torch.no_grad():
        logits, _ = model(data.x)
    return {"x": data.x[:, 0].tolist(), "y": data.x[:, 1].tolist(),
            "label": data.y.tolist(), "predicted": logits.argmax(dim=-1).tolist()}

