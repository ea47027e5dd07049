"""The four reproduced works and the specs that reproduce each (EXPERIMENTS.md: every spec
in ``sweeps/specs`` belongs to one paper; its header names the tables and figures), for
``ortho reproduce PAPER``. The published values themselves are in :mod:`analysis.published`,
one module per paper, named like the paper here.

Pure data: no imports beyond the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Paper:
    """One reproduced work."""

    key: str
    """Its name on the command line (``ortho reproduce KEY``), also its published-values
    module (``analysis.published.KEY``)."""
    title: str
    """Authors and title, as the report's heading."""
    specs: tuple[str, ...]
    """The specs reproducing it, in the paper's order."""


PAPERS: dict[str, Paper] = {p.key: p for p in (
    Paper("manchev", "Manchev & Spratling — On the biological plausibility of orthogonal "
          "initialisation for solving gradient instability in deep neural networks",
          ("orth-pretrain-convergence", "synthetic-max-length", "pixel-mnist", "ff-mnist")),
    Paper("galvan", "Galvan — Optimization methods for Recurrent Neural Networks "
          "training (thesis, Università degli Studi di Firenze, 2015)",
          ("spectral-temporal-gradients", "spectral-init-success", "simplex-direction",
           "polyphonic-music")),
    Paper("kutsuna", "Kutsuna — Linearly constrained weights: resolving the vanishing "
          "gradient problem by reducing angle bias", ("lcw-deep-mlp",)),
    Paper("nosarzewski", "Nosarzewski — Deep Orthogonal Neural Networks (2018)",
          ("deep-orthogonal",)),
)}
"""Paper key -> :class:`Paper`, in the README's order."""

ALL = "all"
"""``ortho reproduce all``: every paper, one page each, and an index page."""

DEFAULT_OUT = Path("reports")
"""Where ``ortho reproduce`` writes its pages unless ``--out`` says otherwise."""

PROFILES = ("smoke", "cpu", "paper")
"""The profiles every shipped spec defines (EXPERIMENTS.md)."""
