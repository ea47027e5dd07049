"""Experiment ``synthetic``: SRNN, SRNN+OPEN and SRNN+OINIT on M's pathological problems
(M §III-A, Table I, Fig. 2).

Run one configuration (or a pack) with ``ortho train synthetic --set task=temporal_order
--set variant=oinit --set lr=0.001``. A tanh SRNN with 100 hidden units reads a sequence of
length T and answers at the last step (:mod:`ortho_core.data.synthetic`); it is trained by SGD
on minibatches of 20 for at most 100,000 iterations per length and evaluated every 100
iterations on 10,000 held-out sequences. A length is *solved* at zero validation errors (for
adding: no sample with (y − t)² > ``error_threshold``).

Variants (M §III-A; SRNN = OPEN with λ = 0 = OINIT without pre-training):

- ``plain``: all weights Glorot-uniform ("normalised") or Gaussian.
- ``open``: the W_hh update gains 4λ(W_hhW_hhᵀ − I)W_hh (M eq. 31), the exact gradient of
  λ‖W_hhW_hhᵀ − I‖²_F. M's reference code adds λ times the gradient of the unsquared norm
  instead; the paper's eq. 31 is followed here.
- ``oinit``: before training, W_hh is pre-trained alone to Eᵖ < ``pretrain_tol`` at rate αₚ
  (M eq. 18); with ``pretrain_weights=all`` W_xh and W_hy are too (to semi-orthogonality),
  as M's reference code does.

Protocols: ``max_length`` (M Table I) starts at T = ``seq_len``; a member that solves T goes
on to T + ``seq_len_step`` and stops at the first length it fails or at ``max_seq_len``.
``fixed`` trains the one length ``seq_len``. Lengths run as *stages*: the pack trains stage T
with every member still in the curriculum; members that solve or diverge leave the pack (the
rest go on, re-packed); the next stage starts with the members that solved.

Choices where M is silent or its code differs from its text (all documented on the fields):

- A fresh network per length (``warm_start=False``, M: "the network is trained and tested
  again"): every stage starts from the member's same initial weights (drawn from ``seed``,
  pre-trained once for OINIT). ``warm_start=True`` continues from the weights that solved
  the previous length.
- The validation set is drawn once per length (M's code draws fresh samples at every
  evaluation); training batches and validation set come from separate streams seeded by
  (``data_seed``, T) (:func:`stream_seed`), so a member sees the same data in any pack.
- Clipping (G §3.4, ``clip`` τ) rescales the *loss* gradient to norm ≤ τ; the OPEN term is
  added afterwards, unclipped, so that λ keeps the weight eq. 31 gives it.

Packs: members may differ in α, λ, variant, αₚ, the pre-training fields, init, σ, ρ, τ and
seed; each gives the numbers it would give alone (up to float rounding of batched products).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from ortho_core.config import (
    check_pack,
    integer_at_least,
    non_negative,
    one_of,
    positive,
    require,
)
from ortho_core.data.synthetic import DEFAULT_ERROR_THRESHOLD, Task, get_task
from ortho_core.devices import check_device, resolve_device
from ortho_core.init import PretrainResult, orthogonal_pretrain, require_converged
from ortho_core.metrics import member_norm, spectral_radius
from ortho_core.models.srnn import PackedSRNN, SRNNInit, init_srnn
from ortho_core.optim import clip_factors, sgd_step
from ortho_core.penalty import ortho_error, ortho_penalty_grad
from ortho_core.reporting import Outcome, Report, Reporter, Result

VARIANTS = ("plain", "open", "oinit")
"""M's recurrent models: SRNN, SRNN+OPEN, SRNN+OINIT."""

DTYPES = {"float32": torch.float32, "float64": torch.float64}
"""Training precisions by name."""

EVAL_ELEMENTS = 1 << 24
"""Bound on K·b·T·H (hidden states held per validation chunk of b sequences); it sets the
chunk size (memory only, not results)."""

_TRAIN_STREAM, _VAL_STREAM = 0, 1


@dataclass
class Config:
    """One configuration of the synthetic-problem experiment (M §III-A, Table I)."""

    task: str = "temporal_order"
    """The problem: ``temporal_order``, ``temporal_order_3bit``, ``adding`` or
    ``permutation`` (M §III-A)."""
    variant: Literal["plain", "open", "oinit"] = "plain"
    """``plain`` (SRNN), ``open`` (SRNN+OPEN, penalty update of W_hh, M eq. 31) or ``oinit``
    (SRNN+OINIT, orthogonal pre-training, M eq. 18)."""
    lr: float = 0.01
    """α: SGD learning rate (M's grid 10⁻¹…10⁻⁴)."""
    penalty: float = 0.0
    """λ: weight of ‖W_hhW_hhᵀ − I‖²_F (M eq. 31); must be > 0 with ``open`` and 0 otherwise
    (M's grid 1, 10⁻¹…10⁻⁴)."""
    pretrain_lr: float = 0.1
    """αₚ: rate of the orthogonal pre-training of ``oinit`` (M: 0.1)."""
    pretrain_tol: float = 1e-6
    """``oinit`` pre-training stops once Eᵖ = ‖WWᵀ − I‖²_F < this (M: 10⁻⁶)."""
    pretrain_max_steps: int = 10_000
    """Pre-training steps after which ``oinit`` gives up with a ``PretrainError``."""
    pretrain_weights: Literal["recurrent", "all"] = "recurrent"
    """Which matrices ``oinit`` pre-trains: ``recurrent`` (W_hh only, M eq. 18) or ``all``
    (also W_xh and W_hy to semi-orthogonality, as M's reference code does)."""
    init: Literal["normalised", "gaussian"] = "normalised"
    """Initial weights: ``normalised`` (Glorot uniform, M §III-A) or ``gaussian`` N(0, σ²)."""
    init_std: float = 0.1
    """σ of the ``gaussian`` initialisation."""
    spectral_radius: float | None = None
    """ρ: rescale the initial W_hh to this spectral radius (G Alg. 3.1); None: no rescaling."""
    seq_len: int = 10
    """T: the (first) sequence length (M: 10)."""
    protocol: Literal["max_length", "fixed"] = "max_length"
    """``max_length``: raise T by ``seq_len_step`` while solved (M Table I); ``fixed``: train
    T = ``seq_len`` only."""
    seq_len_step: int = 10
    """Increase of T after a solved length (M: 10)."""
    max_seq_len: int = 1000
    """The ``max_length`` curriculum stops after this length."""
    hidden: int = 100
    """Hidden units (M: 100)."""
    batch_size: int = 20
    """Minibatch size (M: 20)."""
    max_iters: int = 100_000
    """Iteration budget per length (M: 100,000)."""
    eval_every: int = 100
    """Iterations between validations (M: 100)."""
    val_size: int = 10_000
    """Validation sequences, drawn once per length (M: 10,000)."""
    error_threshold: float = DEFAULT_ERROR_THRESHOLD
    """Adding only: a sample is wrong when (y − t)² exceeds this. 0.04 is M's reference code;
    M's text quotes |y − t| < 10⁻⁴, which is 1e-8 here."""
    clip: float | None = None
    """τ: rescale the loss gradient to norm ≤ τ before adding the OPEN term (G §3.4);
    None or 0: no clipping (M)."""
    warm_start: bool = False
    """Continue each length from the weights that solved the previous one; False (M): a
    fresh network, the member's same initial weights, at every length."""
    seed: int = 0
    """Seed of this member's initial weights."""
    data_seed: int = 0
    """Seed of the data streams shared by a pack (see :func:`stream_seed`)."""
    device: str = "cpu"
    """Where to train: ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (CUDA when available)."""
    dtype: Literal["float32", "float64"] = "float32"
    """Training precision (data and weights)."""

    def __post_init__(self) -> None:
        task = get_task(self.task)
        one_of(self.variant, VARIANTS, "variant")
        positive(self.lr, "lr")
        non_negative(self.penalty, "penalty")
        if self.variant == "open":
            require(self.penalty > 0, "penalty", "a number > 0 with variant open", self.penalty)
        else:
            require(self.penalty == 0, "penalty", "0 unless variant is open", self.penalty)
        positive(self.pretrain_lr, "pretrain_lr")
        positive(self.pretrain_tol, "pretrain_tol")
        one_of(self.pretrain_weights, ("recurrent", "all"), "pretrain_weights")
        one_of(self.init, ("normalised", "gaussian"), "init")
        positive(self.init_std, "init_std")
        if self.spectral_radius is not None:
            positive(self.spectral_radius, "spectral_radius")
        task.check_length(self.seq_len)
        one_of(self.protocol, ("max_length", "fixed"), "protocol")
        for name in ("pretrain_max_steps", "seq_len_step", "hidden", "batch_size", "max_iters",
                     "eval_every", "val_size"):
            integer_at_least(getattr(self, name), name, 1)
        integer_at_least(self.max_seq_len, "max_seq_len",
                 self.seq_len if self.protocol == "max_length" else 1)
        positive(self.error_threshold, "error_threshold")
        if self.clip is not None:
            non_negative(self.clip, "clip")
        require(isinstance(self.warm_start, bool), "warm_start", "true or false",
                self.warm_start)
        integer_at_least(self.seed, "seed", 0)
        integer_at_least(self.data_seed, "data_seed", 0)
        check_device(self.device)
        one_of(self.dtype, tuple(DTYPES), "dtype")


PACK_FIELDS: tuple[str, ...] = (
    "task", "seq_len", "seq_len_step", "max_seq_len", "protocol", "hidden", "batch_size",
    "max_iters", "eval_every", "val_size", "error_threshold", "data_seed", "device", "dtype",
    "warm_start",
)
"""Fields equal across a pack; α, λ, variant, pre-training, init, σ, ρ, τ and seed may differ."""


def stream_seed(data_seed: int, seq_len: int, stream: int) -> int:
    """The seed of data stream ``stream`` (0: training batches, 1: validation set) at length
    ``seq_len``: 64 bits of ``numpy.random.SeedSequence([data_seed, seq_len, stream])``."""
    state = np.random.SeedSequence([data_seed, seq_len, stream]).generate_state(1, np.uint64)
    return int(state[0])


@dataclass
class _Member:
    """What the trainer knows about one member across the lengths."""

    index: int
    config: Config
    iters: int = 0
    """Iterations trained over all lengths (the ``step`` of its reports)."""
    max_solved: int = 0
    iters_to_solve: int | None = None
    diverged: bool = False
    last: dict[str, float] = field(default_factory=dict)
    """Metrics of its latest evaluation."""
    stages: list[dict[str, float | str]] = field(default_factory=list)
    weights: list[Tensor] | None = None
    """Its parameters (in :class:`PackedSRNN`'s order) to start the next length from."""
    stopped: float = 0.0
    """Seconds since the start of ``train`` when it left the curriculum."""


class _Rates:
    """Per-member hyperparameters of the members currently in the pack, as (K,) tensors."""

    def __init__(self, configs: Sequence[Config], dtype: torch.dtype, device: torch.device):
        def vec(values: list[float]) -> Tensor:
            return torch.tensor(values, dtype=dtype, device=device)

        self.lr = vec([c.lr for c in configs])
        penalties = [c.penalty for c in configs]
        self.penalty = vec(penalties) if any(penalties) else None
        self.has_penalty = self.penalty > 0 if self.penalty is not None else None
        clips = [c.clip or 0.0 for c in configs]
        self.clip = vec(clips) if any(clips) else None


class _Stage:
    """One length T: the pack of members training at T, their data and their running sums."""

    def __init__(self, members: list[_Member], task: Task, seq_len: int, weights: list[Tensor],
                 dtype: torch.dtype, device: torch.device, started: float):
        cfg = members[0].config
        self.task, self.seq_len, self.dtype, self.device = task, seq_len, dtype, device
        self.started = started
        """``time.monotonic()`` at the start of the pack (for members' wall times)."""
        self.members = members
        self.model = PackedSRNN(*weights)
        self.params = list(self.model.parameters())
        self.rates = _Rates([m.config for m in members], dtype, device)
        self.train_gen = torch.Generator().manual_seed(
            stream_seed(cfg.data_seed, seq_len, _TRAIN_STREAM))
        val_raw, val_y = task.sample(cfg.val_size, seq_len, torch.Generator().manual_seed(
            stream_seed(cfg.data_seed, seq_len, _VAL_STREAM)))
        self.val_raw = val_raw.to(device)
        self.val_y = self._target(val_y.to(device))
        k = len(members)
        self.active = torch.ones(k, dtype=torch.bool, device=device)
        self.sums = torch.zeros(3, k, dtype=dtype, device=device)
        """Since the last evaluation: loss, ‖∇‖ and ‖∇W_hh‖ summed over iterations."""
        self.since_eval = 0

    def _target(self, y: Tensor) -> Tensor:
        return y.to(self.dtype) if self.task.loss == "mse" else y

    def batches(self, n: int) -> tuple[Tensor, Tensor]:
        """The next ``n`` training batches (raw inputs and targets), moved at once."""
        cfg = self.members[0].config
        drawn = [self.task.sample(cfg.batch_size, self.seq_len, self.train_gen)
                 for _ in range(n)]
        raw = torch.stack([d[0] for d in drawn]).to(self.device)
        return raw, self._target(torch.stack([d[1] for d in drawn]).to(self.device))

    def iteration(self, raw: Tensor, y: Tensor) -> None:
        """One SGD step of every active member on the shared batch (M eq. 31 for OPEN)."""
        model, rates, params = self.model, self.rates, self.params
        losses = self.task.losses(model(self.task.encode(raw, self.dtype)), y)
        grads = list(torch.autograd.grad(losses.sum(), params))
        norm = member_norm(grads)
        norm_whh = member_norm([grads[1]])
        losses = losses.detach()
        self.sums += torch.stack([losses, norm, norm_whh])
        self.since_eval += 1
        ok = torch.isfinite(losses) & torch.isfinite(norm)
        if rates.clip is not None:
            factor = clip_factors(norm, rates.clip)
            grads = [g * factor.view(-1, *[1] * (g.dim() - 1)) for g in grads]
        if rates.penalty is not None:
            with_penalty = grads[1] + ortho_penalty_grad(model.w_hh.detach(), rates.penalty)
            grads[1] = torch.where(rates.has_penalty[:, None, None], with_penalty, grads[1])
            ok &= torch.isfinite(member_norm([grads[1]]))
        self.active &= ok
        sgd_step(params, grads, rates.lr, self.active)

    def evaluate(self) -> Tensor:
        """Validate every member: (K, 10), the columns of :data:`_EVAL_KEYS`, then whether it
        diverged (0/1) and its number of wrong validation samples. Diverged members are made
        inactive."""
        model, task = self.model, self.task
        k = len(self.members)
        cfg = self.members[0].config
        size = len(self.val_y)
        chunk = max(1, min(size, EVAL_ELEMENTS // (k * self.seq_len * cfg.hidden)))
        loss_sum = torch.zeros(k, dtype=torch.float64, device=self.device)
        wrong = torch.zeros(k, dtype=torch.long, device=self.device)
        with torch.no_grad():
            for start in range(0, size, chunk):
                y = self.val_y[start:start + chunk]
                out = model(task.encode(self.val_raw[start:start + chunk], self.dtype))
                loss_sum += task.losses(out, y).double() * len(y)
                wrong += task.errors(out, y, cfg.error_threshold).sum(-1)
            params = [p.detach() for p in self.params]
            finite = torch.stack([torch.isfinite(p.reshape(k, -1)).all(1) for p in params]).all(0)
            w_hh = torch.where(finite[:, None, None], params[1], 0.0)
            radius = torch.where(finite, spectral_radius(w_hh), math.nan)
            e_p = torch.where(finite, ortho_error(w_hh).double(), math.nan)
        n = max(self.since_eval, 1)
        sums = self.sums.double() / n
        val_loss = loss_sum / size
        val_error = wrong.double() / size
        diverged = ~self.active | ~finite | ~torch.isfinite(val_loss)
        self.active &= ~diverged
        self.sums.zero_()
        self.since_eval = 0
        return torch.stack([sums[0], val_loss, val_error, 1 - val_error, radius, sums[2], e_p,
                            sums[1], diverged.double(), wrong.double()], dim=1).cpu()

    def keep(self, positions: list[int]) -> None:
        """Shrink the pack to the members at ``positions`` (those still training)."""
        index = torch.tensor(positions, device=self.device)
        self.members = [self.members[i] for i in positions]
        self.model = PackedSRNN(*[p.detach().index_select(0, index) for p in self.params])
        self.params = list(self.model.parameters())
        self.rates = _Rates([m.config for m in self.members], self.dtype, self.device)
        self.active = self.active.index_select(0, index)
        self.sums = self.sums.index_select(1, index)


_EVAL_KEYS = ("train_loss", "val_loss", "val_error", "val_accuracy", "spectral_radius",
              "grad_norm_whh", "ortho_error", "grad_norm")
"""Metrics of :meth:`_Stage.evaluate` reported as they are (two bookkeeping columns follow:
diverged and the count of wrong samples)."""


def initial_weights(configs: Sequence[Config], task: Task, dtype: torch.dtype,
                    device: torch.device) -> tuple[list[Tensor], Tensor]:
    """Every member's initial parameters (W_xh, W_hh, b_h, W_hy, b_y, each (K, ...)) and its
    pre-training steps of W_hh (K,) (0 unless ``oinit``).

    Weights are drawn by :func:`~ortho_core.models.srnn.init_srnn` from each member's seed.
    ``oinit`` members then pre-train W_hh (and W_xh, W_hy with ``pretrain_weights=all``) at
    their own αₚ and tolerance (M eq. 18); a member that has not converged within its
    ``pretrain_max_steps`` raises :class:`~ortho_core.errors.PretrainError`.
    """
    cfg = configs[0]
    inits = [SRNNInit(c.seed, c.init, c.init_std, c.spectral_radius) for c in configs]
    model = init_srnn(task.n_in, cfg.hidden, task.n_out, inits, dtype=dtype, device=device)
    weights = [p.detach().clone() for p in model.parameters()]
    steps = torch.zeros(len(configs), dtype=torch.long)
    pre = [i for i, c in enumerate(configs) if c.variant == "oinit"]
    for p in (1, 0, 3):
        chosen = [i for i in pre if p == 1 or configs[i].pretrain_weights == "all"]
        if not chosen:
            continue
        index = torch.tensor(chosen, device=device)
        sub = [configs[i] for i in chosen]
        limit = torch.tensor([c.pretrain_max_steps for c in sub], device=device)
        result = orthogonal_pretrain(
            weights[p].index_select(0, index),
            torch.tensor([c.pretrain_lr for c in sub], dtype=torch.float64, device=device),
            torch.tensor([c.pretrain_tol for c in sub], dtype=torch.float64, device=device),
            int(limit.max()))
        within = result.converged & (result.steps <= limit)
        require_converged(PretrainResult(result.weights, result.steps, result.error, within))
        weights[p] = weights[p].index_copy(0, index, result.weights)
        if p == 1:
            steps[chosen] = result.steps.cpu()
    return weights, steps


def train(configs: Sequence[Config], reporter: Reporter) -> list[Result]:
    """Train a pack on one synthetic problem under the configured protocol; one Result each.

    Every ``eval_every`` iterations (and at the end of a length's budget) each member still
    training is reported with ``train_loss``, ``grad_norm`` and ``grad_norm_whh`` (‖∂E/∂θ‖ and
    ‖∂E/∂W_hh‖ of the loss alone, before clipping and without the OPEN term, averaged over
    the iterations since the last report), ``val_loss``, ``val_error`` and ``val_accuracy``
    (fractions of the validation set), ``spectral_radius`` ρ(W_hh), ``ortho_error``
    Eᵖ(W_hh) and ``seq_len``; ``step`` counts the member's own iterations over all lengths.

    A member whose loss, gradient or weights become NaN or inf stops updating at once and
    leaves the curriculum as diverged; the rest of the pack goes on.

    Summary: ``max_seq_len_solved`` (0 if none), ``iters_to_solve`` (at the last solved
    length; absent if none), ``val_error`` and ``val_loss`` (last evaluation),
    ``seq_lens_tried``, ``total_iters``, ``diverged`` (1 if it stopped by diverging),
    ``wall_time`` (seconds from the start of the pack until the member stopped) and, for
    ``oinit``, ``pretrain_steps`` (updates of W_hh's pre-training). Artifact ``stages``: one
    record per length tried. Outcome: ``solved`` if at least one length was solved (the
    ``fixed`` protocol: its length), else ``diverged`` or ``unsolved``.
    """
    check_pack(configs, PACK_FIELDS)
    started = time.monotonic()
    cfg = configs[0]
    task = get_task(cfg.task)
    device = resolve_device(cfg.device)
    dtype = DTYPES[cfg.dtype]
    members = [_Member(i, c) for i, c in enumerate(configs)]
    initial, pretrain_steps = initial_weights(configs, task, dtype, device)
    running = members
    seq_len = cfg.seq_len
    while running:
        weights = _stage_weights(running, initial, cfg.warm_start, device)
        stage = _Stage(running, task, seq_len, weights, dtype, device, started)
        solved = _train_length(stage, reporter)
        running = solved if cfg.protocol == "max_length" else []
        seq_len += cfg.seq_len_step
        if seq_len > cfg.max_seq_len:
            running = []
    return [_result(m, int(pretrain_steps[m.index])) for m in members]


def _stage_weights(running: list[_Member], initial: list[Tensor], warm_start: bool,
                   device: torch.device) -> list[Tensor]:
    """The starting parameters of a stage: each member's initial weights, or with
    ``warm_start`` the weights it ended its previous length with."""
    if warm_start and running[0].weights is not None:
        return [torch.stack([m.weights[j] for m in running]) for j in range(len(initial))]
    index = torch.tensor([m.index for m in running], device=device)
    return [w.index_select(0, index).clone() for w in initial]


def _train_length(stage: _Stage, reporter: Reporter) -> list[_Member]:
    """Train ``stage`` until each member has solved, diverged or used its budget; returns
    the members that solved, in pack order."""
    cfg = stage.members[0].config
    solved: list[_Member] = []
    done = 0
    while stage.members and done < cfg.max_iters:
        n = min(cfg.eval_every, cfg.max_iters - done)
        raw, y = stage.batches(n)
        for i in range(n):
            stage.iteration(raw[i], y[i])
        done += n
        table = stage.evaluate().tolist()
        keep = []
        for pos, (m, row) in enumerate(zip(stage.members, table, strict=True)):
            metrics = dict(zip(_EVAL_KEYS, row[:len(_EVAL_KEYS)], strict=True))
            metrics["seq_len"] = float(stage.seq_len)
            m.last = metrics
            reporter(Report(member=m.index, step=m.iters + done, metrics=metrics))
            if row[-2]:
                _finish(m, stage, pos, done, "diverged")
            elif row[-1] == 0:
                _finish(m, stage, pos, done, "solved")
                solved.append(m)
            else:
                keep.append(pos)
        if not keep:
            stage.members = []
        elif len(keep) < len(stage.members):
            stage.keep(keep)
    for pos, m in enumerate(stage.members):
        _finish(m, stage, pos, done, "unsolved")
    return sorted(solved, key=lambda m: m.index)


def _finish(m: _Member, stage: _Stage, pos: int, done: int, outcome: str) -> None:
    """Record the end of member ``m``'s length (at pack position ``pos``) after ``done``
    iterations."""
    m.iters += done
    m.stopped = time.monotonic() - stage.started
    m.stages.append({"seq_len": stage.seq_len, "outcome": outcome, "iters": done,
                     "val_error": m.last["val_error"]})
    if outcome == "solved":
        m.max_solved = stage.seq_len
        m.iters_to_solve = done
        m.weights = [p.detach()[pos].clone() for p in stage.params]
    m.diverged = outcome == "diverged"


def _result(m: _Member, pretrain_steps: int) -> Result:
    """The Result of member ``m`` once it has left the curriculum."""
    summary = {"max_seq_len_solved": float(m.max_solved),
               "val_error": m.last.get("val_error", math.nan),
               "val_loss": m.last.get("val_loss", math.nan),
               "seq_lens_tried": float(len(m.stages)),
               "total_iters": float(m.iters),
               "diverged": float(m.diverged),
               "wall_time": m.stopped}
    if m.iters_to_solve is not None:
        summary["iters_to_solve"] = float(m.iters_to_solve)
    if m.config.variant == "oinit":
        summary["pretrain_steps"] = float(pretrain_steps)
    if m.max_solved > 0:
        outcome = Outcome.SOLVED
    else:
        outcome = Outcome.DIVERGED if m.diverged else Outcome.UNSOLVED
    return Result(outcome=outcome, summary=summary, artifacts={"stages": m.stages})
