"""The report of a spec without a report of its own (a user's spec, given by path or name):
its configurations ranked by the spec's metric.

The shipped specs' reports set the papers' tables beside the published values; a spec a user
wrote (``sweeps/specs/README.md``: a spec may live anywhere) has no published counterpart, so
its report is the one table every sweep can have: each configuration by its run's name (what
varies, :mod:`sweeps.naming`), the metric the spec ranks by (its ``metric:`` line, a tag of
the sweep's parent run), the outcome and the attempts, best first. It states no claim.
"""

from __future__ import annotations

import pandas as pd

from analysis.load import Histories, SweepRuns
from analysis.report import Report, provenance
from analysis.tables import Cell, Table


def ranked(runs: SweepRuns) -> pd.DataFrame:
    """The configurations best first by the sweep's metric (its mode), those without a value
    last, in start order otherwise."""
    frame = runs.runs
    column = f"metrics.{runs.sweep.metric}"
    values = pd.to_numeric(frame[column], errors="coerce") if column in frame else (
        pd.Series(float("nan"), index=frame.index))
    order = values.sort_values(ascending=runs.sweep.mode == "min", na_position="last",
                               kind="stable").index
    return frame.loc[order].assign(_value=values.loc[order])


def generic_report(runs: SweepRuns, histories: Histories | None = None) -> Report:
    """One table: every configuration of the sweep, ranked by the spec's metric (no figure:
    ``histories`` is not read)."""
    sweep = runs.sweep
    metric = sweep.metric or "metric"
    frame = ranked(runs)
    rows = [[Cell(name if isinstance(name := r.get("run_name"), str) else r["trial_key"]),
             Cell(r["_value"], "g"), Cell(r["outcome"]), Cell(int(r["attempts"]), "d")]
            for _, r in frame.iterrows()]
    notes = [f"{sweep.spec} has no report of its own (those of the shipped specs set the "
             f"papers' tables beside the published values): its configurations by "
             f"{metric}, {'smallest' if sweep.mode == 'min' else 'largest'} first; no "
             "published claim is judged."]
    table = Table(name=sweep.spec, title=f"{sweep.spec} — configurations by {metric}",
                  columns=["configuration", metric, "outcome", "attempts"], rows=rows,
                  provenance=provenance(runs), notes=notes)
    return Report(runs=runs, tables=[table])
