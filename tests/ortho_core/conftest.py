"""Fixtures shared by the ``ortho_core`` tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from ortho_core.data.paths import ENV_VAR

SHARED_DATA = Path(os.environ.get(ENV_VAR)
                   or Path(__file__).resolve().parents[3] / "shared" / "data")
"""The project's datasets: ``$ORTHO_DATA_DIR`` if set, else the checkout's ``shared/data``."""


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny ops on a shared 2-core machine run fastest (and steadiest) on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def shared_data(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point ``$ORTHO_DATA_DIR`` at the project's datasets for one test; their directory."""
    monkeypatch.setenv(ENV_VAR, str(SHARED_DATA))
    return SHARED_DATA
