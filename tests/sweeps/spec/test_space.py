"""Space dimensions: grid values of ranges, and the bounds of Optuna dimensions."""

from __future__ import annotations

import math

import pytest
from pydantic import TypeAdapter, ValidationError

from sweeps.spec.space import TAGS, ChoiceDim, FloatDim, LogRange, Range, SpaceEntry, grid_values


def test_range_and_log_range_values():
    assert LogRange(log_range=(1e-4, 1e-1), num=4).values() == [1e-4, 1e-3, 1e-2, 1e-1]
    assert Range(range=(10, 100), num=10).values() == list(range(10, 101, 10))
    assert all(isinstance(v, int) for v in Range(range=(10, 100), num=10).values())
    assert Range(range=(0, 1), num=3).values() == [0.0, 0.5, 1.0]
    assert Range(range=(0.1, 0.5), num=5).values() == [0.1, 0.2, 0.3, 0.4, 0.5]
    values = LogRange(log_range=(0.001, 1.0), num=7).values()
    assert all(math.isclose(v, 10 ** (-3 + i / 2), rel_tol=1e-11) for i, v in enumerate(values))


def test_dimension_models_reject_bad_bounds():
    with pytest.raises(ValueError, match="low > 0"):
        FloatDim(low=0, high=1, log=True)
    with pytest.raises(ValueError, match="integer low and high"):
        FloatDim.model_validate({"low": 0.5, "high": 2, "int": True})
    with pytest.raises(ValueError, match="non-empty"):
        ChoiceDim(choice=())
    assert FloatDim(low=1, high=3).edges() == [1.0, 3.0]
    assert FloatDim.model_validate({"low": 1, "high": 3, "int": True}).edges() == [1, 3]
    assert ChoiceDim(choice=("a", 2)).edges() == ["a", 2]


def test_space_entries_by_shape():
    entries = TypeAdapter(dict[str, SpaceEntry]).validate_python({
        "a": [1, 2], "b": {"range": [1, 3], "num": 3}, "c": {"log_range": [0.01, 1], "num": 3},
        "d": {"low": 0.1, "high": 1}, "e": {"choice": ["x"]}})
    assert [grid_values(e) for e in entries.values()] == [
        [1, 2], [1, 2, 3], [0.01, 0.1, 1.0], None, None]
    with pytest.raises(ValidationError) as info:
        TypeAdapter(dict[str, SpaceEntry]).validate_python({"x": {"log_range": [1, 0.1],
                                                                  "num": 2}})
    (error,) = info.value.errors()
    assert [p for p in error["loc"] if p not in TAGS] == ["x", "log_range"]
    assert error["msg"] == "Value error, two positive numbers low < high"
