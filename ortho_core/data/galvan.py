"""G's variants of the synthetic problems (G App. B) and the per-batch length jitter shared with
M's reference code.

For a sequence of length L (0-based positions, ``randint(a)`` uniform on 0..a-1,
``w = max(1, L // 10)``), every problem below has two channels: channel 0 holds the two
markers (1 at p0 and p1, else 0), channel 1 the values; the target is read at the last step.

- **Marker bands** (G App. B, text): p0 = randint(w) ("the first L/10 positions") and
  p1 = 4L//10 + randint(5L//10 − 4L//10 + 1) (the closed band [4L/10, 5L/10]). G's own code
  (GiulioGx/RNNs, ``MarkerBasedTask``) uses Pascanu's bands instead, p1 = L//10 +
  randint(4L//10); the text is followed here.
- ``adding_galvan``: values U[−1, 1); target (x_i + x_j)/2; a sample is correct when
  |y − target| < ``error_threshold`` (G: 0.04). (G's code draws values in [0, 1).)
- ``multiplication``: values U[0, 1); target x_i·x_j; correct as for ``adding_galvan`` (G says
  only "very similar to the addition problem"; its code counts (y − t)² > 0.04 as wrong).
- ``xor``: binary values in {0, 1}; target 2·(x_i XOR x_j) − 1 ∈ {−1, +1} with a linear
  output and squared error, wrong when y·t ≤ 0 (the sign differs): G's code, the text gives
  neither target coding nor error.
- ``temporal_order_galvan``: G's temporal order (G §3.1, App. B: noise symbols a..d, two
  special symbols x/y, four classes) with the bands of G's code, p0 = randint(w),
  p1 = L//10 + randint(4L//10) (the text gives no bands). ``temporal_order`` and
  ``temporal_order_3bit`` of :mod:`ortho_core.data.synthetic` are the same problems with two
  and three special symbols and Pascanu's bands (M); G's code has no three-symbol generator.

**Length jitter** (:func:`draw_length`): G draws each batch's length L "between T and
T + T/10" (App. B); both G's code and M's (Pascanu's ``AddTask``) draw L = T + randint(T//10),
i.e. L ∈ [T, 1.1T) (half-open; no jitter for T < 10). One option covers both with that
half-open convention.
"""

from __future__ import annotations

import torch
from torch import Tensor


def draw_length(seq_len: int, generator: torch.Generator) -> int:
    """One batch's length L = T + randint(max(1, T // 10)) ∈ [T, 1.1T) (G App. B; M's code)."""
    return seq_len + int(torch.randint(0, max(1, seq_len // 10), (1,), generator=generator))


def galvan_markers(batch: int, length: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """The marker positions (p0, p1), each (B,), in G's text's bands (G App. B)."""
    w = max(1, length // 10)
    low, high = 4 * length // 10, 5 * length // 10
    p0 = torch.randint(0, w, (batch,), generator=gen)
    p1 = low + torch.randint(0, high - low + 1, (batch,), generator=gen)
    return p0, p1


def _two_markers(values: Tensor, p0: Tensor, p1: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Set channel 0 to the markers at (p0, p1) in place; the marked values (x_i, x_j)."""
    rows = torch.arange(values.shape[0])
    values[:, :, 0] = 0.0
    values[rows, p0, 0] = 1.0
    values[rows, p1, 0] = 1.0
    return values, values[rows, p0, 1], values[rows, p1, 1]


def sample_adding_galvan(batch: int, length: int,
                         gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """G's adding problem: values U[−1, 1), target (x_i + x_j)/2, shape (B, 1)."""
    values = torch.rand((batch, length, 2), generator=gen) * 2 - 1
    values, a, b = _two_markers(values, *galvan_markers(batch, length, gen))
    return values, ((a + b) / 2).unsqueeze(1)


def sample_multiplication(batch: int, length: int,
                          gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """G's multiplication problem: values U[0, 1), target x_i·x_j, shape (B, 1)."""
    values = torch.rand((batch, length, 2), generator=gen)
    values, a, b = _two_markers(values, *galvan_markers(batch, length, gen))
    return values, (a * b).unsqueeze(1)


def sample_xor(batch: int, length: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """G's XOR problem: binary values, target 2·(x_i XOR x_j) − 1, shape (B, 1)."""
    values = torch.randint(0, 2, (batch, length, 2), generator=gen).float()
    values, a, b = _two_markers(values, *galvan_markers(batch, length, gen))
    return values, (2 * (a != b).float() - 1).unsqueeze(1)


def sample_temporal_order_galvan(batch: int, length: int,
                                 gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """G's temporal order with the bands of G's code: noise symbols 2..5, symbol v0 ∈ {0, 1} at
    p0 = randint(w), v1 at p1 = L//10 + randint(4L//10); class v0 + 2·v1."""
    w = max(1, length // 10)
    symbols = torch.randint(2, 6, (batch, length), generator=gen)
    rows = torch.arange(batch)
    p0 = torch.randint(0, w, (batch,), generator=gen)
    p1 = w + torch.randint(0, max(1, 4 * length // 10), (batch,), generator=gen)
    v0 = torch.randint(0, 2, (batch,), generator=gen)
    v1 = torch.randint(0, 2, (batch,), generator=gen)
    symbols[rows, p0] = v0
    symbols[rows, p1] = v1
    return symbols, v0 + 2 * v1
