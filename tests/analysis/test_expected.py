"""Expanding a resolved spec into the configurations a sweep should hold."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from analysis.expected import expected_configurations
from tests.analysis.conftest import SPEC_TEXT


def test_groups_replace_top_level_keys_and_grids_multiply() -> None:
    frame = expected_configurations(SPEC_TEXT)
    assert len(frame) == 16 and (frame["trials"] == 1).all()
    counts = frame.groupby(["task", "variant"]).size().to_dict()
    assert counts == {(t, v): n for t in ("adding", "temporal_order")
                      for v, n in (("oinit", 2), ("open", 4), ("plain", 2))}
    open_ = frame[frame["variant"] == "open"]
    assert sorted(set(zip(open_["lr"], open_["penalty"], strict=True))) == [
        (0.01, 0.1), (0.01, 1.0), (0.1, 0.1), (0.1, 1.0)]
    assert frame.loc[frame["variant"] != "open", "penalty"].isna().all()
    assert (frame["seed"] == 0).all() and (frame["data_seed"] == 0).all()
    assert set(frame["error_threshold"]) == {0.04}


def test_ranges_repeats_and_optuna_cells() -> None:
    text = """\
name: demo
experiment: synthetic
search: {kind: optuna, sampler: tpe, n_trials: 5, seed: 0}
fixed: {task: adding, data_seed: 7}
space:
  lr: {log_range: [1.0e-4, 1.0e-1], num: 4}
  hidden: {range: [10, 30], num: 3}
  penalty: {low: 0.001, high: 1.0, log: true}
groups: []
repeats: 2
seed: 3
"""
    frame = expected_configurations(text)
    assert len(frame) == 4 * 3 * 2 and (frame["trials"] == 5).all()
    assert sorted(set(frame["lr"])) == [0.0001, 0.001, 0.01, 0.1]
    assert sorted(set(frame["hidden"])) == [10, 20, 30]
    assert sorted(set(frame["seed"])) == [3, 4] and set(frame["data_seed"]) == {7}
    assert "penalty" not in frame


def test_expanding_imports_neither_ray_nor_a_trainer() -> None:
    """analysis reads specs through sweeps.spec, which must stay free of Ray and training code
    (DESIGN.md layers); checked in a fresh interpreter."""
    code = ("import sys; from analysis.expected import expected_configurations; "
            "from tests.analysis.conftest import SPEC_TEXT; expected_configurations(SPEC_TEXT); "
            "assert 'ray' not in sys.modules, 'ray'; "
            "assert 'ortho_core.experiments.synthetic' not in sys.modules, 'trainer'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
