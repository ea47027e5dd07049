"""The ``device`` field every Config carries: ``cpu``, ``cuda``, ``cuda:N`` or ``auto``; and
the check of the runtime fields, ``device`` and ``subnormals``, that every Config shares."""

from __future__ import annotations

import re

import torch

from ortho_core.config import one_of, require
from ortho_core.subnormals import SUBNORMAL_MODES

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float64": torch.float64}
"""Training precisions by the name a Config's ``dtype`` key takes."""

_PATTERN = re.compile(r"cpu|cuda(:\d+)?|auto")


def check_device(name: str) -> None:
    """Require a device name of the accepted forms (whether it exists is checked at training);
    ``ConfigError`` naming the field ``device`` otherwise."""
    require(isinstance(name, str) and _PATTERN.fullmatch(name) is not None, "device",
            "cpu, cuda, cuda:N or auto", name)


def check_runtime(device: str, subnormals: str) -> None:
    """Require a Config's runtime fields to be valid: ``device`` of the accepted forms and
    ``subnormals`` one of :data:`~ortho_core.subnormals.SUBNORMAL_MODES`; ``ConfigError``
    naming the field otherwise."""
    check_device(device)
    one_of(subnormals, SUBNORMAL_MODES, "subnormals")


def resolve_device(name: str) -> torch.device:
    """The torch device for ``name``: ``auto`` is CUDA when available, else the CPU.

    A CUDA device that this machine does not have raises ``ConfigError`` naming ``device``.
    """
    check_device(name)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        require((device.index or 0) < count, "device",
                f"a CUDA device this machine has ({count} visible)", name)
    return device
