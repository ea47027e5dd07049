"""Paper M (Manchev & Spratling, learned orthogonality): the published values the reports set
beside the measured ones, as the paper prints them.

- :data:`PRETRAIN`: §II-A, convergence of orthogonal pre-training of a 100 × 100 matrix.
- :data:`TABLE_I` and :data:`PAPER_PROTOCOL`: Table I and §III-A, the maximal sequence length
  T each SRNN solves; :data:`FIG2_T`: the T of Fig. 2.
- :data:`TABLE_II`, :data:`PIXEL_PAPER_PROTOCOL`, :data:`FIG3B_SAMPLES` and
  :data:`FIG3B_LEARNING_STARTS`: Table II, §III-B and Fig. 3b, pixel-by-pixel MNIST.
- :data:`TABLE_III`, :data:`TABLE_IV`, :data:`TABLE_IV_PENALTY` and
  :data:`FF_PAPER_PROTOCOL`: Tables III and IV and §III-C, the deep feedforward nets on MNIST.

Pure data: no imports beyond the standard library, so tests and reports share one source.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PublishedPretrain:
    """M §II-A: convergence of orthogonal pre-training of a 100×100 matrix."""

    success_rate: float
    """Fraction of repeats that reached Eᵖ < 10⁻⁶."""
    mean_steps: float
    """Mean number of pre-training steps (αₚ = 0.1), as M's code prints them."""
    repeats: int
    """Number of repeats."""


PRETRAIN: dict[str, PublishedPretrain] = {
    "normal": PublishedPretrain(1.0, 22.77, 10_000),
    "uniform": PublishedPretrain(1.0, 24.00, 10_000),
}
"""M §II-A: distribution of the initial matrix (N(0, 0.1²), U(−0.1, 0.1)) -> published
result."""


@dataclass(frozen=True)
class PublishedMaxLength:
    """One cell of M Table I."""

    max_len: int
    """Maximal T solved."""
    lr: float
    """α that reached it."""
    penalty: float | None = None
    """λ (SRNN+OPEN only)."""


TABLE_I: dict[tuple[str, str], PublishedMaxLength] = {
    ("temporal_order", "plain"): PublishedMaxLength(50, 0.01),
    ("temporal_order", "open"): PublishedMaxLength(80, 0.001, 1.0),
    ("temporal_order", "oinit"): PublishedMaxLength(120, 0.0001),
    ("temporal_order_3bit", "plain"): PublishedMaxLength(50, 0.1),
    ("temporal_order_3bit", "open"): PublishedMaxLength(70, 0.001, 1.0),
    ("temporal_order_3bit", "oinit"): PublishedMaxLength(90, 0.0001),
    ("adding", "plain"): PublishedMaxLength(80, 0.01),
    ("adding", "open"): PublishedMaxLength(80, 0.01, 0.0001),
    ("adding", "oinit"): PublishedMaxLength(100, 0.01),
    ("permutation", "plain"): PublishedMaxLength(90, 0.0001),
    ("permutation", "open"): PublishedMaxLength(140, 0.1, 0.01),
    ("permutation", "oinit"): PublishedMaxLength(240, 0.1),
}
"""M Table I: (task, variant) -> published maximal T and parameters."""

PAPER_PROTOCOL: dict[str, int] = {"hidden": 100, "batch_size": 20, "max_iters": 100_000,
                                  "eval_every": 100, "val_size": 10_000, "seq_len": 10,
                                  "seq_len_step": 10}
"""M §III-A's protocol for Table I, config key -> value (to flag a reduced profile)."""

FIG2_T = 60
"""The sequence length of M Fig. 2 (temporal order problem)."""


@dataclass(frozen=True)
class PublishedAccuracy:
    """One row of M Table III."""

    accuracy: float
    """Best test accuracy, in %."""
    lr: float | None = None
    """α that reached it (None: the paper lists no parameters)."""
    penalty: float | None = None
    """λ (FF+OPEN only)."""


TABLE_III: dict[str, PublishedAccuracy] = {
    "plain": PublishedAccuracy(11.35),
    "open": PublishedAccuracy(97.03, 0.01, 0.01),
    "oinit": PublishedAccuracy(96.77, 0.01),
}
"""M Table III: variant -> published best accuracy and parameters (FF: no α left the
majority-class accuracy of the 10,000 MNIST test images)."""

TABLE_IV: dict[float, float] = {1e-1: 91.40, 1e-2: 91.65, 1e-3: 90.66, 1e-4: 88.80, 1e-5: 72.81}
"""M Table IV: FF+OPEN with λ = 1, α -> published accuracy (%)."""

TABLE_IV_PENALTY = 1.0
"""λ of M Table IV."""

FF_PAPER_PROTOCOL: dict[str, float] = {"layers": 11, "hidden": 100, "init_std": 0.001,
                                       "batch_size": 20, "epochs": 100}
"""The protocol of the runs behind M Tables III and IV, config key -> value (to flag a reduced
profile): M §III-C's, but with the 11 hidden layers that M's code (FF_MNIST.py) builds with
its ``--layers 10``, the text's "10 hidden layers"."""


@dataclass(frozen=True)
class PublishedPixel:
    """One row of M Table II."""

    accuracy: float
    """Best test accuracy, in %."""
    lr: float | None = None
    """α that reached it (None: the paper lists no parameters)."""
    init_std: float | None = None
    """σ of the initial weights."""
    penalty: float | None = None
    """λ (SRNN+OPEN only)."""


TABLE_II: dict[str, PublishedPixel] = {
    "plain": PublishedPixel(11.35),
    "oinit": PublishedPixel(86.81, 1e-5, 0.01),
    "open": PublishedPixel(91.81, 1e-4, 0.001, 0.1),
}
"""M Table II (pixel-by-pixel MNIST, T = 784): variant -> published best accuracy and
parameters (SRNN: no α of the grid left the majority-class accuracy, 11.35 %)."""

PIXEL_PAPER_PROTOCOL: dict[str, float] = {"hidden": 100, "batch_size": 16,
                                          "max_iters": 1_000_000, "eval_every": 1000}
"""The protocol of Table II, config key -> value (to flag a reduced profile): M §III-B's
sizes and iterations; the evaluation interval, which the text does not give, from M's code
(``SRNN_MNIST.py``: ``--chk`` 16,000 samples, 1,000 iterations of batch 16)."""

FIG3B_SAMPLES = 150_000
"""M Fig. 3b shows the first 150,000 training samples of the SRNN+OINIT run."""

FIG3B_LEARNING_STARTS = 60_000
"""M §III-B: the SRNN+OINIT network leaves the vanishing-gradient regime, and its test error
starts to fall, after about 60,000 samples."""
