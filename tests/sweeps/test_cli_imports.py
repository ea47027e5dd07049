"""``ortho`` imports what a command needs when it runs, nothing before: ``--help`` answers at
once, ``ortho train`` never loads ``analysis``, and ``ortho sweep status`` reads MLflow
without Ray. Each case runs in a fresh interpreter and lists which heavy modules it loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sweeps import tracking
from sweeps.testing import start_sweep
from tests.sweeps.helpers import new_home

HEAVY = ("ray", "mlflow", "pandas", "matplotlib", "torch", "optuna", "analysis")
"""Packages none of these commands may import before it needs them."""

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
from sweeps import cli
try:
    rc = {call}
except SystemExit as exit:
    rc = exit.code
print(json.dumps({{"rc": rc, "loaded": sorted(m for m in {heavy!r} if m in sys.modules)}}))
"""


def _loaded(call: str) -> tuple[object, set[str]]:
    """Run ``call`` (an expression using ``cli``) in a fresh interpreter: its exit status and
    the :data:`HEAVY` packages it imported."""
    proc = subprocess.run([sys.executable, "-c", PROBE.format(call=call, heavy=HEAVY)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={k: v for k, v in os.environ.items()
                               if k != "ORTHO_TRACKING_URI"})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    return doc["rc"], set(doc["loaded"])


def test_building_the_full_parser_imports_no_heavy_package():
    rc, loaded = _loaded("cli.build_parser() and 0")
    assert rc == 0
    assert loaded == {"analysis"}  # ``report`` and ``ui`` registered, nothing heavy behind them


def test_train_help_loads_neither_analysis_nor_torch():
    rc, loaded = _loaded("cli.main(['train', '--help'])")
    assert rc == 0
    assert loaded == set()


def test_status_of_an_empty_home_imports_no_heavy_package(tmp_path):
    rc, loaded = _loaded(f"cli.main(['sweep', 'status', '--home', {str(tmp_path)!r}])")
    assert rc == 2  # no store there: invalid tracking_uri
    assert loaded == set()


def test_status_of_a_sweep_reads_mlflow_without_ray(tmp_path):
    home = new_home(tmp_path)
    t = tracking.tracker(tracking.tracking_uri(None, home))
    start_sweep(t, "toy", "20260101-000000-abcd", profile="smoke", n_configs=2,
                metric="score")
    rc, loaded = _loaded(f"cli.main(['sweep', 'status', '--home', {str(home)!r}])")
    assert rc == 0
    assert "mlflow" in loaded  # it did read the store
    assert not loaded & {"ray", "matplotlib", "torch", "optuna", "analysis"}
