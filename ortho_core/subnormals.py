"""Subnormal floats on the CPU: flushed to zero or kept as IEEE 754 has them, per trainer call.

A vanishing gradient, what these experiments study, passes through the subnormal range (|x| below
1.2·10⁻³⁸ in float32, 2.2·10⁻³⁰⁸ in float64) on its way to zero, and many x86 CPUs (Intel's in
particular; AMD's lose less) compute on subnormal operands through microcode assists, tens of times
slower per operation: on this project's Intel machine a deep sigmoid MLP or a plain SRNN over a few
hundred steps trains 2 to 7 times slower with them kept (``benchmarks/subnormals.py``, RESULTS.md).
Flushing (FTZ: a result that would be subnormal is 0; DAZ: a subnormal operand reads as 0) changes
no computation whose operands and result are normal numbers, and an update w − α·g with |α·g| below
10⁻³⁸ leaves a float32 weight above about 10⁻³¹ unchanged in either mode, so training follows the
same path; what differs is a metric that reports such a magnitude itself (a gradient norm deep in
the vanishing regime reads 0 rather than, say, 10⁻⁴⁰). Every trainer's ``Config`` has the field
``subnormals``.

The mode belongs to each CPU thread (its MXCSR register on x86), and ``torch.set_flush_denormal``
sets it for the calling thread only. :func:`subnormal_mode` sets it for the duration of a
trainer call; threads started inside inherit it, as PyTorch's intra-op pool does when its first
parallel operation runs there (a sweep's trial process), and the member-block threads of
:mod:`ortho_core.models.srnn_kernels`, which outlive one call, take it per task
(:func:`apply_mode`). Intra-op threads started earlier keep the mode they started with;
:func:`pool_flushes` tells, and :func:`subnormal_mode` logs a warning when the pool disagrees.
GPUs compute on subnormals at full speed, and the mode does not reach them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import wraps
from typing import Any, Literal

import torch

from ortho_core.reporting import Reporter, Result, Trainer

__all__ = ["SUBNORMAL_MODES", "Subnormals", "apply_mode", "current_mode", "honours_subnormals",
           "pool_flushes", "subnormal_mode"]

Subnormals = Literal["flush", "keep"]
SUBNORMAL_MODES: tuple[Subnormals, ...] = ("flush", "keep")
"""``flush``: subnormal results and operands are 0 (FTZ and DAZ); ``keep``: IEEE 754."""

_LOG = logging.getLogger(__name__)
_STATE = threading.local()
_PROBE_CHUNK = 1 << 16
"""Elements per intra-op thread in :func:`pool_flushes`: above PyTorch's grain size (32768),
so that every thread takes one chunk."""
_SUBNORMAL_BITS = 1 << 20
"""The bits of a float32 subnormal (2⁻¹²⁹), written as an integer so that no float
conversion, itself subject to the calling thread's mode, can flush it."""


def current_mode() -> Subnormals:
    """The mode this thread was last given by :func:`apply_mode` (``keep``, IEEE 754's and the
    CPU's default, if none)."""
    return getattr(_STATE, "mode", "keep")


def apply_mode(mode: Subnormals) -> bool:
    """Put this thread in ``mode``; whether the CPU supports it (every mode but ``flush`` on a
    CPU without FTZ/DAZ, where subnormals stay IEEE 754's)."""
    if mode not in SUBNORMAL_MODES:
        raise ValueError(f"subnormals: expected one of {SUBNORMAL_MODES}, got {mode!r}")
    supported = torch.set_flush_denormal(mode == "flush") or mode == "keep"
    _STATE.mode = mode
    return supported


def pool_flushes() -> bool | None:
    """Whether PyTorch's intra-op threads flush subnormals: True if all do, False if none does,
    None if they disagree (threads started under different modes). Measured: one parallel
    product of float32 subnormals, a chunk per thread."""
    x = torch.full((torch.get_num_threads() * _PROBE_CHUNK,), _SUBNORMAL_BITS,
                   dtype=torch.int32).view(torch.float32)
    zero = (x * 1.5 == 0).view(torch.get_num_threads(), _PROBE_CHUNK).all(dim=1)
    if bool(zero.all()):
        return True
    return False if not bool(zero.any()) else None


@contextmanager
def subnormal_mode(mode: Subnormals) -> Iterator[None]:
    """This thread in ``mode`` for the block, restored to its previous mode afterwards.

    Logs a warning if ``flush`` is not supported by the CPU, or if PyTorch's intra-op threads
    (several, and started before under another mode) do not follow it."""
    before = current_mode()
    if not apply_mode(mode):
        _LOG.warning("subnormals: this CPU cannot flush subnormals; they are kept (IEEE 754)")
    elif torch.get_num_threads() > 1 and pool_flushes() is not (mode == "flush"):
        _LOG.warning("subnormals: intra-op threads started earlier in this process keep "
                     "their mode, so %r applies to part of the work; only speed and values "
                     "below the smallest normal number differ", mode)
    try:
        yield
    finally:
        apply_mode(before)


def honours_subnormals(train: Trainer) -> Trainer:
    """A trainer that runs in the ``subnormals`` mode of its pack (a pack field: the first
    member's is every member's)."""

    @wraps(train)
    def in_mode(configs: Sequence[Any], reporter: Reporter) -> list[Result]:
        if not configs:
            return train(configs, reporter)
        with subnormal_mode(configs[0].subnormals):
            return train(configs, reporter)

    return in_mode
