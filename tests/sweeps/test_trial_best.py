"""The metric a trial reports for its pack (:func:`sweeps.trial.best`): the best finite member
value, so that a diverged member (NaN or ±inf) or one without a value (None) never wins, and
NaN, which the searcher and the progress line read as no value, when no member has one."""

from __future__ import annotations

import math

import pytest

from sweeps.trial import best


@pytest.mark.parametrize(("values", "mode", "expected"), [
    ([0.5, 0.9, 0.7], "max", 0.9),
    ([0.5, 0.9, 0.7], "min", 0.5),
    ([math.nan, 0.3, 0.2], "max", 0.3),
    ([0.3, math.nan, 0.2], "min", 0.2),
    ([math.inf, 0.3], "max", 0.3),
    ([-math.inf, 0.3], "min", 0.3),
    ([None, 0.4, math.nan, None], "max", 0.4),
])
def test_best_ignores_values_that_are_not_finite(values, mode, expected):
    assert best(values, mode) == expected


@pytest.mark.parametrize("values", [[], [None], [math.nan, None], [math.inf, -math.inf]])
@pytest.mark.parametrize("mode", ["max", "min"])
def test_best_of_no_finite_value_is_nan(values, mode):
    assert math.isnan(best(values, mode))
