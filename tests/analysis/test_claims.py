"""The claim rules most reports share: :func:`beats` and :func:`ordered` on measured,
missing (None) and NaN values."""

from __future__ import annotations

from analysis.claims import FAILS, HOLDS, NOT_MEASURED, beats, ordered


def test_beats_needs_every_winner_strictly_better_than_every_loser() -> None:
    values = {"OPEN": 40.0, "OINIT": 50.0, "SRNN": 30.0}
    assert beats("M-T1", "t", values, ["OPEN", "OINIT"], ["SRNN"]).status == HOLDS
    assert beats("M-T1", "t", values, ["SRNN"], ["OPEN"]).status == FAILS
    assert beats("M-T1", "t", values, ["SRNN"], ["OPEN"], higher=False).status == HOLDS
    assert beats("M-T1", "t", {"a": 1.0, "b": 1.0}, ["a"], ["b"]).status == FAILS  # a tie


def test_beats_with_a_missing_or_nan_value_is_not_measured_and_says_which() -> None:
    claim = beats("M-T1", "t", {"OPEN": 40.0, "SRNN": float("nan")}, ["OPEN"], ["SRNN", "X"])
    assert claim.status == NOT_MEASURED
    assert claim.evidence == "OPEN 40.00, SRNN not measured, X not measured"


def test_ordered_never_decreases_and_with_rising_needs_the_end_above_the_start() -> None:
    assert ordered("M-T1", "t", {"a": 1.0, "b": 1.0, "c": 2.0}, ["a", "b", "c"]).status == HOLDS
    assert ordered("M-T1", "t", {"a": 2.0, "b": 1.0}, ["a", "b"]).status == FAILS
    tie = ordered("M-T1", "t", {"a": 1.0, "b": 1.0}, ["a", "b"], fmt=".0f", rising=True)
    assert (tie.status, tie.evidence) == (FAILS, "a 1, b 1 (a tie: no model went further)")
    missing = ordered("M-T1", "t", {"a": 1.0, "b": None}, ["a", "b"], fmt=".0f")
    assert (missing.status, missing.evidence) == (NOT_MEASURED, "a 1, b not measured")
