"""The two-dimensional two-class data sets of N §6.1 (Fig. 1) and §6.2 (Fig. 3).

N shows its sets only as pictures, so they are defined here (and in the header of
``sweeps/specs/deep-orthogonal.yaml``):

- ``two_class`` (N-F1): two interleaved half-moons, n/2 points each. Class 0: (cos t, sin t),
  class 1: (1 − cos t, ½ − sin t), t ~ U(0, π); every point shifted by (−½, −¼) (centred)
  and given Gaussian noise of standard deviation ``noise`` (default 0.1) per coordinate.
  No line separates them (the best linear classifier errs on about 12 % of points).
- ``spiral`` (N-F3): two interleaved spiral arms, n/2 points each: r = s, θ = 3π·s + cπ for
  class c, s ~ U(0.1, 1), the point r(cos θ, sin θ) plus Gaussian noise of standard deviation
  ``noise`` (default 0.02); one and a half turns per arm.

Points are float64 (cast by the caller), labels int64; both come from ``generator`` alone.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

PLANAR = ("two_class", "spiral")
"""The planar set names (the ``dataset`` values besides ``mnist``)."""

DEFAULT_NOISE = {"two_class": 0.1, "spiral": 0.02}
"""Noise of each set when the configuration leaves it unset."""


def _labels(n: int) -> Tensor:
    return torch.cat([torch.zeros(n // 2, dtype=torch.long),
                      torch.ones(n - n // 2, dtype=torch.long)])


def two_class(n: int, noise: float, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """N-F1's set: ``n`` points (n, 2) and labels (n,), two interleaved half-moons."""
    y = _labels(n)
    t = torch.rand(n, generator=generator, dtype=torch.float64) * math.pi
    upper = torch.stack([torch.cos(t), torch.sin(t)], dim=1)
    lower = torch.stack([1.0 - torch.cos(t), 0.5 - torch.sin(t)], dim=1)
    x = torch.where((y == 0).unsqueeze(1), upper, lower) - torch.tensor([0.5, 0.25],
                                                                       dtype=torch.float64)
    return x + noise * torch.randn(n, 2, generator=generator, dtype=torch.float64), y


def spiral(n: int, noise: float, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """N-F3's set: ``n`` points (n, 2) and labels (n,), two spiral arms."""
    y = _labels(n)
    s = 0.1 + 0.9 * torch.rand(n, generator=generator, dtype=torch.float64)
    theta = 3.0 * math.pi * s + math.pi * y.double()
    x = s.unsqueeze(1) * torch.stack([torch.cos(theta), torch.sin(theta)], dim=1)
    return x + noise * torch.randn(n, 2, generator=generator, dtype=torch.float64), y


def planar(name: str, n: int, noise: float | None,
           generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Set ``name`` (one of :data:`PLANAR`) with ``n`` points; ``noise`` None: the default."""
    make = two_class if name == "two_class" else spiral
    return make(n, DEFAULT_NOISE[name] if noise is None else noise, generator)
