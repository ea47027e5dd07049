"""The configurations behind one row of a paper's table: the tracked runs whose params match
the row, the number the resolved spec defines for it, and how complete the row is.

Every paper module reports completeness the same way: a row is *partial* (its cells marked
†) when fewer of its configurations trained to their end than the spec defines (than were
tracked, when the sweep kept no spec), and its count reads ``done/expected`` with the failed
and diverged ones named. :func:`rank` orders a row's configurations by a paper's choice rule,
and :func:`protocol_notes` says where a sweep's protocol differs from the paper's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.load import DONE, SweepRuns, param_values
from analysis.report import expected


def same(a: object, b: object) -> bool:
    """Whether a param equals a value: numbers to a relative 10⁻⁹ (MLflow gives them back as
    parsed strings, the spec as YAML numbers), anything else exactly."""
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers):
        return math.isclose(float(a), float(b), rel_tol=1e-9)
    return a == b


def done_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """The runs of a loaded ``frame`` that trained to their end (outcome in
    :data:`~analysis.load.DONE`)."""
    return frame[frame["outcome"].isin(DONE)]


def _matches(column: pd.Series, value: object) -> pd.Series:
    return column.map(lambda v: same(v, value)).astype(bool)


def matching(frame: pd.DataFrame, values: Mapping[str, object]) -> pd.Series:
    """Which runs of a loaded ``frame`` have params equal to ``values``."""
    mask = pd.Series(True, index=frame.index)
    for key, value in values.items():
        mask &= _matches(param_values(frame, key), value)
    return mask


def expected_count(spec: pd.DataFrame | None, values: Mapping[str, object]) -> int | None:
    """Configurations the resolved spec (``analysis.expected`` rows) defines with ``values``;
    None when there is no spec or it does not name one of the keys."""
    if spec is None or not all(key in spec for key in values):
        return None
    mask = pd.Series(True, index=spec.index)
    for key, value in values.items():
        mask &= _matches(spec[key], value)
    return int(spec.loc[mask, "trials"].sum())


def count_text(n_done: int, n_of: int, n_failed: int, n_diverged: int) -> str:
    """``done/of``, followed by the failed and diverged counts where there are any."""
    extra = [f"{n} {kind}" for n, kind in ((n_failed, "failed"), (n_diverged, "diverged"))
             if n]
    return f"{n_done}/{n_of}" + (f" ({', '.join(extra)})" if extra else "")


@dataclass
class Group:
    """The configurations of one table row and how complete they are."""

    runs: pd.DataFrame
    """Tracked configurations of the row."""
    n_expected: int | None
    """Configurations the resolved spec defines for the row (None: spec unknown)."""

    def _count(self, outcome: str) -> int:
        return int((self.runs["outcome"] == outcome).sum())

    @property
    def done(self) -> pd.DataFrame:
        """The row's configurations that trained to their end (:func:`done_runs`)."""
        return done_runs(self.runs)

    @property
    def n_done(self) -> int:
        """Configurations that trained to their end."""
        return len(self.done)

    @property
    def n_of(self) -> int:
        """What ``n_done`` is measured against: the spec's count, else the tracked runs."""
        return len(self.runs) if self.n_expected is None else self.n_expected

    @property
    def partial(self) -> bool:
        """Whether the row rests on fewer configurations than it should."""
        return self.n_done < self.n_of

    def count_text(self) -> str:
        """``done/expected`` with failed and diverged counts."""
        return count_text(self.n_done, self.n_of, self._count("failed"), self._count("diverged"))

    def counts(self) -> dict[str, int | bool | None]:
        """``n_expected``, ``n_runs``, ``n_done``, ``n_failed``, ``n_diverged``, ``partial``."""
        return {"n_expected": self.n_expected, "n_runs": len(self.runs),
                "n_done": self.n_done, "n_failed": self._count("failed"),
                "n_diverged": self._count("diverged"), "partial": self.partial}


def group(runs: SweepRuns, values: Mapping[str, object]) -> Group:
    """The configurations whose params equal ``values``, with the spec's expected count."""
    frame = runs.runs
    return Group(frame[matching(frame, values)], expected_count(expected(runs), values))


def rank(cell: pd.DataFrame, metric: str, fewer: Sequence[str] = (), *,
         lowest: bool = False) -> pd.DataFrame:
    """The cell's configurations that trained to their end and logged the summary ``metric``
    (not NaN), best first: the largest ``metric`` (the smallest when ``lowest``: an error, a
    loss); ties go to the smallest of the summaries ``fewer`` in turn (missing: last), then
    the smaller α, then the smaller λ, then the run id (only for determinism)."""
    runs = done_runs(cell)
    if f"metrics.{metric}" not in runs:
        return runs.iloc[0:0]
    runs = runs[runs[f"metrics.{metric}"].notna()]
    nan = pd.Series(np.nan, index=runs.index)
    keys = {"best": runs[f"metrics.{metric}"] * (1 if lowest else -1)}
    keys |= {f"fewer {name}": runs.get(f"metrics.{name}", nan).fillna(math.inf)
             for name in fewer}
    keys |= {
        "lr": pd.to_numeric(param_values(runs, "lr"), errors="coerce").fillna(math.inf),
        "penalty": pd.to_numeric(param_values(runs, "penalty"), errors="coerce").fillna(0.0),
        "run_id": runs["run_id"]}
    order = pd.DataFrame(keys).sort_values(list(keys), kind="stable").index
    return runs.loc[order]


def first_ranked(cell: pd.DataFrame, metric: str, *, lowest: bool = False) -> pd.Series | None:
    """The cell's best configuration by :func:`rank` (the paper's choice rule; the lowest
    ``metric`` when ``lowest``), or None when none trained to its end with ``metric``."""
    ranked = rank(cell, metric, lowest=lowest)
    return ranked.iloc[0] if len(ranked) else None


def protocol_notes(runs: SweepRuns, paper: Mapping[str, float], what: str,
                   subsets: Sequence[str] = ()) -> list[str]:
    """The protocol settings of the sweep that differ from the ``paper`` ones (a reduced
    profile), and the keys among ``subsets`` the sweep set (a subset of a data split where the
    paper used all of it); ``what`` names the results that are then not comparable."""
    diffs = []
    for key, value in paper.items():
        values = sorted({v for v in param_values(runs.runs, key)
                         if isinstance(v, (int, float)) and v == v})
        if values and values != [value]:
            diffs.append(f"{key} = {', '.join(format(v, 'g') for v in values)} "
                         f"(paper {value:g})")
    for key in subsets:
        values = sorted({v for v in param_values(runs.runs, key) if isinstance(v, int)})
        if values:
            diffs.append(f"{key} = {', '.join(map(str, values))} (paper: the whole split)")
    if not diffs:
        return []
    return [f"Protocol differs from the paper's, so {what} is not comparable one to one: "
            + "; ".join(diffs) + "."]


def baseline_level(runs: SweepRuns) -> float:
    """The majority-class accuracy (%) of the test set a classification sweep used (the
    summary ``baseline_accuracy`` of its first run that logged one); NaN if none did."""
    column = runs.runs.get("metrics.baseline_accuracy")
    if column is None or not column.notna().any():
        return math.nan
    return float(column.dropna().iloc[0]) * 100


def baseline_notes(runs: SweepRuns, published: float) -> list[str]:
    """A table note with every majority-class baseline (%) the sweep's runs measured, beside
    the paper's ``published`` one on all 10,000 MNIST test images; none if no run logged it."""
    column = runs.runs.get("metrics.baseline_accuracy")
    values = sorted({round(100.0 * v, 2) for v in column.dropna()}) if column is not None else []
    if not values:
        return []
    return ["Majority-class baseline of the test set used: "
            + ", ".join(f"{v:.2f} %" for v in values)
            + f" (M: {published:.2f} % on all 10,000)."]
