"""The pathological synthetic sequence problems of M §III-A (Hochreiter & Schmidhuber, 1997),
generated the way Pascanu et al.'s ``trainingRNNs`` generators (used by M's code) do.

Every problem reads its target at the last step only. For a sequence of length L (0-based
positions, ``randint(a)`` uniform on 0..a-1, ``w = max(1, L // 10)``):

=====================  ====  ====  =====  ====================================================
problem                in    out   loss   generator
=====================  ====  ====  =====  ====================================================
temporal_order         6     4     ce     symbols 2..5 are noise; p0 = L//10 + randint(w) and
                                          p1 = L//2 + randint(w) carry v0, v1 in {0, 1};
                                          class = v0 + 2·v1
temporal_order_3bit    6     8     ce     markers at L//10, 3L//10, 6L//10 (+ randint(w) each);
                                          class = v0 + 2·v1 + 4·v2
adding                 2     1     mse    channel 1 ~ U[0, 1); channel 0 is 1 at p0 = randint(w)
                                          and p1 = w + randint(max(1, 4L//10)), else 0;
                                          target = mean of the two marked values
permutation            100   100   ce     symbols 2..99 are noise; the first symbol is v in
                                          {0, 1}; the target is v (the symbol after the last)
=====================  ====  ====  =====  ====================================================

G's variants (G App. B: ``adding_galvan``, ``multiplication``, ``xor``,
``temporal_order_galvan``) and the per-batch length jitter are in :mod:`ortho_core.data.galvan`
and registered here.

For L >= 10 the bands are exactly the catalogue's; ``w = max(1, ·)`` only keeps the bands
non-empty for the short sequences the tests use. Choices where the sources differ:

- Pascanu's ``AddTask`` lengthens each batch by ``randint(L // 10)`` steps; a sampler here
  draws exactly L steps (the catalogue's definition), and the trainer's ``length_jitter``
  draws L per batch (:func:`ortho_core.data.galvan.draw_length`).
- The error of the adding problem is ``(y - t)² > error_threshold`` with the default 0.04 of
  M's reference code; M's text quotes ``|y - t| < 0.0001``, i.e. ``error_threshold = 1e-8``.

A batch is drawn in two steps so that large validation sets stay small in memory:
:meth:`Task.sample` draws the *raw* inputs (symbol indices ``(B, L)`` long for the one-hot
problems, values ``(B, L, 2)`` for the ``mse`` ones) on the CPU from a ``torch.Generator`` —
so a stream is reproducible on any device — and :meth:`Task.encode` turns raw inputs into the
float network input ``(B, L, n_in)`` on whatever device they live on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from ortho_core.data.galvan import (
    sample_adding_galvan,
    sample_multiplication,
    sample_temporal_order_galvan,
    sample_xor,
)
from ortho_core.errors import ConfigError

Sampler = Callable[[int, int, torch.Generator], tuple[torch.Tensor, torch.Tensor]]

DEFAULT_ERROR_THRESHOLD = 0.04
"""Squared-error threshold above which an adding-problem sample is an error (M's code)."""


def _randint(low: int, high: int, size: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    return torch.randint(low, high, size, generator=gen)


def _temporal_order(batch: int, length: int, gen: torch.Generator,
                    starts: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """Noise symbols 2..5 with a binary symbol v_i at ``starts[i] + randint(w)``;
    class = sum_i v_i 2^i."""
    w = max(1, length // 10)
    symbols = _randint(2, 6, (batch, length), gen)
    rows = torch.arange(batch)
    target = torch.zeros(batch, dtype=torch.long)
    for i, start in enumerate(starts):
        value = _randint(0, 2, (batch,), gen)
        symbols[rows, start + _randint(0, w, (batch,), gen)] = value
        target += value << i
    return symbols, target


def _sample_temporal_order(batch: int, length: int,
                           gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return _temporal_order(batch, length, gen, (length // 10, length // 2))


def _sample_temporal_order_3bit(batch: int, length: int,
                                gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return _temporal_order(batch, length, gen,
                           (length // 10, 3 * length // 10, 6 * length // 10))


def _sample_adding(batch: int, length: int,
                   gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Values (B, L, 2) float32: channel 0 the two markers, channel 1 U[0, 1); target (B, 1)."""
    w = max(1, length // 10)
    values = torch.rand((batch, length, 2), generator=gen)
    values[:, :, 0] = 0.0
    rows = torch.arange(batch)
    p0 = _randint(0, w, (batch,), gen)
    p1 = w + _randint(0, max(1, 4 * length // 10), (batch,), gen)
    values[rows, p0, 0] = 1.0
    values[rows, p1, 0] = 1.0
    target = (values[rows, p0, 1] + values[rows, p1, 1]) / 2
    return values, target.unsqueeze(1)


def _sample_permutation(batch: int, length: int,
                        gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    symbols = _randint(2, 100, (batch, length), gen)
    value = _randint(0, 2, (batch,), gen)
    symbols[:, 0] = value
    return symbols, value


@dataclass(frozen=True)
class Task:
    """One synthetic problem: its sizes, its loss and its generator."""

    name: str
    """Registry name (DESIGN.md ``task``)."""
    n_in: int
    """Input width per time step."""
    n_out: int
    """Output width (classes for ``ce``, 1 for ``mse``)."""
    loss: Literal["ce", "mse"]
    """``ce``: softmax cross-entropy on the last step; ``mse``: squared error, linear output."""
    min_len: int
    """Shortest length whose marker bands do not overlap."""
    sampler: Sampler
    """``(batch, L, generator) -> (raw inputs, targets)`` on the CPU."""
    error_rule: Literal["squared", "absolute", "sign"] = "squared"
    """``mse`` problems only: a sample is wrong when (y − t)² > threshold (M's code),
    |y − t| ≥ threshold (G App. B: correct when |y − t| < 0.04) or y·t ≤ 0 (G's XOR)."""

    def check_length(self, length: int) -> None:
        """``ConfigError("seq_len", ...)`` unless this problem can be generated at ``length``."""
        if isinstance(length, bool) or not isinstance(length, int) or length < self.min_len:
            raise ConfigError("seq_len", f"an integer >= {self.min_len} for {self.name}", length)

    def sample(self, batch: int, length: int,
               generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Raw inputs and targets of ``batch`` sequences of ``length`` steps, drawn on the CPU.

        Raw inputs are symbol indices ``(B, L)`` (long) for one-hot problems and values
        ``(B, L, n_in)`` (float32) for ``mse`` problems; targets are class indices ``(B,)``
        (long) or ``(B, 1)`` float32 for ``mse`` problems.
        """
        self.check_length(length)
        if batch < 1:
            raise ConfigError("batch_size", "an integer >= 1", batch)
        return self.sampler(batch, length, generator)

    def encode(self, raw: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The network input ``(B, L, n_in)`` of ``dtype`` from raw inputs, on their device."""
        if self.loss == "mse":
            return raw.to(dtype)
        return F.one_hot(raw.long(), self.n_in).to(dtype)

    def losses(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean loss over the batch per leading index: ``output (..., B, n_out) -> (...)``.

        ``ce``: mean softmax cross-entropy; ``mse``: mean over the batch of the squared error
        summed over outputs (M's code: ``((t - y)**2).mean(axis=0).sum()``).
        """
        if self.loss == "mse":
            return (output - target).square().sum(-1).mean(-1)
        logp = torch.log_softmax(output, dim=-1)
        picked = logp.gather(-1, target.expand(*output.shape[:-1]).unsqueeze(-1))
        return -picked.squeeze(-1).mean(-1)

    def errors(self, output: torch.Tensor, target: torch.Tensor,
               error_threshold: float = DEFAULT_ERROR_THRESHOLD) -> torch.Tensor:
        """Which samples are wrong: ``output (..., B, n_out) -> bool (..., B)``.

        ``ce``: ``argmax(output) != target``; ``mse``: by :attr:`error_rule`,
        ``sum((y - t)²) > error_threshold``, ``sum(|y - t|) >= error_threshold`` or
        ``sum(y·t) <= 0``. A non-finite output always counts as an error.
        """
        if self.loss == "mse":
            if self.error_rule == "absolute":
                return ~((output - target).abs().sum(-1) < error_threshold)
            if self.error_rule == "sign":
                return ~((output * target).sum(-1) > 0)
            return ~((output - target).square().sum(-1) <= error_threshold)
        finite = torch.isfinite(output).all(-1)
        return ~finite | (output.argmax(-1) != target)


TASKS: dict[str, Task] = {
    t.name: t for t in (
        Task("temporal_order", 6, 4, "ce", 2, _sample_temporal_order),
        Task("temporal_order_3bit", 6, 8, "ce", 4, _sample_temporal_order_3bit),
        Task("adding", 2, 1, "mse", 2, _sample_adding),
        Task("permutation", 100, 100, "ce", 2, _sample_permutation),
        Task("adding_galvan", 2, 1, "mse", 3, sample_adding_galvan, "absolute"),
        Task("multiplication", 2, 1, "mse", 3, sample_multiplication, "absolute"),
        Task("xor", 2, 1, "mse", 3, sample_xor, "sign"),
        Task("temporal_order_galvan", 6, 4, "ce", 2, sample_temporal_order_galvan),
    )
}
"""The problems of M §III-A and G App. B (:mod:`ortho_core.data.galvan`) by DESIGN.md name."""


def get_task(name: str) -> Task:
    """The problem called ``name``; ``ConfigError("task", ...)`` if there is none."""
    if name not in TASKS:
        raise ConfigError("task", "one of " + ", ".join(TASKS), name)
    return TASKS[name]
