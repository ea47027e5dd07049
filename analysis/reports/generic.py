"""The report of a spec without a report of its own (a user's spec, given by path or name):
its configurations ranked by the spec's metric.

The shipped specs' reports set the papers' tables beside the published values; a spec a user
wrote (``sweeps/specs/README.md``: a spec may live anywhere) has no published counterpart, so
its report is the one table every sweep can have: each configuration by its run's name (what
varies, :mod:`sweeps.naming`), the metric the spec ranks by (its ``metric:`` line, a tag of
the sweep's parent run), the outcome (and whether the scheduler stopped it early: ranked
after those that trained to their end) and the attempts, best first. It states no claim.

A configuration the spec defines that no run holds (an interrupted sweep's) is a row of its
own, last, named by the values that vary across the spec's cells, its metric ``missing``
(an Optuna cell's missing trials are one row); a configuration still running or killed has
its metric marked partial. The legend then reads "Partial sweep", as the shipped reports'
do, rather than "All cells complete".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

from analysis.expected import expected_configurations
from analysis.groups import matching
from analysis.load import Histories, SweepRuns, param_values
from analysis.report import Report, provenance
from analysis.tables import Cell, Table
from sweeps.contract import (
    DEFAULTED,
    SEARCHED,
    TRIALS,
    is_optuna_cell,
    run_name,
    varying_keys,
)


def ranked(runs: SweepRuns) -> pd.DataFrame:
    """The configurations best first by the sweep's metric (its mode), those the early-
    stopping scheduler stopped after those that trained to their end (their value is the
    metric at the step they reached, where the summary has a key of that name), those
    without a value last, in start order otherwise."""
    frame = runs.runs
    column = f"metrics.{runs.sweep.metric}"
    values = pd.to_numeric(frame[column], errors="coerce") if column in frame else (
        pd.Series(float("nan"), index=frame.index))
    key = values if runs.sweep.mode == "min" else -values
    order = pd.DataFrame({"missing": values.isna(), "stopped": frame["stopped_early"],
                          "key": key}).sort_values(["missing", "stopped", "key"],
                                                   kind="stable").index
    return frame.loc[order].assign(_value=values.loc[order])


def generic_report(runs: SweepRuns, histories: Histories | None = None) -> Report:
    """One table: every configuration of the sweep, ranked by the spec's metric (no figure:
    ``histories`` is not read)."""
    sweep = runs.sweep
    metric = sweep.metric or "metric"
    frame = ranked(runs)
    rows = [[Cell(name if isinstance(name := r.get("run_name"), str) else r["trial_key"]),
             Cell(r["_value"], "g", partial=r["outcome"] == "incomplete"),
             Cell(f"{r['outcome']}, stopped early" if r["stopped_early"] else r["outcome"]),
             Cell(int(r["attempts"]), "d")]
            for _, r in frame.iterrows()]
    rows += [[Cell(name), Cell(None, partial=True), Cell(None), Cell(0, "d")]
             for name in missing(runs)]
    notes = [f"{sweep.spec} has no report of its own (those of the shipped specs set the "
             f"papers' tables beside the published values): its configurations by "
             f"{metric}, {'smallest' if sweep.mode == 'min' else 'largest'} first; no "
             "published claim is judged."]
    table = Table(name=sweep.spec, title=f"{sweep.spec} — configurations by {metric}",
                  columns=["configuration", metric, "outcome", "attempts"], rows=rows,
                  provenance=provenance(runs), notes=notes)
    return Report(runs=runs, tables=[table])


def missing(runs: SweepRuns) -> list[str]:
    """A name per configuration of the spec's cells that no run holds (an Optuna cell's
    missing trials under one name, "… (2 of 5 trials)"), in the spec's order, named as its
    run would be (:func:`sweeps.contract.run_name`, from the keys that vary across the cells,
    :func:`sweeps.contract.varying_keys`, shown where the cell's groups set them); none for a
    sweep tracked without its expected cells. A key other cells set and a cell's groups
    leave unset is compared by the trainer's default the cell holds for it (its
    ``defaulted`` keys), which is what a run logs; in the cells of a sweep tracked before
    they held such defaults, such a key matches only runs that lack it too. A key a cell's
    Optuna search chooses matches runs whose Optuna point chose it (a cell leaves out its
    Optuna dimensions). An Optuna cell of a FINISHED sweep misses nothing: a point the
    sampler proposed again spends a trial of the budget without a run of its own."""
    if runs.expected_cells is None:
        return []
    cells = expected_configurations(runs.expected_cells)
    keys = [k for k in cells.columns if k != TRIALS]
    resolved = [{k: cell[k] for k in keys if not _absent(cell[k])}
                for _, cell in cells.iterrows()]
    written = [_Written({k: v for k, v in values.items() if k not in raw.get(DEFAULTED, ())},
                        dict.fromkeys(raw.get(SEARCHED, ())))
               for values, raw in zip(resolved, runs.expected_cells, strict=True)]
    varying = varying_keys(written, resolved)
    finished = runs.sweep.status == "FINISHED"
    chosen = searched_keys(runs.runs)
    names = []
    for values, named, raw in zip(resolved, written, runs.expected_cells, strict=True):
        optuna = is_optuna_cell(raw)
        trials = int(raw[TRIALS])
        if optuna and finished:
            continue
        held = matching(runs.runs, values)
        for key in set(keys) - set(values):
            unset = param_values(runs.runs, key).isna()
            held &= unset | searched(chosen, key) if optuna else unset
        left = trials - int(held.sum())
        if left > 0:
            name = run_name(named.params, varying) if varying else runs.sweep.spec
            names.append(name + (f" ({left} of {trials} trials)" if trials > 1 else ""))
    return names


@dataclass(frozen=True)
class _Written:
    """An expected cell as :func:`sweeps.contract.varying_keys` reads a cell: the params its
    groups set and the keys its Optuna search chooses."""

    params: dict[str, Any]
    optuna_space: dict[str, None]


def searched_keys(frame: pd.DataFrame) -> pd.Series:
    """The keys each run of a loaded ``frame`` had chosen by its Optuna cell (empty for a
    grid configuration's run)."""
    points = frame["optuna_params"] if "optuna_params" in frame else pd.Series(
        [None] * len(frame), index=frame.index, dtype=object)
    return points.map(lambda text: frozenset(json.loads(text)) if isinstance(text, str)
                      else frozenset())


def searched(chosen: pd.Series, key: str) -> pd.Series:
    """Which runs had ``key`` chosen by their Optuna cell, from their :func:`searched_keys`."""
    return chosen.map(lambda keys: key in keys).astype(bool)


def _absent(value: object) -> bool:
    """A key the cell's group does not set (NaN where the cells' groups differ), or whose
    value is None (a run logs it as ``None``, read back as a missing value)."""
    return value is None or (isinstance(value, float) and value != value)
