"""Experiment ``synthetic``: SRNN, SRNN+OPEN and SRNN+OINIT on M's pathological problems
(M §III-A, Table I, Fig. 2).

Run one configuration (or a pack) with ``ortho train synthetic --set task=temporal_order
--set variant=oinit --set lr=0.001``. A tanh SRNN with 100 hidden units reads a sequence of
length T and answers at the last step (:mod:`ortho_core.data.synthetic`); it is trained by SGD
on minibatches of 20 for at most 100,000 iterations per length and evaluated every 100
iterations on 10,000 held-out sequences. A length is *solved* at zero validation errors (for
adding: no sample with (y − t)² > ``error_threshold``). ``screen_size`` validates first on a
screen of that many sequences and goes on to the rest only where the screen does not already
settle the length as unsolved: the same decisions at a fraction of the cost.

G's protocol (G ch. 3-4, App. B) is a set of options: G's problem variants (``task``), the
per-batch length jitter (``length_jitter``), G's success criterion (``success``: validation
error < 1 %) and failure rule (``patience``: the validation loss has not decreased for so many
iterations), the spectral-radius initialisation (``spectral_radius``, G Alg. 3.1), and the
descent directions (``direction``: the gradient, or G's simplex directions built from the
temporal gradients, G eqs. 3.1-3.6, Alg. 3.2, :mod:`ortho_core.directions`) with the step
of G eq. 3.7 (``lr`` μ, ``clip`` τ).

Variants (M §III-A; SRNN = OPEN with λ = 0 = OINIT without pre-training):

- ``plain``: all weights Glorot-uniform ("normalised") or Gaussian.
- ``open``: the W_hh update gains 4λ(W_hhW_hhᵀ − I)W_hh (M eq. 31), the exact gradient of
  λ‖W_hhW_hhᵀ − I‖²_F. M's reference code adds λ times the gradient of the unsquared norm
  instead; the paper's eq. 31 is the default, M's code is ``penalty_form=unsquared``.
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
  (``data_seed``, T) (:func:`~ortho_core.experiments.synthetic_stage.stream_seed`), so a
  member sees the same data in any pack.
- Clipping (G §3.4, eq. 3.7, ``clip`` τ) rescales the direction (the *loss* gradient, or
  G's simplex direction) to norm ≤ τ; the OPEN term is added afterwards, unclipped, so that
  λ keeps the weight eq. 31 gives it.

Packs: members may differ in α, λ and its form, variant, αₚ, the pre-training fields, init,
σ, ρ, τ, the direction and ψ, the success criterion, the patience and seed; each gives the
numbers it would give alone (up to float rounding of batched products). The simplex weights
β are a random stream of the pack like the data (seeded by ``data_seed`` and T), so members
with a simplex direction share them.

This module holds the protocols (which lengths each member trains, from which weights); the
configuration is :mod:`~ortho_core.experiments.synthetic_config`, one length's training and
validation :class:`~ortho_core.experiments.synthetic_stage.Stage`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

from ortho_core.config import check_pack
from ortho_core.data.synthetic import Task, get_task
from ortho_core.devices import DTYPES, resolve_device
from ortho_core.experiments.synthetic_config import (
    ADDED_FIELDS,
    PACK_FIELDS,
    Config,
    ends_early,
    iteration_budget,
    planned_steps,
    probe_config,
)
from ortho_core.experiments.synthetic_stage import (
    EVAL_KEYS,
    SUCCESS_RATE,
    Stage,
    defers_radius,
    report_metrics,
)
from ortho_core.init import orthogonal_pretrain, require_converged
from ortho_core.models.srnn import SRNNInit, init_srnn
from ortho_core.reporting import Outcome, Report, Reporter, Result
from ortho_core.subnormals import honours_subnormals

__all__ = ["ADDED_FIELDS", "PACK_FIELDS", "Config", "ends_early", "initial_weights",
           "iteration_budget", "planned_steps", "probe_config", "train"]

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
    stalled: bool = False
    """Whether its last length was given up for lack of progress (``patience``)."""
    best_loss: float = math.inf
    best_at: int = 0
    """The lowest validation loss of the current length and the iteration it was reached."""


def initial_weights(configs: Sequence[Config], task: Task, dtype: torch.dtype,
                    device: torch.device) -> tuple[list[Tensor], Tensor]:
    """Every member's initial parameters (W_xh, W_hh, b_h, W_hy, b_y, each (K, ...)) and its
    pre-training steps of W_hh (K,) (0 unless ``oinit``).

    Weights are drawn by :func:`~ortho_core.models.srnn.init_srnn` from each member's seed.
    ``oinit`` members then pre-train W_hh (and W_xh, W_hy with ``pretrain_weights=all``) at
    their own αₚ and tolerance (M eq. 18); a member that has not converged within its
    ``pretrain_max_steps`` raises :class:`~ortho_core.errors.PretrainError` naming its pack
    index (the pack's isolation then trains the others without it).
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
            limit)
        require_converged(result, members=chosen)
        weights[p] = weights[p].index_copy(0, index, result.weights)
        if p == 1:
            steps[chosen] = result.steps.cpu()
    return weights, steps


METRICS: dict[str, str] = {
    "train_loss": "training loss, averaged over the iterations since the last report",
    "grad_norm": "‖∇θ‖ before clipping (the OPEN term included), averaged likewise",
    "grad_norm_whh": "‖∇W_hh‖ before clipping (the OPEN term included), averaged likewise",
    "val_loss": "validation loss (a full evaluation)",
    "val_error": "validation error, a fraction (a full evaluation)",
    "val_accuracy": "validation accuracy, a fraction (a full evaluation)",
    "val_loss_screen": "validation loss on the screen (with screen_size, in place of val_loss)",
    "val_error_screen": "validation error on the screen (likewise, in place of val_error)",
    "spectral_radius": "ρ(W_hh)",
    "ortho_error": "Eᵖ(W_hh) = ‖W_hhW_hhᵀ − I‖²_F",
    "seq_len": "the sequence length T being trained",
}
"""Every key a report's metrics can hold, with its meaning (what a spec's
``scheduler.metric_step`` may name): see :func:`train`."""

SUMMARY: dict[str, str] = {
    "max_seq_len_solved": "longest sequence length T solved (0: none)",
    "last_seq_len": "the last length trained (the one val_error and val_loss belong to)",
    "val_error": "validation error at the end of the last length trained",
    "val_loss": "validation loss at the end of the last length trained",
    "seq_lens_tried": "number of lengths trained",
    "total_iters": "training iterations over every length",
    "diverged": "1 if the loss stopped being finite, else 0",
    "wall_time": "seconds from the pack's start until this member left the curriculum",
    "stalled": "1 if G's patience ran out (with patience only)",
    "iters_to_solve": "iterations of the length that was solved last (when one was)",
    "pretrain_steps": "OINIT pre-training steps (variant oinit only)",
}
"""The keys a member's ``Result.summary`` can hold and their meanings: what a spec's
``metric.name`` may name (checked when the spec is resolved), listed by ``ortho train --keys``."""


@honours_subnormals
def train(configs: Sequence[Config], reporter: Reporter) -> list[Result]:
    """Train a pack on one synthetic problem under the configured protocol; one Result each.

    Every ``eval_every`` iterations (and at the end of a length's budget) each member still
    training is reported with ``train_loss``, ``grad_norm`` and ``grad_norm_whh`` (‖∇θ‖ and
    ‖∇W_hh‖ before clipping, of the loss E and, for ``open``, with the OPEN term added to
    W_hh's, as M's SRNN.py adds it before logging its gradient norm; averaged over the
    iterations since the last report;
    :meth:`~ortho_core.experiments.synthetic_stage.Stage.iteration`), ``val_loss``,
    ``val_error`` and ``val_accuracy`` (fractions of the validation set), ``spectral_radius``
    ρ(W_hh), ``ortho_error`` Eᵖ(W_hh) and ``seq_len``; ``step`` counts the member's own
    iterations over all lengths.
    With ``screen_size``, an evaluation that the screen alone settles as unsolved (see
    :meth:`~ortho_core.experiments.synthetic_stage.Stage.evaluate`) reports the screen's
    ``val_loss_screen`` and ``val_error_screen`` instead of ``val_loss``, ``val_error`` and
    ``val_accuracy``; the evaluation that ends a member's length is always on the full set.
    On CUDA an evaluation's reports reach ``reporter`` after the first iteration that ends
    once a host thread has computed their ρ(W_hh) while the pack trained on
    (:func:`~ortho_core.experiments.synthetic_stage.defers_radius`), at the latest at the next
    evaluation (or when training ends or fails); the reports and their order are those of
    the CPU's immediate ones.

    A member whose loss, gradient or weights become NaN or inf stops updating at once and
    leaves the curriculum as diverged; the rest of the pack goes on.

    Summary: ``max_seq_len_solved`` (0 if none), ``iters_to_solve`` (at the last solved
    length; absent if none), ``last_seq_len`` (the last length tried: past the longest
    solved one unless the curriculum ran out) with its ``val_error`` and ``val_loss`` (last
    evaluation),
    ``seq_lens_tried``, ``total_iters``, ``diverged`` (1 if it stopped by diverging),
    with ``patience`` ``stalled`` (1 if its last length was given up for lack of progress),
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
    outbox = _Outbox(reporter)
    try:
        while running:
            weights = _stage_weights(running, initial, cfg.warm_start, device)
            stage = Stage([m.config for m in running], task, seq_len, weights, dtype, device)
            solved = _train_length(stage, running, outbox, started)
            running = solved if cfg.protocol == "max_length" else []
            seq_len += cfg.seq_len_step
            if seq_len > cfg.max_seq_len:
                running = []
    finally:
        outbox.flush()
    return [_result(m, int(pretrain_steps[m.index])) for m in members]


class _Outbox:
    """The reporter's side of the evaluations: an evaluation's reports go out at once, or,
    where ρ(W_hh) is computed on a host thread (:func:`defers_radius`), once it is there
    (:meth:`poll`, after every iteration), so the pack trains meanwhile: an early-stopping
    scheduler sees them an iteration or a few after the evaluation, not a window later.
    Reports keep their order either way."""

    def __init__(self, reporter: Reporter):
        self._reporter = reporter
        self._held: list[tuple[int, Report]] = []
        self._radius: Future[Tensor] | None = None

    def send(self, reports: list[tuple[int, Report]], radius: Future[Tensor] | None) -> None:
        """Send (pack position, report) pairs of one evaluation; with ``radius``, the (K,)
        ρ(W_hh) by pack position that their ``spectral_radius`` still waits for."""
        self.flush()
        if radius is None:
            for _, report in reports:
                self._reporter(report)
        else:
            self._held, self._radius = reports, radius

    def poll(self) -> None:
        """Send the reports held if their ρ(W_hh) is there."""
        if self._radius is not None and self._radius.done():
            self.flush()

    def flush(self) -> None:
        """Send the reports held, with their ρ(W_hh) (waiting for it)."""
        if self._radius is None:
            return
        values = self._radius.result().tolist()
        held, self._held, self._radius = self._held, [], None
        for pos, report in held:
            self._reporter(replace(report, metrics={**report.metrics,
                                                    "spectral_radius": values[pos]}))


def _stage_weights(running: list[_Member], initial: list[Tensor], warm_start: bool,
                   device: torch.device) -> list[Tensor]:
    """The starting parameters of a stage: each member's initial weights, or with
    ``warm_start`` the weights it ended its previous length with."""
    if warm_start and running[0].weights is not None:
        return [torch.stack([m.weights[j] for m in running]) for j in range(len(initial))]
    index = torch.tensor([m.index for m in running], device=device)
    return [w.index_select(0, index).clone() for w in initial]


def _train_length(stage: Stage, members: list[_Member], outbox: _Outbox,
                  started: float) -> list[_Member]:
    """Train ``stage`` (the pack of ``members``) until each member has solved, stalled,
    diverged or used its budget (with ``settle_early`` off, only a divergence ends a member
    before its budget); returns the members that solved, in pack order. ``started`` is
    ``time.monotonic()`` at the start of the pack (for the members' wall times)."""
    cfg = members[0].config
    solved: list[_Member] = []
    done = 0
    for m in members:
        m.best_loss, m.best_at = math.inf, 0
    while members and done < cfg.max_iters:
        n = min(cfg.eval_every, cfg.max_iters - done)
        for raw, y, beta in stage.draw(n):
            stage.iteration(raw, y, beta)
            outbox.poll()
        done += n
        later = defers_radius(stage.device)
        final = done >= cfg.max_iters
        settles = cfg.settle_early or final
        table = stage.evaluate(final=final, radius=not later).tolist()
        keep, reports = [], []
        for pos, (m, row) in enumerate(zip(members, table, strict=True)):
            metrics = report_metrics(row)
            metrics["seq_len"] = float(stage.seq_len)
            m.last = metrics
            reports.append((pos, Report(member=m.index, step=m.iters + done, metrics=metrics)))
            diverged, wrong, screened = row[len(EVAL_KEYS):]
            if diverged:
                _finish(m, stage, pos, done, "diverged", started)
            elif screened:
                keep.append(pos)
            elif settles and _solved(m.config, metrics["val_error"], wrong):
                _finish(m, stage, pos, done, "solved", started)
                solved.append(m)
            elif _stalled(m, metrics["val_loss"], done) and settles:
                _finish(m, stage, pos, done, "stalled", started)
            else:
                keep.append(pos)
        outbox.send(reports, stage.radius_later() if later else None)
        if not keep:
            members = []
        elif len(keep) < len(members):
            members = [members[i] for i in keep]
            stage.keep(keep)
    for pos, m in enumerate(members):
        _finish(m, stage, pos, done, "unsolved", started)
    return sorted(solved, key=lambda m: m.index)


def _solved(config: Config, val_error: float, wrong: float) -> bool:
    """Whether a validation solves the length: no wrong sample (M) or, with
    ``success=under_one_percent``, fewer than 1 % (G §4.1)."""
    if config.success == "under_one_percent":
        return val_error < SUCCESS_RATE
    return wrong == 0


def _stalled(m: _Member, val_loss: float, done: int) -> bool:
    """Track member ``m``'s best validation loss; True once it has not decreased for
    ``patience`` iterations (G §4.1: failure after 3·10⁶)."""
    if val_loss < m.best_loss:
        m.best_loss, m.best_at = val_loss, done
        return False
    patience = m.config.patience
    return patience is not None and done - m.best_at >= patience


def _finish(m: _Member, stage: Stage, pos: int, done: int, outcome: str,
            started: float) -> None:
    """Record the end of member ``m``'s length (at pack position ``pos``) after ``done``
    iterations."""
    m.iters += done
    m.stopped = time.monotonic() - started
    m.stages.append({"seq_len": stage.seq_len, "outcome": outcome, "iters": done,
                     "val_error": m.last["val_error"]})
    if outcome == "solved":
        m.max_solved = stage.seq_len
        m.iters_to_solve = done
        m.weights = [p.detach()[pos].clone() for p in stage.params]
    m.diverged = outcome == "diverged"
    m.stalled = outcome == "stalled"


def _result(m: _Member, pretrain_steps: int) -> Result:
    """The Result of member ``m`` once it has left the curriculum."""
    summary = {"max_seq_len_solved": float(m.max_solved),
               **({"last_seq_len": float(m.stages[-1]["seq_len"])} if m.stages else {}),
               "val_error": m.last.get("val_error", math.nan),
               "val_loss": m.last.get("val_loss", math.nan),
               "seq_lens_tried": float(len(m.stages)),
               "total_iters": float(m.iters),
               "diverged": float(m.diverged),
               "wall_time": m.stopped}
    if m.config.patience is not None:
        summary["stalled"] = float(m.stalled)
    if m.iters_to_solve is not None:
        summary["iters_to_solve"] = float(m.iters_to_solve)
    if m.config.variant == "oinit":
        summary["pretrain_steps"] = float(pretrain_steps)
    if m.max_solved > 0:
        outcome = Outcome.SOLVED
    else:
        outcome = Outcome.DIVERGED if m.diverged else Outcome.UNSOLVED
    return Result(outcome=outcome, summary=summary, artifacts={"stages": m.stages})
