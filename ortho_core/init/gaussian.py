"""Gaussian initial weights W ~ N(0, σ²): M's pixel-MNIST and feedforward nets (M §III-B/C) and
the first step of G's spectral initialisation (G Alg. 3.1, line 1)."""

from __future__ import annotations

import torch
from torch import Tensor


def gaussian(shape: tuple[int, ...], std: float, generator: torch.Generator) -> Tensor:
    """A tensor of ``shape`` drawn from N(0, ``std``²) by ``generator`` (on its device) in
    float64, so that casting it gives the same numbers at every precision."""
    z = torch.randn(shape, generator=generator, dtype=torch.float64, device=generator.device)
    return z.mul_(std)
