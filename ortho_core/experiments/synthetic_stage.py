"""One sequence length T of the synthetic experiment: a pack of SRNNs trained by SGD on one
length's data and validated on its held-out set (M §III-A).

:mod:`ortho_core.experiments.synthetic` holds the configuration and the protocols (which
lengths each member trains, fresh or warm-started); a :class:`Stage` is what runs for one
length: the packed model (:class:`~ortho_core.models.srnn.PackedSRNN`), the training and
validation streams of that length (:func:`stream_seed`), one SGD iteration along each
member's descent direction (the gradient or G's simplex directions, G §3.3, Alg. 3.2) with
the step of G eq. 3.7 and the OPEN term (M eq. 31), and the validation metrics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from ortho_core.data.galvan import draw_length
from ortho_core.data.synthetic import Task
from ortho_core.directions import DIRECTIONS, descent_directions, simplex_weights
from ortho_core.metrics import member_norm, spectral_radius
from ortho_core.models.srnn import PackedSRNN
from ortho_core.optim import clip_factors, sgd_step
from ortho_core.penalty import ortho_error, ortho_penalty_grad

EVAL_ELEMENTS = 1 << 24
"""Bound on K·b·T·H (hidden states held per validation chunk of b sequences); it sets the
chunk size (memory only, not results)."""

TRAIN_STREAM, VAL_STREAM, DIRECTION_STREAM = 0, 1, 2
"""The random streams of a length: training batches, the validation set and the simplex
weights β (G eq. 3.5), all shared by the pack like the data."""

Batch = tuple[Tensor, Tensor, Tensor | None]
"""One training batch: raw inputs, targets and the simplex weights β (T,) (None when no
member of the pack needs them)."""


class StageConfig(Protocol):
    """The fields of a synthetic ``Config`` that a stage reads."""

    lr: float
    penalty: float
    penalty_form: str
    clip: float | None
    direction: str
    switch_norm: float | None
    length_jitter: bool
    hidden: int
    batch_size: int
    val_size: int
    error_threshold: float
    data_seed: int


def stream_seed(data_seed: int, seq_len: int, stream: int) -> int:
    """The seed of random stream ``stream`` (0: training batches, 1: validation set, 2: simplex
    weights) at length ``seq_len``: 64 bits of
    ``numpy.random.SeedSequence([data_seed, seq_len, stream])``."""
    state = np.random.SeedSequence([data_seed, seq_len, stream]).generate_state(1, np.uint64)
    return int(state[0])


class Rates:
    """Per-member hyperparameters of the members currently in the pack, as (K,) tensors."""

    def __init__(self, configs: Sequence[StageConfig], dtype: torch.dtype,
                 device: torch.device):
        def vec(values: list[float]) -> Tensor:
            return torch.tensor(values, dtype=dtype, device=device)

        self.lr = vec([c.lr for c in configs])
        penalties = [c.penalty for c in configs]
        self.penalty = vec(penalties) if any(penalties) else None
        self.has_penalty = self.penalty > 0 if self.penalty is not None else None
        unsquared = [c.penalty_form == "unsquared" for c in configs]
        self.unsquared = (torch.tensor(unsquared, device=device)[:, None, None]
                          if any(unsquared) else None)
        clips = [c.clip or 0.0 for c in configs]
        self.clip = vec(clips) if any(clips) else None
        self.temporal = any(c.direction != "gradient" for c in configs)
        """Whether some member needs temporal gradients (a direction other than the gradient)."""
        self.direction = torch.tensor([DIRECTIONS.index(c.direction) for c in configs],
                                      device=device)
        self.switch_norm = vec([c.switch_norm if c.switch_norm is not None else math.inf
                                for c in configs])


class Stage:
    """One length T: the pack of members training at T, their data and their running sums.

    ``configs`` are the members' configurations in pack order, ``weights`` their starting
    parameters (W_xh, W_hh, b_h, W_hy, b_y, each (K, ...)).
    """

    def __init__(self, configs: Sequence[StageConfig], task: Task, seq_len: int,
                 weights: list[Tensor], dtype: torch.dtype, device: torch.device):
        cfg = configs[0]
        self.task, self.seq_len, self.dtype, self.device = task, seq_len, dtype, device
        self.configs = list(configs)
        self.model = PackedSRNN(*weights)
        self.params = list(self.model.parameters())
        self.rates = Rates(self.configs, dtype, device)
        self.train_gen, val_gen, self.beta_gen = (
            torch.Generator().manual_seed(stream_seed(cfg.data_seed, seq_len, stream))
            for stream in (TRAIN_STREAM, VAL_STREAM, DIRECTION_STREAM))
        self.val = [(raw.to(device), self._target(y.to(device)))
                    for raw, y in self._validation_set(val_gen)]
        """The validation set, in groups of one length each."""
        k = len(configs)
        self.active = torch.ones(k, dtype=torch.bool, device=device)
        self.sums = torch.zeros(3, k, dtype=dtype, device=device)
        """Since the last evaluation: loss, ‖∇‖ and ‖∇W_hh‖ summed over iterations."""
        self.since_eval = 0

    def _target(self, y: Tensor) -> Tensor:
        return y.to(self.dtype) if self.task.loss == "mse" else y

    def _validation_set(self, gen: torch.Generator) -> list[tuple[Tensor, Tensor]]:
        """``val_size`` sequences of length T drawn once; with ``length_jitter``, groups of
        ``batch_size`` sequences, each group of its own length in [T, 1.1T) (G: "10⁴ examples
        of different lengths sampled once", G §4.1; G's code draws its validation set as
        batches of one length each)."""
        cfg = self.configs[0]
        if not cfg.length_jitter:
            return [self.task.sample(cfg.val_size, self.seq_len, gen)]
        groups = []
        for start in range(0, cfg.val_size, cfg.batch_size):
            size = min(cfg.batch_size, cfg.val_size - start)
            groups.append(self.task.sample(size, draw_length(self.seq_len, gen), gen))
        return groups

    def draw(self, n: int) -> list[Batch]:
        """The next ``n`` training batches, on the device. Without ``length_jitter`` all have
        length T and move at once (:meth:`batches`); with it each has its own length
        (:func:`~ortho_core.data.galvan.draw_length`). Simplex weights β (G eq. 3.5) are drawn
        per batch when a member of the pack needs them."""
        cfg = self.configs[0]
        if cfg.length_jitter:
            drawn = []
            for _ in range(n):
                raw, y = self.task.sample(cfg.batch_size, draw_length(self.seq_len,
                                                                      self.train_gen),
                                          self.train_gen)
                drawn.append((raw.to(self.device), self._target(y.to(self.device))))
        else:
            raw, y = self.batches(n)
            drawn = list(zip(raw.unbind(0), y.unbind(0), strict=True))
        if not self.rates.temporal:
            return [(r, t, None) for r, t in drawn]
        betas = [simplex_weights(r.shape[1], self.beta_gen) for r, _ in drawn]
        moved = torch.cat(betas).to(self.device).split([len(b) for b in betas])
        return [(r, t, b) for (r, t), b in zip(drawn, moved, strict=True)]

    def batches(self, n: int) -> tuple[Tensor, Tensor]:
        """The next ``n`` training batches of length T (raw inputs and targets, stacked),
        moved at once."""
        cfg = self.configs[0]
        drawn = [self.task.sample(cfg.batch_size, self.seq_len, self.train_gen)
                 for _ in range(n)]
        raw = torch.stack([d[0] for d in drawn]).to(self.device)
        return raw, self._target(torch.stack([d[1] for d in drawn]).to(self.device))

    def iteration(self, raw: Tensor, y: Tensor, beta: Tensor | None = None) -> None:
        """One SGD step of every active member on the shared batch: θ − α·d along its
        direction d (G §3.3, Alg. 3.2) with α = μ·min(1, τ/‖d‖) (G eq. 3.7), then the OPEN
        term (M eq. 31) unclipped. ``beta``: the simplex weights (T,) of this batch."""
        model, rates, params = self.model, self.rates, self.params
        x = self.task.encode(raw, self.dtype)
        if rates.temporal:
            trace = model.bptt(x, lambda out: self.task.losses(out, y))
            losses, grads = trace.losses, trace.grads
        else:
            losses = self.task.losses(model(x), y)
            grads = list(torch.autograd.grad(losses.sum(), params))
        norm = member_norm(grads)
        norm_whh = member_norm([grads[1]])
        losses = losses.detach()
        self.sums += torch.stack([losses, norm, norm_whh])
        self.since_eval += 1
        ok = torch.isfinite(losses) & torch.isfinite(norm)
        step_norm = norm
        if rates.temporal:
            if beta is None:
                raise ValueError("Stage.iteration: a simplex direction needs the weights beta")
            grads = descent_directions(trace, beta, norm, rates.direction, rates.switch_norm)
            step_norm = member_norm(grads)
        if rates.clip is not None:
            factor = clip_factors(step_norm, rates.clip)
            grads = [g * factor.view(-1, *[1] * (g.dim() - 1)) for g in grads]
        if rates.penalty is not None:
            with_penalty = grads[1] + self._penalty_grad()
            grads[1] = torch.where(rates.has_penalty[:, None, None], with_penalty, grads[1])
            ok &= torch.isfinite(member_norm([grads[1]]))
        self.active &= ok
        sgd_step(params, grads, rates.lr, self.active)

    def _penalty_grad(self) -> Tensor:
        """The OPEN term of every member: the gradient of λ‖W_hhW_hhᵀ − I‖²_F (M eq. 31) or,
        with ``penalty_form=unsquared``, of λ‖W_hhW_hhᵀ − I‖_F (M's code)."""
        rates, w_hh = self.rates, self.model.w_hh.detach()
        grad = ortho_penalty_grad(w_hh, rates.penalty)
        if rates.unsquared is None:
            return grad
        return torch.where(rates.unsquared, ortho_penalty_grad(w_hh, rates.penalty, "unsquared"),
                           grad)

    def evaluate(self) -> Tensor:
        """Validate every member: (K, 10), the columns of :data:`EVAL_KEYS`, then whether it
        diverged (0/1) and its number of wrong validation samples. Diverged members are made
        inactive."""
        model, task = self.model, self.task
        k = len(self.configs)
        cfg = self.configs[0]
        size = sum(len(y) for _, y in self.val)
        loss_sum = torch.zeros(k, dtype=torch.float64, device=self.device)
        wrong = torch.zeros(k, dtype=torch.long, device=self.device)
        with torch.no_grad():
            for val_raw, val_y in self.val:
                chunk = max(1, min(len(val_y),
                                   EVAL_ELEMENTS // (k * val_raw.shape[1] * cfg.hidden)))
                for start in range(0, len(val_y), chunk):
                    y = val_y[start:start + chunk]
                    out = model(task.encode(val_raw[start:start + chunk], self.dtype))
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
        self.configs = [self.configs[i] for i in positions]
        self.model = PackedSRNN(*[p.detach().index_select(0, index) for p in self.params])
        self.params = list(self.model.parameters())
        self.rates = Rates(self.configs, self.dtype, self.device)
        self.active = self.active.index_select(0, index)
        self.sums = self.sums.index_select(1, index)


EVAL_KEYS = ("train_loss", "val_loss", "val_error", "val_accuracy", "spectral_radius",
              "grad_norm_whh", "ortho_error", "grad_norm")
"""Metrics of :meth:`Stage.evaluate` reported as they are (two bookkeeping columns follow:
diverged and the count of wrong samples)."""
