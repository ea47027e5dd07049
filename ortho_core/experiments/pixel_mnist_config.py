"""The configuration of experiment ``pixel-mnist`` (M §III-B, Table II, Fig. 3b): one field per
key, with the paper's value, the authors' code's where it differs, and the choice made."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from ortho_core.config import (
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
from ortho_core.data.mnist import N_PIXELS, PREPROCESSINGS
from ortho_core.devices import DTYPES, check_runtime
from ortho_core.experiments import PROBE_PRETRAIN_TOL
from ortho_core.penalty import PENALTY_FORMS
from ortho_core.subnormals import Subnormals

VARIANTS = ("plain", "open", "oinit")
"""M Table II's networks: SRNN, SRNN+OPEN, SRNN+OINIT."""
OPTIMIZERS = ("rmsprop", "sgd")
"""How the gradient becomes a step (:mod:`ortho_core.optim`)."""
PERMUTATIONS = ("none", "fixed")
"""The order pixels are fed in: raster order, or one fixed permutation (permuted MNIST)."""


@dataclass
class Config:
    """One configuration of M's pixel-by-pixel MNIST (M §III-B, Table II, Fig. 3b)."""

    variant: Literal["plain", "open", "oinit"] = "oinit"
    """The network: ``plain`` (SRNN), ``open`` (SRNN+OPEN: the W_hh update gains the gradient
    of λ·Eᵖ(W_hh), M eq. 31) or ``oinit`` (SRNN+OINIT: weights pre-trained to
    (semi-)orthogonality before training, M eq. 18)."""
    lr: float = 1e-5
    """α (M's grid 10⁻³…10⁻⁷; Table II: 10⁻⁵ for OINIT, 10⁻⁴ for OPEN)."""
    penalty: float = 0.0
    """λ: > 0 with ``open``, 0 with the other variants (M's grid 1, 0.1, 0.01; Table II:
    0.1)."""
    penalty_form: Literal["squared", "unsquared"] = "unsquared"
    """``unsquared``: the gradient of λ‖W_hhW_hhᵀ − I‖_F, what M's code (``SRNN_MNIST.py``)
    adds and the published λ were tuned with (the default here); ``squared``: of λ‖·‖²_F,
    M eq. 31."""
    init_std: float = 0.01
    """σ: every weight matrix starts from N(0, σ²), biases at 0 (M's grid 0.001, 0.01, 0.1;
    Table II: 0.01 for OINIT, 0.001 for OPEN)."""
    pretrain_lr: float = 0.1
    """αₚ of ``oinit``'s pre-training (M: 0.1)."""
    pretrain_tol: float = 1e-6
    """Pre-training stops once Eᵖ < this, per matrix (M: 10⁻⁶)."""
    pretrain_max_steps: int = 10_000
    """Pre-training steps after which ``oinit`` gives up with an error. M's code
    (``rand_ortho``) evaluates Eᵖ at most 100 times, i.e. 99 updates, then fails an assert;
    at αₚ = 0.1 and tol 10⁻⁶ that cap does not bind on M's σ grid (500 draws each: a
    100 × 100 W_hh takes 22, 28 and 35 updates on average and at most 47, 43 and 58 at
    σ = 0.1, 0.01 and 0.001; W_xh and W_hy at most 21), so every matrix comes out as under
    M's cap. The limit is the one the other experiments use (synthetic, ff-mnist); it only
    decides when a pre-training that cannot converge (too large an αₚ) is reported as an
    error."""
    pretrain_weights: Literal["recurrent", "all"] = "all"
    """Which matrices ``oinit`` pre-trains: ``all`` (W_xh, W_hh, W_hy, M's code and M's
    "layer-wise orthogonal initialisation") or ``recurrent`` (W_hh only)."""
    optimizer: Literal["rmsprop", "sgd"] = "rmsprop"
    """``rmsprop``: M's code's default optimiser for this task (Lasagne's RMSProp, ρ = 0.9,
    ε = 10⁻⁶), with which its α grid (down to 10⁻⁷) makes sense; the paper names only α.
    ``sgd``: plain SGD, as M's other experiments."""
    rmsprop_rho: float = 0.9
    """ρ, RMSProp's decay of the squared-gradient average (Lasagne's default, M's code)."""
    rmsprop_eps: float = 1e-6
    """ε, under RMSProp's square root (Lasagne's default, M's code)."""
    hidden: int = 100
    """Recurrent units (M: 100)."""
    seq_len: int = N_PIXELS
    """T: one step per pixel; only 784 is pixel-by-pixel MNIST (M: T = 784)."""
    batch_size: int = 16
    """Minibatch size (M: 16)."""
    max_iters: int = 1_000_000
    """Training iterations (M: 10⁶, i.e. 16·10⁶ samples)."""
    eval_every: int = 1000
    """Iterations between evaluations on the test set (M's code: every 16,000 samples, i.e.
    1000 iterations of 16); also evaluated before the first iteration and after the last."""
    test_size: int | None = None
    """Evaluate on a random subset of this many test images (drawn with ``data_seed``); None:
    all 10,000 (M's protocol, majority-class baseline 11.35 %)."""
    learned_margin: float = 0.1
    """A member ``solved`` the task (learned: left the baseline) once its test accuracy after
    some training exceeds the majority-class fraction of the test set by this much (an
    untrained network scores at chance, about 10 %, give or take a few points). A solved
    member trains on to its budget, as M's accuracy curves do."""
    preprocessing: Literal["unit", "standardise"] = "standardise"
    """``standardise``: every pixel at zero mean and unit variance over its split, as M's code
    feeds MNIST; ``unit``: value / 255 (:mod:`ortho_core.data.mnist`)."""
    permute: Literal["none", "fixed"] = "none"
    """``none``: pixels in raster order (M); ``fixed``: permuted MNIST, one permutation drawn
    from ``data_seed`` and applied to every image, kept as the run's ``permutation`` artifact."""
    data_dir: str | None = None
    """Directory holding ``mnist/``; None: ``$ORTHO_DATA_DIR``, else
    ``~/.cache/ortho-sweeps/data``."""
    seed: int = 0
    """Seed of this member's initial weights."""
    data_seed: int = 0
    """Seed of the test subset and of the permutation, shared by a pack. Training batches
    follow the training set's order, epoch after epoch, as M's code feeds them."""
    device: str = "cpu"
    """``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (CUDA when available)."""
    subnormals: Subnormals = "flush"
    """CPU arithmetic on subnormal numbers (below 1.2e-38 in float32): ``flush`` reads and
    writes them as 0, several times faster where gradients vanish; ``keep`` computes them as
    IEEE 754 does (:mod:`ortho_core.subnormals`). No effect on a GPU."""
    dtype: Literal["float32", "float64"] = "float32"
    """Floating-point type of the weights and the computation."""

    def __post_init__(self) -> None:
        seed_value(self.seed, "seed")
        seed_value(self.data_seed, "data_seed")
        one_of(self.variant, VARIANTS, "variant")
        one_of(self.optimizer, OPTIMIZERS, "optimizer")
        one_of(self.penalty_form, PENALTY_FORMS, "penalty_form")
        one_of(self.pretrain_weights, ("recurrent", "all"), "pretrain_weights")
        one_of(self.preprocessing, PREPROCESSINGS, "preprocessing")
        one_of(self.permute, PERMUTATIONS, "permute")
        one_of(self.dtype, tuple(DTYPES), "dtype")
        require(self.seq_len == N_PIXELS, "seq_len",
                f"{N_PIXELS} (one step per pixel of a 28 × 28 image)", self.seq_len)
        for name in ("hidden", "batch_size", "max_iters", "eval_every", "pretrain_max_steps"):
            integer_at_least(getattr(self, name), name, 1)
        for name in ("lr", "init_std", "pretrain_lr", "pretrain_tol", "rmsprop_eps"):
            positive(getattr(self, name), name)
        non_negative(self.penalty, "penalty")
        if self.variant == "open":
            require(self.penalty > 0, "penalty", "a number > 0 with variant open", self.penalty)
        else:
            require(self.penalty == 0, "penalty", "0 unless variant is open", self.penalty)
        fraction(self.rmsprop_rho, "rmsprop_rho")
        fraction(self.learned_margin, "learned_margin")
        optional_count(self.test_size, "test_size", DATASETS["mnist"].n_test)
        check_runtime(self.device, self.subnormals)


PACK_FIELDS: tuple[str, ...] = (
    "optimizer", "rmsprop_rho", "rmsprop_eps", "pretrain_max_steps", "hidden", "seq_len",
    "batch_size", "max_iters", "eval_every", "test_size", "preprocessing", "permute",
    "data_dir", "data_seed", "device", "subnormals", "dtype",
)
"""Fields equal across a pack; the variant, α, λ and its form, σ, αₚ, the tolerance, which
weights are pre-trained, the margin and the seed may differ per member."""

def iteration_budget(config: Config) -> int:
    """The most training iterations ``config`` can take (``max_iters``), against which
    ``pack_size: auto`` weighs a pack's set-up (:mod:`sweeps.pack_size`)."""
    return config.max_iters


def planned_steps(config: Config) -> int:
    """The ``step`` (training iterations) of the last report of a member that trains its
    whole budget: ``max_iters``, which is always evaluated whether or not ``eval_every``
    divides it (the evaluation before training is step 0). Learning (leaving the baseline)
    does not stop training, so only a diverging member ends before it."""
    return config.max_iters


PROBE_ITERS = 5
"""Iterations between the reports of a probe configuration (:func:`probe_config`)."""


def probe_config(config: Config) -> Config:
    """``config`` as ``pack_size: auto`` times it (:mod:`sweeps.pack_size`): evaluations
    before training and after every :data:`PROBE_ITERS` iterations up to three times that (the
    probe times from the first evaluation after training began), on ``batch_size`` test
    images, and OINIT's pre-training stopped at once; width, batch, optimiser and dtype, which
    set the cost of an iteration, are kept."""
    return replace(config, max_iters=3 * PROBE_ITERS, eval_every=PROBE_ITERS,
                   test_size=config.batch_size, pretrain_tol=PROBE_PRETRAIN_TOL)
