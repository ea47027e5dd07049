"""Paper K (Kutsuna, linearly constrained weights): what the paper states, for the
``lcw-deep-mlp`` report.

- :data:`PUBLISHED`: §5 and Fig. 12, per network and model, in words (K gives curves, not a
  table of numbers); :data:`LCW_OVERHEAD`: §5.1's time overhead of MLP_LCW(100, 128).
- :data:`FIG12_SHAPES`, :data:`FIG13_SHAPE`, :data:`FIG2_SHAPES`: the networks of Fig. 12,
  Fig. 13 and Figs. 2-11; :data:`EPOCHS`: the training length of §5.

Pure data: no imports beyond the standard library, so tests and reports share one source.
"""

from __future__ import annotations

Shape = tuple[str, int, int]
"""(activation, layers L, hidden M)."""

PUBLISHED: dict[tuple[str, int, int, str], str] = {
    ("sigmoid", 100, 128, "plain"): "10 % training accuracy throughout",
    ("sigmoid", 100, 128, "lcw"): "trains, faster than BN; time ≈ +55 %",
    ("sigmoid", 100, 128, "bn"): "trains; time above LCW's",
    ("sigmoid", 100, 128, "wn"): "does not train",
    ("sigmoid", 50, 256, "lcw"): "trains, faster than BN",
    ("sigmoid", 50, 256, "bn"): "trains",
    ("sigmoid", 50, 256, "wn"): "does not train",
    ("sigmoid", 5, 512, "lcw"): "trains, faster than BN",
    ("sigmoid", 5, 512, "bn"): "trains",
    ("relu", 20, 256, "plain"): "trains",
    ("relu", 20, 256, "lcw"): "explodes after a few updates",
}
"""What K §5 states (CIFAR-10, Fig. 12 and §5.2) per (activation, L, M, variant)."""

LCW_OVERHEAD = 0.55
"""K §5.1: MLP_LCW(100, 128) takes about 55 % more time than the plain MLP(100, 128)."""

EPOCHS = 100
"""K §5: training epochs of Fig. 12."""

FIG12_SHAPES: tuple[Shape, ...] = (("sigmoid", 100, 128), ("sigmoid", 50, 256),
                                   ("sigmoid", 5, 512))
"""K Fig. 12's networks."""

FIG13_SHAPE: Shape = ("relu", 20, 256)
"""K Fig. 13's network."""

FIG2_SHAPES: tuple[Shape, ...] = (("sigmoid", 10, 128), ("relu", 50, 128))
"""K Figs. 2-11's networks."""
