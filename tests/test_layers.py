"""The layer rules of DESIGN.md, as import-linter contracts (``[tool.importlinter]`` in
pyproject.toml): ``ortho_core`` imports no infrastructure, ``sweeps`` never imports
``analysis``, ``analysis`` imports neither Ray nor the trainers and of ``sweeps`` only
``sweeps.contract``, which is dependency-free, and ``ortho sweep status`` needs no Ray."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_every_layer_contract_is_kept() -> None:
    exe = shutil.which("lint-imports")
    if exe is None:
        pytest.fail("lint-imports is missing: run bash scripts/install.sh --test")
    done = subprocess.run([exe, "--no-logo", "--no-cache"], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout
