"""Glorot & Bengio's "normalised initialisation", the default of M's networks (M §III).

Each weight is drawn from U(−r, r) with r = √(6 / (fan_in + fan_out)), so that its variance is
r²/3 = 2 / (fan_in + fan_out): the compromise between keeping forward activations and backward
gradients at unit scale (Glorot & Bengio 2010, eq. 16).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def normalised(
    shape: tuple[int, ...], generator: torch.Generator, dtype: torch.dtype = torch.float64
) -> Tensor:
    """A weight matrix of ``shape`` = (..., fan_out, fan_in) drawn from U(−r, r).

    ``r = sqrt(6 / (fan_in + fan_out))``; leading dimensions, if any, are independent draws of
    the same layer. The values come from ``generator`` (on its device) in ``dtype``; draw in
    float64 and cast afterwards when the same numbers are wanted at several precisions.
    """
    if len(shape) < 2:
        raise ValueError(f"normalised: shape must be (..., fan_out, fan_in), got {shape}")
    fan_out, fan_in = shape[-2], shape[-1]
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    u = torch.rand(shape, generator=generator, dtype=dtype, device=generator.device)
    return u.mul_(2.0 * bound).sub_(bound)
