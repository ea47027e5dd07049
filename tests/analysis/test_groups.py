"""The configurations behind a table row: matching params, the spec's count and completeness."""

from __future__ import annotations

import pandas as pd

from analysis.groups import count_text, expected_count, group, same
from analysis.load import SweepRuns
from tests.analysis.conftest import frame_runs

SPEC_TEXT = """\
fixed: {task: adding}
space:
  lr: {log_range: [1.0e-3, 1.0e-1], num: 3}
groups:
  - fixed: {variant: plain}
  - fixed: {variant: open}
    space: {penalty: [1.0, 0.1]}
repeats: 4
"""
"""3 rates × (1 plain + 2 open) × 4 seeds = 36 configurations."""


def sweep_runs(spec_text: str | None = SPEC_TEXT) -> SweepRuns:
    """Open runs at α = 0.01 (as MLflow gives 1e-2 back), λ = 1: one per outcome, and one at
    λ = 0.1."""
    outcomes = ["solved", "unsolved", "diverged", "failed", "solved"]
    frame = pd.DataFrame({
        "run_id": list("abcde"), "outcome": outcomes,
        "params.variant": ["open"] * 5, "params.lr": [0.010000000000000002, 0.01, 0.01, 0.01,
                                                      0.01],
        "params.penalty": [1, 1.0, 1.0, 1.0, 0.1]})
    return frame_runs(frame, "s", spec_text)


def test_numbers_match_to_rounding_and_other_values_exactly() -> None:
    assert same(0.1 + 0.2, 0.3) and same(1, 1.0) and same("open", "open")
    assert not same(0.1, 0.1001) and not same("1", 1) and not same(None, 0)


def test_a_group_counts_its_runs_against_the_spec() -> None:
    g = group(sweep_runs(), {"variant": "open", "lr": 0.01, "penalty": 1.0})
    assert list(g.runs["run_id"]) == ["a", "b", "c", "d"]
    assert g.counts() == {"n_expected": 4, "n_runs": 4, "n_done": 3, "n_failed": 1,
                          "n_diverged": 1, "partial": True}
    assert g.count_text() == "3/4 (1 failed, 1 diverged)"
    whole = group(sweep_runs(), {"variant": "open"})
    assert (whole.n_expected, whole.n_done, whole.partial) == (24, 4, True)
    assert whole.count_text() == "4/24 (1 failed, 1 diverged)"


def test_without_a_spec_or_a_key_it_names_the_tracked_runs_count() -> None:
    g = group(sweep_runs(spec_text=None), {"penalty": 0.1})
    assert (g.n_expected, g.n_of, g.partial, g.count_text()) == (None, 1, False, "1/1")
    spec = pd.DataFrame({"variant": ["open"], "trials": [5]})
    assert expected_count(spec, {"variant": "open"}) == 5
    assert expected_count(spec, {"dataset": "mnist"}) is None
    assert count_text(2, 3, 0, 0) == "2/3"
