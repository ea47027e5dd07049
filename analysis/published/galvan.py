"""Paper G (Galvan's thesis: SGD for RNNs, spectral initialisation, simplex directions): the
published values the reports set beside the measured ones, as the thesis prints them.

- :data:`SYNTHETIC_PROTOCOL`: §4.1, the settings of every synthetic experiment.
- :data:`FIG_3_1`: Fig. 3.1, temporal-gradient norms at initialisation against ρ (qualitative).
- :data:`FIG_4_1`: Fig. 4.1, success rate on temporal order against T (qualitative).
- :data:`TABLE_4_1` and :data:`FIG_4_2_ORDER`: Table 4.1 and Fig. 4.2, iterations to converge
  on the adding problem per descent direction.
- :data:`TABLE_4_2`, :data:`TABLE_4_3` and :data:`MUSIC_PROTOCOL`: Tables 4.2 and 4.3 and §4.2,
  polyphonic music (MuseData).

Pure data: no imports beyond the standard library, so tests and reports share one source.
"""

from __future__ import annotations

from dataclasses import dataclass

SYNTHETIC_PROTOCOL: dict[str, float] = {"hidden": 50, "lr": 1e-3, "clip": 1.0,
                                        "batch_size": 100, "spectral_radius": 1.2,
                                        "val_size": 10_000, "success_error": 0.01,
                                        "patience_iters": 3_000_000}
"""G §4.1, config key -> value: 50 hidden units, μ = 10⁻³, τ = 1, batch 100, ρ = 1.2; a run
succeeds when the error on 10⁴ validation samples (drawn once, of different lengths) is below
1 % and fails when the loss has not decreased for 3·10⁶ iterations."""


@dataclass(frozen=True)
class TemporalGradientProfile:
    """G Fig. 3.1: what the temporal-gradient norms look like at initialisation for one ρ."""

    spectral_radius: float
    """ρ the recurrent matrix was rescaled to (G Alg. 3.1)."""
    vanishing: bool | None
    """True: recent steps' components are exponentially larger than distant ones (decay on
    the log axis); False: all steps have roughly the same norm (a flat profile); None: the
    thesis says neither."""


FIG_3_1: tuple[TemporalGradientProfile, ...] = (
    TemporalGradientProfile(0.8, True),
    TemporalGradientProfile(0.9, True),
    TemporalGradientProfile(1.0, None),
    TemporalGradientProfile(1.1, False),
    TemporalGradientProfile(1.2, False),
)
"""G Fig. 3.1 (temporal order, 100 samples, gradients w.r.t. all variables): ρ < 1 are
"perfect examples of vanishing gradient"; for ρ larger than one "the temporal components
have roughly the same norm". The thesis does not describe ρ = 1 in words, so no claim is
recorded for it."""

FIG_3_1_TASK = "temporal_order"
"""The problem of G Fig. 3.1."""
FIG_3_1_SAMPLES = 100
"""Samples the temporal gradients of G Fig. 3.1 are computed on."""


@dataclass(frozen=True)
class SuccessClaim:
    """G Fig. 4.1 / §4.1.1: the longest temporal-order length solved by one initialisation."""

    init: str
    """``gaussian`` (plain N(0, σ²)) or ``spectral`` (W_hh rescaled to ρ > 1)."""
    spectral_radius: float | None
    """ρ of the spectral initialisation (None: not rescaled)."""
    max_solved_len: int
    """The longest T with success: the plain scheme "failed for sequences longer than 20",
    the spectral one "managed to succeed up to sequences of length 150"."""


FIG_4_1: dict[str, SuccessClaim] = {
    "gaussian": SuccessClaim("gaussian", None, 20),
    "spectral": SuccessClaim("spectral", 1.2, 150),
}
"""G Fig. 4.1: rate of success (mean of 5 runs) on temporal order with SGD and gradient
clipping (SGD-C), against the minimal sequence length T."""

FIG_4_1_RUNS = 5
"""Runs per point of G Fig. 4.1."""

TABLE_4_1: dict[str, int] = {"gradient": 1_807_466, "simplex": 2_338_500,
                             "simplex_switch": 1_630_666}
"""G Table 4.1: descent direction -> iterations until convergence on the adding problem
(T = 100), mean of 3 runs (anti-gradient, simplex, simplex with conditional switching)."""

TABLE_4_1_SEQ_LEN = 100
"""T of G Table 4.1 and Fig. 4.2."""
TABLE_4_1_RUNS = 3
"""Runs averaged in G Table 4.1."""
TABLE_4_1_SWITCH_NORM = 5.0
"""ψ of the switching variant in G's code (``AlternatingDirections``: the gradient when its norm
exceeds 5); the thesis gives no value."""

FIG_4_2_ORDER: tuple[str, ...] = ("simplex_switch", "simplex", "gradient")
"""G Fig. 4.2: the directions in the order they converge on adding (T = 100): the simplex
with conditional switching first, the simplex second, the anti-gradient last; the simplex
helps most early in training, where the gradient vanishes."""


@dataclass(frozen=True)
class PublishedNLL:
    """One row of G Table 4.2: NLL per time step on MuseData."""

    test: float
    """Test NLL per time step."""
    train: float
    """Train NLL per time step."""


TABLE_4_2: dict[int, PublishedNLL] = {
    50: PublishedNLL(6.44, 6.20),
    100: PublishedNLL(6.53, 6.10),
    200: PublishedNLL(6.58, 6.03),
    300: PublishedNLL(6.82, 6.21),
}
"""G Table 4.2: hidden units -> loss ("negative log-likelihood per time step") on the test
and train sets of MuseData. G does not say whether the NLL of a set averages per song
(eq. 4.2) or pools the frames; both are measured here."""

TABLE_4_3: dict[str, PublishedNLL] = {
    "state_of_art": PublishedNLL(5.60, 5.20),
    "state_of_art_rnn": PublishedNLL(6.97, 6.43),
    "ours": PublishedNLL(6.44, 6.20),
}
"""G Table 4.3: MuseData NLL per time step of the state of the art, of the state of the art
with a vanilla RNN (the references G takes from Boulanger-Lewandowski et al., ICML 2012, his
[5], in their frame-pooled convention), and of G's best RNN (50 hidden units)."""

TABLE_4_3_LABELS: dict[str, str] = {"state_of_art": "state of the art",
                                    "state_of_art_rnn": "state of the art (RNN)",
                                    "ours": "G's RNN (50 hidden)"}
"""How G Table 4.3 names its columns."""

MUSIC_DATASET = "musedata"
"""The dataset of G Tables 4.2-4.3 (the other three sets are not in the thesis)."""

MUSIC_PROTOCOL: dict[str, float] = {"lr": 1e-3, "clip": 3.0, "max_len": 300}
"""G §4.2, config key -> value: SGD with μ = 10⁻³, clipping threshold 3, songs cut at 300
steps (to flag a reduced profile)."""
