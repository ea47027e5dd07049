"""One sequence length T of the synthetic experiment: a pack of SRNNs trained by SGD on one
length's data and validated on its held-out set (M §III-A).

:mod:`ortho_core.experiments.synthetic` holds the configuration and the protocols (which
lengths each member trains, fresh or warm-started); a :class:`Stage` is what runs for one
length: the packed model (:class:`~ortho_core.models.srnn.PackedSRNN`), the training and
validation streams of that length (:func:`stream_seed`), one SGD iteration along each
member's descent direction (the gradient or G's simplex directions, G §3.3, Alg. 3.2) with
the step of G eq. 3.7 and the OPEN term (M eq. 31), and the validation metrics, on the full
validation set or screened on its first ``screen_size`` sequences where that provably
decides the same (:meth:`Stage.evaluate`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
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

EVAL_ELEMENTS = 1 << 21
"""Bound on the numbers a validation chunk of b sequences holds: the pack's current states
K·b·H (validation keeps no earlier ones) or, where more, the encoded inputs b·T·I. It sets
the chunk size, which moves speed, not results beyond float rounding: each step's products
grow with b until the states leave the CPU's caches; ``benchmarks/eval_share.py --elements``
measures the choice."""

TRAIN_STREAM, VAL_STREAM, DIRECTION_STREAM = 0, 1, 2
"""The random streams of a length: training batches, the validation set and the simplex
weights β (G eq. 3.5), all shared by the pack like the data."""

SUCCESS_RATE = 0.01
"""``success=under_one_percent`` solves a length below this validation error rate (G §4.1)."""

_RADII = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spectral-radius")
"""The thread :meth:`Stage.radius_later` computes on (started at its first use)."""


def defers_radius(device: torch.device) -> bool:
    """Whether the trainer takes ρ(W_hh) off the evaluation's path (:meth:`Stage.radius_later`)
    on ``device``: on CUDA, where the pack trains on while a host thread computes it (ρ is
    computed on the host, :func:`~ortho_core.metrics.spectral_radius`: at 1.4 ms a member on
    one thread it costs a pack of 224 on an H100 about as much as the 100 iterations between
    two evaluations; it is split over the trial's threads, one per CPU of its
    ``resources.cpu``, which the shipped specs set to 1); not on a CPU, where that thread
    would take the cores the pack trains on."""
    return device.type == "cuda"


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
    screen_size: int | None
    success: str
    patience: int | None
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
        squared = [c.penalty_form == "squared" for c in configs]
        self.form: str | Tensor = "squared" if all(squared) else torch.tensor(squared,
                                                                              device=device)
        """Each member's penalty form (:func:`~ortho_core.penalty.ortho_penalty_grad`): true
        for the squared one, or ``"squared"`` when all are."""
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
        self.val_count = cfg.val_size
        self.screen_count = cfg.screen_size or 0
        self.screen, self.rest = ((None, None) if cfg.screen_size is None
                                  else _split(self.val, cfg.screen_size))
        """The first ``screen_size`` validation sequences and the others (None unscreened)."""
        self.input_bound, self.target_bound = _magnitudes(task, self.val)
        """The largest |input| and |target| of the validation set, for
        :meth:`_losses_bounded`."""
        k = len(configs)
        self.active = torch.ones(k, dtype=torch.bool, device=device)
        self.sums = torch.zeros(3, k, dtype=dtype, device=device)
        """Since the last evaluation: loss, ‖∇θ‖ and ‖∇W_hh‖ (with the OPEN term, before
        clipping: :meth:`iteration`) summed over iterations."""
        self.since_eval = 0
        self._set_rules()

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
        term (M eq. 31) unclipped. ``beta``: the simplex weights (T,) of this batch.

        The norms summed for the reports, ‖∇θ‖ and ‖∇W_hh‖, are those of the gradient an
        OPEN member descends before clipping: the loss's with the OPEN term added to W_hh's,
        as M's SRNN.py adds it to ``gWhh`` before logging ``norm_theta`` (so M Fig. 2's
        SRNN+OPEN curve is this quantity); the loss's alone for the others. Clipping, the
        switch of ``simplex_switch`` and the simplex directions read the loss gradient's
        norm."""
        model, rates, params = self.model, self.rates, self.params
        x = self.task.encode(raw, self.dtype)
        if rates.temporal:
            trace = model.bptt(x, lambda out: self.task.losses(out, y))
            losses, grads = trace.losses, trace.grads
        else:
            losses = self.task.losses(model(x), y)
            grads = list(torch.autograd.grad(losses.sum(), params))
        norm = member_norm(grads)
        penalty_grad = None if rates.penalty is None else self._penalty_grad()
        if penalty_grad is None:
            logged, logged_whh = norm, member_norm([grads[1]])
        else:
            whh = torch.where(rates.has_penalty[:, None, None], grads[1] + penalty_grad,
                              grads[1])
            logged = member_norm([grads[0], whh, *grads[2:]])
            logged_whh = member_norm([whh])
        losses = losses.detach()
        self.sums += torch.stack([losses, logged, logged_whh])
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
        if penalty_grad is not None:
            with_penalty = grads[1] + penalty_grad
            grads[1] = torch.where(rates.has_penalty[:, None, None], with_penalty, grads[1])
            ok &= torch.isfinite(member_norm([grads[1]]))
        self.active &= ok
        sgd_step(params, grads, rates.lr, self.active, overwrite_grads=True)

    def _penalty_grad(self) -> Tensor:
        """The OPEN term of every member: the gradient of λ‖W_hhW_hhᵀ − I‖²_F (M eq. 31) or,
        with ``penalty_form=unsquared``, of λ‖W_hhW_hhᵀ − I‖_F (M's code)."""
        rates = self.rates
        return ortho_penalty_grad(self.model.w_hh.detach(), rates.penalty, rates.form)

    def evaluate(self, final: bool = False, radius: bool = True) -> Tensor:
        """Validate every member: (K, 11), the columns of :data:`EVAL_KEYS`, then whether it
        diverged (0/1), its number of wrong validation samples and whether it was screened
        (0/1). Diverged members are made inactive. ``final``: the last evaluation of the
        length's budget, always on the full set. ``radius=False`` leaves the
        ``spectral_radius`` column NaN, for the caller to take from :meth:`radius_later`.

        Without ``screen_size`` every member is validated on the full set (M Table I). With
        it, every member is validated on the first ``screen_size`` sequences (the screen);
        a member is *screened* (its validation stops there) when the screen alone settles
        the evaluation, which is exact:

        - unsolved: the full set's wrong count is at least the screen's, so ≥ 1 wrong on the
          screen means ≥ 1 on the full set (``zero_errors``), and screen wrong / ``val_size``
          ≥ 1 % (the same float division as the full rate, which is monotone) means a full
          rate ≥ 1 % (``under_one_percent``);
        - not diverged: its weights and screen loss are finite and the weights bound every
          sample's loss (:meth:`_losses_bounded`), so the full loss is finite too;
        - no ``patience`` (whose rule reads the full loss), and not ``final`` (so a length
          always ends on full-set numbers).

        Every other member is validated on the rest of the set as well, so its solved,
        diverged and stalled decisions read the full set's numbers. A screened member's
        ``val_loss``, ``val_error`` and ``val_accuracy`` columns hold the screen's values;
        :func:`report_metrics` names them apart.
        """
        k = len(self.configs)
        params = [p.detach() for p in self.params]
        with torch.no_grad():
            finite = _finite(params)
            screened = torch.zeros(k, dtype=torch.bool, device=self.device)
            if self.screen is None:
                loss_sum, wrong = self._validate(self.model, self.val)
            else:
                loss_sum, wrong = self._validate(self.model, self.screen)
                if not final:
                    screened = (self.screenable & self.active & finite
                                & torch.isfinite(loss_sum) & self._unsolved(wrong)
                                & self._losses_bounded(params))
                rest = (~screened).nonzero().squeeze(1)
                if len(rest):
                    model = self.model if len(rest) == k else PackedSRNN(
                        *[p.index_select(0, rest) for p in params])
                    rest_loss, rest_wrong = self._validate(model, self.rest)
                    loss_sum.index_add_(0, rest, rest_loss)
                    wrong.index_add_(0, rest, rest_wrong)
            w_hh = torch.where(finite[:, None, None], params[1], 0.0)
            rho = (torch.where(finite, spectral_radius(w_hh), math.nan) if radius
                   else torch.full((k,), math.nan, dtype=torch.float64, device=self.device))
            e_p = torch.where(finite, ortho_error(w_hh).double(), math.nan)
        size = torch.where(screened, self.screen_count, self.val_count).double()
        n = max(self.since_eval, 1)
        sums = self.sums.double() / n
        val_loss = loss_sum / size
        val_error = wrong.double() / size
        diverged = ~self.active | ~finite | ~torch.isfinite(val_loss)
        self.active &= ~diverged
        self.sums.zero_()
        self.since_eval = 0
        return torch.stack([sums[0], val_loss, val_error, 1 - val_error, rho, sums[2], e_p,
                            sums[1], diverged.double(), wrong.double(), screened.double()],
                           dim=1).cpu()

    def radius_later(self) -> Future[Tensor]:
        """Every member's ρ(W_hh) now, as :meth:`evaluate`'s ``spectral_radius`` column (K,)
        (float64, on the CPU; NaN where a weight is not finite), computed on a host thread
        from a copy of W_hh taken at the call: the pack may train on meanwhile."""
        params = [p.detach() for p in self.params]
        with torch.no_grad():
            finite = _finite(params)
            w_hh = torch.where(finite[:, None, None], params[1], 0.0).to("cpu", torch.float64)
        finite = finite.cpu()
        return _RADII.submit(lambda: torch.where(finite, spectral_radius(w_hh), math.nan))

    def _validate(self, model: PackedSRNN,
                  groups: list[tuple[Tensor, Tensor]]) -> tuple[Tensor, Tensor]:
        """Summed validation loss (float64) and wrong samples of every member of ``model``
        on ``groups``, in chunks of at most :data:`EVAL_ELEMENTS` numbers."""
        task, cfg, k = self.task, self.configs[0], model.n_members
        loss_sum = torch.zeros(k, dtype=torch.float64, device=self.device)
        wrong = torch.zeros(k, dtype=torch.long, device=self.device)
        for val_raw, val_y in groups:
            per_sequence = max(k * cfg.hidden, val_raw.shape[1] * task.n_in)
            chunk = max(1, min(len(val_y), EVAL_ELEMENTS // per_sequence))
            for start in range(0, len(val_y), chunk):
                y = val_y[start:start + chunk]
                out = model(task.encode(val_raw[start:start + chunk], self.dtype))
                loss_sum += task.losses(out, y).double() * len(y)
                wrong += task.errors(out, y, cfg.error_threshold).sum(-1)
        return loss_sum, wrong

    def _unsolved(self, wrong: Tensor) -> Tensor:
        """(K,) whether ``wrong`` errors on part of the validation set already make each
        member's full-set validation unsolved under its ``success`` criterion."""
        rate = wrong.double() / self.val_count
        return torch.where(self.one_percent, rate >= SUCCESS_RATE, wrong > 0)

    def _losses_bounded(self, params: list[Tensor]) -> Tensor:
        """(K,) whether each member's weights bound its validation loss below overflow, for
        every input the validation set holds.

        With ‖θ‖₁ the sum of |w| over all its weights, |h| ≤ 1 (tanh) and inputs and targets
        of magnitude ≤ x and t, every pre-activation and output is at most a = max(1, x)‖θ‖₁
        in magnitude, a sample's loss at most n_out·(2a + t + log n_out + 1)² (softmax
        cross-entropy ≤ 2a + log n_out, squared error ≤ n_out(a + t)²), and a chunk's summed
        loss at most ``val_size`` times that; below a quarter of the dtype's largest number
        (room for rounding) no sum can overflow.
        """
        k = len(params[0])
        l1 = sum(p.reshape(k, -1).double().abs().sum(1) for p in params)
        n_out = self.task.n_out
        a = max(1.0, self.input_bound) * l1
        worst = self.val_count * n_out * (2 * a + self.target_bound + math.log(n_out) + 1) ** 2
        return worst <= torch.finfo(self.dtype).max / 4

    def keep(self, positions: list[int]) -> None:
        """Shrink the pack to the members at ``positions`` (those still training)."""
        index = torch.tensor(positions, device=self.device)
        self.configs = [self.configs[i] for i in positions]
        self.model = PackedSRNN(*[p.detach().index_select(0, index) for p in self.params])
        self.params = list(self.model.parameters())
        self.rates = Rates(self.configs, self.dtype, self.device)
        self.active = self.active.index_select(0, index)
        self.sums = self.sums.index_select(1, index)
        self._set_rules()

    def _set_rules(self) -> None:
        """The members' success criteria and whether each may be screened (no ``patience``),
        as (K,) masks."""
        self.one_percent = torch.tensor([c.success == "under_one_percent"
                                         for c in self.configs], device=self.device)
        self.screenable = torch.tensor([c.patience is None for c in self.configs],
                                       device=self.device)


def _finite(params: list[Tensor]) -> Tensor:
    """(K,) whether every weight of each member is finite."""
    k = len(params[0])
    return torch.stack([torch.isfinite(p.reshape(k, -1)).all(1) for p in params]).all(0)


def _magnitudes(task: Task, groups: list[tuple[Tensor, Tensor]]) -> tuple[float, float]:
    """The largest |input| and |target| in ``groups``: one-hot inputs have 1, and class targets
    do not enter a loss bound (0)."""
    if task.loss != "mse":
        return 1.0, 0.0
    return (max(float(raw.abs().max()) for raw, _ in groups),
            max(float(y.abs().max()) for _, y in groups))


def _split(groups: list[tuple[Tensor, Tensor]],
           n: int) -> tuple[list[tuple[Tensor, Tensor]], list[tuple[Tensor, Tensor]]]:
    """The first ``n`` sequences of ``groups`` and the rest, each as groups (views)."""
    head, tail, left = [], [], n
    for raw, y in groups:
        cut = min(left, len(y))
        if cut:
            head.append((raw[:cut], y[:cut]))
        if cut < len(y):
            tail.append((raw[cut:], y[cut:]))
        left -= cut
    return head, tail


EVAL_KEYS = ("train_loss", "val_loss", "val_error", "val_accuracy", "spectral_radius",
              "grad_norm_whh", "ortho_error", "grad_norm")
"""Metrics of :meth:`Stage.evaluate` reported as they are (three bookkeeping columns follow:
diverged, the count of wrong samples and screened)."""

SCREENED_KEYS = {"val_loss": "val_loss_screen", "val_error": "val_error_screen"}
"""The names a screened evaluation reports its screen's loss and error rate under (its
accuracy is left out), so that ``val_loss`` and ``val_error`` always mean the full set."""


def report_metrics(row: list[float]) -> dict[str, float]:
    """The reported metrics of one row of :meth:`Stage.evaluate`: :data:`EVAL_KEYS`, with a
    screened row's validation numbers under :data:`SCREENED_KEYS`."""
    metrics = dict(zip(EVAL_KEYS, row[:len(EVAL_KEYS)], strict=True))
    if row[-1]:
        del metrics["val_accuracy"]
        for full, screen in SCREENED_KEYS.items():
            metrics[screen] = metrics.pop(full)
    return metrics
