"""The dimensions of a sweep's space (sweeps/specs/README.md, ``space:``).

A swept key takes one of five forms. Three are *grid* dimensions, expanded to values here;
the cartesian product over them gives a spec's cells:

- a list ``[a, b, ...]``: exactly these values;
- ``{range: [a, b], num: n}``: n evenly spaced values from a to b (integers when a, b and the
  step are integers);
- ``{log_range: [a, b], num: n}``: n values evenly spaced in log10 from a to b.

Two are *Optuna* dimensions, searched by Optuna within each cell (Ray Tune's OptunaSearch
rejects grid dimensions, so the two kinds are kept apart):

- ``{low: a, high: b}`` with optional ``log: true`` and ``int: true``;
- ``{choice: [...]}``: a categorical dimension.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

SIGNIFICANT_DIGITS = 12
"""Generated range values are rounded to this many significant digits, so that
``log_range: [1e-4, 1e-1]`` gives 0.001 rather than 0.0010000000000000002 and the trial keys
and MLflow params read as written."""


class StrictModel(BaseModel):
    """A frozen model that rejects unknown keys, naming the key and the keys it knows.

    Pydantic's own ``extra="forbid"`` error does not say which keys are allowed; this check
    runs first and does (error type ``unknown_key``, the key in ``ctx["key"]``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True,
                              populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known = [f.alias or name for name, f in cls.model_fields.items()]
            for key in data:
                if key not in known:
                    raise PydanticCustomError(
                        "unknown_key", "one of the keys {known}",
                        {"key": key, "known": ", ".join(known)})
        return data


def _round(x: float) -> float:
    return float(f"{x:.{SIGNIFICANT_DIGITS}g}")


def _pair(value: Any, positive: bool) -> Any:
    """Check a ``[low, high]`` pair of finite numbers with low < high (and > 0 if asked)."""
    ok = (isinstance(value, (list, tuple)) and len(value) == 2
          and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                  and (x > 0 or not positive) for x in value)
          and value[0] < value[1])
    if not ok:
        kind = "positive numbers" if positive else "numbers"
        raise ValueError(f"two {kind} low < high")
    return value


def _num(value: int) -> int:
    if value < 2:
        raise ValueError("an integer >= 2 (a single value is written as a one-element list)")
    return value


GridSize = Annotated[int, AfterValidator(_num)]
"""``num`` of a grid dimension: how many values (>= 2)."""


class Range(StrictModel):
    """``{range: [a, b], num: n}``: a grid of n evenly spaced values."""

    range: Annotated[tuple[int | float, int | float],
                     BeforeValidator(lambda value: _pair(value, positive=False))]
    """Both ends, included; low < high."""
    num: GridSize
    """How many values (>= 2)."""

    def values(self) -> list[int | float]:
        """The grid values, low to high; integers when both ends and the step are integers."""
        low, high = self.range
        step = (high - low) / (self.num - 1)
        if isinstance(low, int) and isinstance(high, int) and step.is_integer():
            return [low + i * int(step) for i in range(self.num)]
        return [_round(low + i * step) for i in range(self.num)]


class LogRange(StrictModel):
    """``{log_range: [a, b], num: n}``: a grid of n values evenly spaced in log10."""

    log_range: Annotated[tuple[float, float],
                         BeforeValidator(lambda value: _pair(value, positive=True))]
    """Both ends, included; 0 < low < high."""
    num: GridSize
    """How many values (>= 2)."""

    def values(self) -> list[float]:
        """The grid values, low to high (``[1e-4, 1e-1]``, 4 -> 1e-4, 1e-3, 1e-2, 1e-1)."""
        low, high = (math.log10(x) for x in self.log_range)
        step = (high - low) / (self.num - 1)
        return [_round(10 ** (low + i * step)) for i in range(self.num)]


class FloatDim(StrictModel):
    """``{low: a, high: b, log: .., int: ..}``: an Optuna float or integer dimension."""

    low: float
    """Lowest value, included."""
    high: float
    """Highest value, included; > low."""
    log: bool = False
    """Sample uniformly in log space (rates, penalties); needs low > 0."""
    integer: bool = Field(False, alias="int")
    """Sample integers (then low and high must be integers)."""

    @model_validator(mode="after")
    def _bounds(self) -> FloatDim:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise ValueError("finite numbers low < high")
        if self.log and self.low <= 0:
            raise ValueError("low > 0 with log: true")
        if self.integer and not (self.low.is_integer() and self.high.is_integer()):
            raise ValueError("integer low and high with int: true")
        return self

    def edges(self) -> list[int | float]:
        """Both ends: the values a spec check builds configurations with."""
        if self.integer:
            return [int(self.low), int(self.high)]
        return [self.low, self.high]

    def distribution(self) -> Any:
        """The equivalent ``optuna.distributions`` object."""
        from optuna.distributions import FloatDistribution, IntDistribution

        if self.integer:
            return IntDistribution(int(self.low), int(self.high), log=self.log)
        return FloatDistribution(self.low, self.high, log=self.log)


class ChoiceDim(StrictModel):
    """``{choice: [...]}``: an Optuna categorical dimension."""

    choice: tuple[str | bool | int | float | None, ...]
    """The categories (scalars, as Optuna requires); at least one."""

    @field_validator("choice")
    @classmethod
    def _non_empty(cls, value: tuple[Any, ...]) -> tuple[Any, ...]:
        if not value:
            raise ValueError("a non-empty list of scalars")
        return value

    def edges(self) -> list[Any]:
        """Every category: the values a spec check builds configurations with."""
        return list(self.choice)

    def distribution(self) -> Any:
        """The equivalent ``optuna.distributions`` object."""
        from optuna.distributions import CategoricalDistribution

        return CategoricalDistribution(self.choice)


Dimension = FloatDim | ChoiceDim
"""An Optuna dimension: searched within each grid cell."""


def _non_empty(value: list[Any]) -> list[Any]:
    if not value:
        raise ValueError("a non-empty list of values")
    return value


_FORMS = (("range", Range, "range dimension"), ("log_range", LogRange, "log_range dimension"),
          ("choice", ChoiceDim, "choice dimension"), ("low", FloatDim, "optuna dimension"),
          ("high", FloatDim, "optuna dimension"))
"""The mapping forms of a space entry: the key that marks it, its model, its union tag."""

TAGS = frozenset({"grid list", *(tag for _, _, tag in _FORMS)})
"""Union tags pydantic inserts into error locations (dropped when reporting a field path)."""


def _kind(value: Any) -> str | None:
    """The tag of a space entry (see :data:`SpaceEntry`): from its type when serialising, from
    its shape when validating."""
    if isinstance(value, list):
        return "grid list"
    for key, model, tag in _FORMS:
        if isinstance(value, model) or (isinstance(value, dict) and key in value):
            return tag
    return None


SpaceEntry = Annotated[
    Annotated[list[Any], AfterValidator(_non_empty), Tag("grid list")]
    | Annotated[Range, Tag("range dimension")]
    | Annotated[LogRange, Tag("log_range dimension")]
    | Annotated[ChoiceDim, Tag("choice dimension")]
    | Annotated[FloatDim, Tag("optuna dimension")],
    Discriminator(
        _kind, custom_error_type="dimension",
        custom_error_message=("a list of values, {range: [a, b], num: n}, "
                              "{log_range: [a, b], num: n}, {low: a, high: b} or {choice: [..]}"),
    ),
]
"""One swept key: a grid dimension (list, range, log_range) or an Optuna dimension."""


def grid_values(entry: Any) -> list[Any] | None:
    """The values of a grid dimension, or None for an Optuna dimension."""
    if isinstance(entry, (Range, LogRange)):
        return entry.values()
    if isinstance(entry, list):
        return entry
    return None
