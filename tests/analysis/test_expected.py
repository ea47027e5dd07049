"""The configurations a sweep should hold: expanded from the resolved spec by ``sweeps`` when
the sweep starts, kept as an artifact, read back by ``analysis`` through the contract."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.expected import expected_configurations
from sweeps.contract import read_expected_cells
from sweeps.tracking.cells import expected_cells_json
from tests.analysis.conftest import SPEC_TEXT


def expected(resolved_text: str) -> pd.DataFrame:
    """The expected configurations of ``resolved_text`` as they go through the artifact."""
    return expected_configurations(read_expected_cells(expected_cells_json(resolved_text)))


def test_groups_replace_top_level_keys_and_grids_multiply() -> None:
    frame = expected(SPEC_TEXT)
    assert len(frame) == 16 and (frame["trials"] == 1).all()
    counts = frame.groupby(["task", "variant"]).size().to_dict()
    assert counts == {(t, v): n for t in ("adding", "temporal_order")
                      for v, n in (("oinit", 2), ("open", 4), ("plain", 2))}
    open_ = frame[frame["variant"] == "open"]
    assert sorted(set(zip(open_["lr"], open_["penalty"], strict=True))) == [
        (0.01, 0.1), (0.01, 1.0), (0.1, 0.1), (0.1, 1.0)]
    # the groups that leave penalty unset hold synthetic's default, which their runs log
    assert (frame.loc[frame["variant"] != "open", "penalty"] == 0.0).all()
    assert (frame.loc[frame["variant"] == "open", "pretrain_lr"] == 0.1).all()
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
    frame = expected(text)
    assert len(frame) == 4 * 3 * 2 and (frame["trials"] == 5).all()
    assert sorted(set(frame["lr"])) == [0.0001, 0.001, 0.01, 0.1]
    assert sorted(set(frame["hidden"])) == [10, 20, 30]
    assert sorted(set(frame["seed"])) == [3, 4] and set(frame["data_seed"]) == {7}
    assert "penalty" not in frame


def test_a_defaulted_key_is_a_value_and_its_list_no_column() -> None:
    frame = expected_configurations(read_expected_cells(
        '[{"task": "temporal_order", "trials": 1, "searched": [], "defaulted": ["task"]},'
        ' {"task": "adding", "trials": 1, "searched": []}]'))
    assert list(frame.columns) == ["task", "trials"]
    assert list(frame["task"]) == ["temporal_order", "adding"]


def test_no_cells_is_an_empty_frame_and_a_malformed_artifact_is_refused() -> None:
    frame = expected_configurations([])
    assert frame.empty and int(frame["trials"].sum()) == 0
    for bad in ('{"trials": 1}', '[{"lr": 0.1}]', '[{"trials": "1"}]',
                '[{"trials": 1, "searched": "lr"}]', '[{"trials": 1, "defaulted": "task"}]'):
        with pytest.raises(ValueError, match=r"expected_cells\.json"):
            read_expected_cells(bad)


def test_the_readers_load_no_mlflow_until_a_store_is_opened() -> None:
    """Importing the readers stays light (the layer rules themselves are import-linter's,
    tests/test_layers.py): MLflow, YAML and pydantic load only when a store is opened."""
    code = ("import sys; import analysis.load, analysis.store, analysis.expected, "
            "analysis.cache; "
            "found = sorted(m for m in ('yaml', 'pydantic', 'mlflow') if m in sys.modules); "
            "assert found == [], found")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
