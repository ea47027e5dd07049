"""The configuration of experiment ``synthetic`` (M §III-A, Table I; G ch. 3-4, App. B): one
field per DESIGN.md key, each validated at construction (``ConfigError`` naming the field).

:mod:`ortho_core.experiments.synthetic` trains packs of these configurations and re-exports
:class:`Config`, :data:`PACK_FIELDS` and :data:`VARIANTS`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from ortho_core.config import (
    integer_at_least,
    non_negative,
    one_of,
    optional_count,
    positive,
    require,
    seed_value,
)
from ortho_core.data.synthetic import DEFAULT_ERROR_THRESHOLD, get_task
from ortho_core.devices import DTYPES, check_runtime
from ortho_core.directions import DIRECTIONS
from ortho_core.experiments import PROBE_PRETRAIN_TOL
from ortho_core.penalty import PENALTY_FORMS
from ortho_core.subnormals import Subnormals

VARIANTS = ("plain", "open", "oinit")
"""M's recurrent models: SRNN, SRNN+OPEN, SRNN+OINIT."""



@dataclass
class Config:
    """One configuration of the synthetic-problem experiment (M §III-A, Table I)."""

    task: str = "temporal_order"
    """The problem: ``temporal_order``, ``temporal_order_3bit``, ``adding`` or
    ``permutation`` (M §III-A); ``adding_galvan``, ``multiplication``, ``xor`` or
    ``temporal_order_galvan`` (G App. B, :mod:`ortho_core.data.galvan`)."""
    variant: Literal["plain", "open", "oinit"] = "plain"
    """``plain`` (SRNN), ``open`` (SRNN+OPEN, penalty update of W_hh, M eq. 31) or ``oinit``
    (SRNN+OINIT, orthogonal pre-training, M eq. 18)."""
    lr: float = 0.01
    """α: SGD learning rate (M's grid 10⁻¹…10⁻⁴)."""
    penalty: float = 0.0
    """λ: weight of ‖W_hhW_hhᵀ − I‖²_F (M eq. 31); must be > 0 with ``open`` and 0 otherwise
    (M's grid 1, 10⁻¹…10⁻⁴)."""
    penalty_form: Literal["squared", "unsquared"] = "squared"
    """``open`` only: ``squared`` adds the gradient of λ‖W_hhW_hhᵀ − I‖²_F (M eqs. 29-31);
    ``unsquared`` that of λ‖W_hhW_hhᵀ − I‖_F, as M's reference code does (its published λ
    were tuned under it)."""
    pretrain_lr: float = 0.1
    """αₚ: rate of the orthogonal pre-training of ``oinit`` (M: 0.1)."""
    pretrain_tol: float = 1e-6
    """``oinit`` pre-training stops once Eᵖ = ‖WWᵀ − I‖²_F < this (M: 10⁻⁶)."""
    pretrain_max_steps: int = 10_000
    """Pre-training steps after which ``oinit`` gives up with a ``PretrainError``."""
    pretrain_weights: Literal["recurrent", "all"] = "recurrent"
    """Which matrices ``oinit`` pre-trains: ``recurrent`` (W_hh only, M's text, eq. 18) or
    ``all`` (also W_xh and W_hy, each from its own draw, rows or columns, whichever are
    fewer, made orthonormal by the same descent on Eᵖ: M's reference code, ``rand_ortho``
    on all three matrices in SRNN.py)."""
    init: Literal["normalised", "gaussian"] = "normalised"
    """Initial weights: ``normalised`` (Glorot uniform, M §III-A) or ``gaussian`` N(0, σ²)."""
    init_std: float = 0.1
    """σ of the ``gaussian`` initialisation."""
    spectral_radius: float | None = None
    """ρ: rescale the initial W_hh to this spectral radius (G Alg. 3.1); None: no rescaling."""
    seq_len: int = 10
    """T: the (first) sequence length (M: 10)."""
    length_jitter: bool = False
    """Draw each batch's length L = T + randint(T // 10) ∈ [T, 1.1T) (G App. B; M's and G's
    code), and the validation set in groups of ``batch_size`` sequences of such lengths;
    False: every sequence has exactly T steps (M's text)."""
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
    screen_size: int | None = None
    """Screened validation: each evaluation first validates on the first ``screen_size``
    sequences of the validation set, and the rest only for members whose screen errors do
    not already settle "unsolved" (more than zero wrong under ``zero_errors``; ≥ 1 % of
    ``val_size`` wrong under ``under_one_percent``), so that solved, unsolved and diverged
    fall exactly as under the full protocol at a fraction of its cost (see
    :meth:`~ortho_core.experiments.synthetic_stage.Stage.evaluate`). Members with
    ``patience`` are always validated on the full set (their rule reads the full loss).
    None: every evaluation validates every member on all ``val_size`` sequences (M)."""
    error_threshold: float = DEFAULT_ERROR_THRESHOLD
    """``adding``: a sample is wrong when (y − t)² exceeds this; 0.04 is M's reference code,
    M's text quotes |y − t| < 10⁻⁴, which is 1e-8 here. ``adding_galvan`` and
    ``multiplication``: wrong when |y − t| ≥ this (G App. B: 0.04). Unused otherwise."""
    success: Literal["zero_errors", "under_one_percent"] = "zero_errors"
    """When a length is solved: ``zero_errors``, no wrong validation sample (M); or
    ``under_one_percent``, fewer than 1 % wrong (G §4.1)."""
    patience: int | None = None
    """Give a length up as unsolved once the validation loss has not reached a new minimum for
    this many iterations (G §4.1: 3·10⁶; checked at each validation); None: never."""
    settle_early: bool = True
    """End a member's length at the first validation that settles it (solved, or stalled
    under ``patience``), as M and G do; False trains every member for the length's whole
    ``max_iters`` and takes the outcome from the last validation (a diverged member still
    stops). ``pack_size: auto``'s probe trains so (:func:`probe_config`): a member that
    solves at its first validation would otherwise leave the pack, and the point would time
    fewer than its K members."""
    clip: float | None = None
    """τ: the step along direction d is α = μ·min(1, τ/‖d‖) (G eq. 3.7; for the gradient the
    usual clipping), before the OPEN term is added; None or 0: no clipping (M)."""
    direction: Literal["gradient", "simplex", "simplex_switch"] = "gradient"
    """d: the descent direction: ``gradient``; ``simplex``, the normalised temporal gradients
    combined with random convex weights and given the gradient's norm (G eqs. 3.4-3.6); or
    ``simplex_switch``, the gradient when its norm exceeds ``switch_norm``, else the simplex
    direction (G Alg. 3.2)."""
    switch_norm: float | None = None
    """ψ: ``simplex_switch`` takes the gradient when ‖∇L‖ > ψ (G Alg. 3.2); required (> 0)
    with ``simplex_switch``, None otherwise."""
    warm_start: bool = False
    """Continue each length from the weights that solved the previous one; False (M): a
    fresh network, the member's same initial weights, at every length."""
    seed: int = 0
    """Seed of this member's initial weights."""
    data_seed: int = 0
    """Seed of the data streams shared by a pack (see
    :func:`~ortho_core.experiments.synthetic_stage.stream_seed`)."""
    device: str = "cpu"
    """Where to train: ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (CUDA when available)."""
    subnormals: Subnormals = "flush"
    """CPU arithmetic on subnormal numbers (below 1.2e-38 in float32): ``flush`` reads and
    writes them as 0, several times faster where gradients vanish; ``keep`` computes them as
    IEEE 754 does (:mod:`ortho_core.subnormals`). No effect on a GPU."""
    dtype: Literal["float32", "float64"] = "float32"
    """Training precision (data and weights)."""

    def __post_init__(self) -> None:
        task = get_task(self.task)
        one_of(self.variant, VARIANTS, "variant")
        one_of(self.penalty_form, PENALTY_FORMS, "penalty_form")
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
        require(isinstance(self.length_jitter, bool), "length_jitter", "true or false",
                self.length_jitter)
        one_of(self.protocol, ("max_length", "fixed"), "protocol")
        for name in ("pretrain_max_steps", "seq_len_step", "hidden", "batch_size", "max_iters",
                     "eval_every", "val_size"):
            integer_at_least(getattr(self, name), name, 1)
        optional_count(self.screen_size, "screen_size", self.val_size - 1)
        integer_at_least(self.max_seq_len, "max_seq_len",
                 self.seq_len if self.protocol == "max_length" else 1)
        positive(self.error_threshold, "error_threshold")
        one_of(self.success, ("zero_errors", "under_one_percent"), "success")
        if self.patience is not None:
            integer_at_least(self.patience, "patience", 1)
        require(isinstance(self.settle_early, bool), "settle_early", "true or false",
                self.settle_early)
        one_of(self.direction, DIRECTIONS, "direction")
        if self.direction == "simplex_switch":
            require(self.switch_norm is not None, "switch_norm",
                    "a number > 0 with direction simplex_switch", self.switch_norm)
            positive(self.switch_norm, "switch_norm")
        else:
            require(self.switch_norm is None, "switch_norm",
                    "None unless direction is simplex_switch", self.switch_norm)
        if self.clip is not None:
            non_negative(self.clip, "clip")
        require(isinstance(self.warm_start, bool), "warm_start", "true or false",
                self.warm_start)
        seed_value(self.seed, "seed")
        seed_value(self.data_seed, "data_seed")
        check_runtime(self.device, self.subnormals)
        one_of(self.dtype, tuple(DTYPES), "dtype")


PACK_FIELDS: tuple[str, ...] = (
    "task", "seq_len", "seq_len_step", "max_seq_len", "protocol", "hidden", "batch_size",
    "max_iters", "eval_every", "val_size", "error_threshold", "data_seed", "device", "dtype",
    "warm_start", "length_jitter", "screen_size", "subnormals", "settle_early",
)
"""Fields equal across a pack; α, λ, its form, variant, pre-training, init, σ, ρ, τ, the
direction and ψ, the success criterion, the patience and seed may differ."""

ADDED_FIELDS: tuple[str, ...] = (
    "penalty_form", "length_jitter", "success", "patience", "direction", "switch_norm",
    "screen_size", "settle_early",
)
"""Fields added after sweeps of this experiment were first tracked (G's variants, issue 9):
a trial key leaves each out while it holds its default, so that configurations tracked
before them keep their keys and a resumed sweep does not train them again
(:func:`sweeps.spec.trial_key`); ``screen_size`` came with screened validation and
``settle_early`` with the probe that keeps its packs whole (issue 13)."""

def iteration_budget(config: Config) -> int:
    """The most training iterations ``config`` can take, each counted at the cost of one at
    its first length (the probe's, :func:`probe_config`): ``max_iters`` at every length of its
    curriculum (T = ``seq_len``, + ``seq_len_step``, ... up to ``max_seq_len``), one at
    length T costing T / ``seq_len`` of those (the network runs T steps forward and back), or
    ``max_iters`` at its one length under the ``fixed`` protocol. ``pack_size: auto`` weighs a
    trial's fixed costs against it (:mod:`sweeps.pack_size`)."""
    if config.protocol == "fixed":
        return config.max_iters
    lengths = range(config.seq_len, config.max_seq_len + 1, config.seq_len_step)
    return config.max_iters * sum(lengths) // config.seq_len


def planned_steps(config: Config) -> int:
    """The ``step`` of the last report of a member of ``config`` that trains its whole budget:
    ``max_iters`` at every length of its curriculum (T = ``seq_len``, + ``seq_len_step``, ...
    up to ``max_seq_len``), or at its one length under the ``fixed`` protocol. A report's
    ``step`` counts the member's iterations over all the lengths it trained, and every length
    ends with a report at its budget's end, so the last one is their sum. It is the
    denominator of a sweep's progress, and the most a member reaches: one ends before it where
    :func:`ends_early` says so, at a validation that settles a length (``settle_early``) or at
    the first length of the ``max_length`` curriculum that it does not solve (only a member
    that solves every length, each at its last validation, trains the whole curriculum)."""
    if config.protocol == "fixed":
        return config.max_iters
    lengths = range(config.seq_len, config.max_seq_len + 1, config.seq_len_step)
    return config.max_iters * len(lengths)


def ends_early(config: Config) -> bool:
    """Whether a member of a pack of ``config`` can end before its :func:`iteration_budget`
    (its last report before :func:`planned_steps`): it settles a length at a validation
    before the length's last (``settle_early``, with ``eval_every`` below ``max_iters``), or
    the ``max_length`` curriculum stops at the first length it does not solve.
    ``pack_size: auto`` then times a pack as its members ending along the way
    (:func:`sweeps.pack_size.spread_seconds`); a diverged member also ends early, which it
    does not count on."""
    settles = config.settle_early and config.eval_every < config.max_iters
    return settles or (config.protocol == "max_length"
                       and config.max_seq_len >= config.seq_len + config.seq_len_step)


PROBE_ITERS = 100
"""Iterations between the reports of a probe configuration (:func:`probe_config`)."""


def probe_config(config: Config) -> Config:
    """``config`` as ``pack_size: auto`` times it (:mod:`sweeps.pack_size`): the first length
    T = ``seq_len`` alone (``fixed`` protocol), three validations :data:`PROBE_ITERS`
    iterations apart on ``batch_size`` sequences, unscreened, no patience, every member
    training all of them (``settle_early`` off: a member that solves stays in the pack), and
    OINIT's pre-training stopped at once; task, width, batch, direction and dtype, which set
    the cost of an iteration, are kept. A curriculum's later lengths cost more per iteration
    than the first, in proportion for every pack size (:func:`iteration_budget` counts them
    so)."""
    return replace(config, protocol="fixed", max_iters=3 * PROBE_ITERS,
                   eval_every=PROBE_ITERS, val_size=config.batch_size, screen_size=None,
                   patience=None, settle_early=False, pretrain_tol=PROBE_PRETRAIN_TOL)
