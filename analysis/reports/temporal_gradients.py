"""Report of ``spectral-temporal-gradients`` (paper G §3.2, EXPERIMENTS.md G-F31): G Fig. 3.1,
the norm of each time step's temporal gradient ‖∇_θ L|_t‖ at initialisation for W_hh rescaled
to ρ ∈ {0.8 … 1.2}, on a log axis, and a table setting each ρ's measured profile beside G's
description of it (:data:`analysis.published.galvan.FIG_3_1`: decay for ρ < 1, roughly flat
for ρ > 1).

The trainer logs ``temporal_grad_norm`` at every time step (the MLflow step is t = 1 … T) and
the summary ``log10_ratio`` = log10(‖∇_r L|_1‖ / ‖∇_r L|_T‖) over the recurrent variables
r = (W_xh, W_hh, b_h): the readout's gradient, at the last step only, is left out of the
comparison, though the figure plots it (:mod:`ortho_core.experiments.temporal_gradients`
says why). Per ρ the report takes the median
over the seeds (G drew one network per ρ; a profile with more seeds shows how typical one
draw is). Verdict rule, stated under the table: a profile *decays* when its median
``log10_ratio`` ≤ :data:`DECAY` (the earliest step at least 100 times smaller than the
latest) and is *flat* when it is ≥ :data:`FLAT` (within a factor of 10).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as MplFigure

from analysis.claims import Claim, judge
from analysis.figures import Figure
from analysis.groups import group
from analysis.load import Histories, SweepRuns, numeric_values, param_values
from analysis.published.galvan import FIG_3_1, FIG_3_1_SAMPLES, FIG_3_1_TASK
from analysis.report import Report, provenance
from analysis.tables import Cell, Table

RATIO = "log10_ratio"
"""Trial summary: log10 of the first step's norm over the last step's, over W_xh, W_hh, b_h."""
NORM = "temporal_grad_norm"
"""Stepwise metric: ‖∇_θ L|_t‖ at step t."""
DECAY = -2.0
"""A median ``log10_ratio`` at or below this reads as a decaying (vanishing) profile."""
FLAT = -1.0
"""A median ``log10_ratio`` at or above this reads as a flat profile."""


def _radii(runs: SweepRuns) -> list[float]:
    """Every ρ the paper shows or the sweep holds, ascending."""
    held = numeric_values(runs.runs, "spectral_radius")
    return sorted(set(held) | {p.spectral_radius for p in FIG_3_1})


def shape_of(ratio: float | None) -> str | None:
    """``decays``, ``flat`` or ``in between`` for a median ``log10_ratio`` (None: none)."""
    if ratio is None:
        return None
    if ratio <= DECAY:
        return "decays"
    return "flat" if ratio >= FLAT else "in between"


def ratio_cells(runs: SweepRuns) -> pd.DataFrame:
    """One row per ρ: counts, the median, minimum and maximum ``log10_ratio`` over the seeds
    that finished, the measured shape, G's claim and the verdict.

    Columns: ``rho``, ``n_expected``, ``n_runs``, ``n_done``, ``n_failed``, ``n_diverged``,
    ``partial``, ``count``, ``median``, ``low``, ``high``, ``shape``, ``claim`` (``decays``,
    ``flat`` or None when G does not show this ρ) and ``agrees`` (bool, or None).
    """
    claims = {p.spectral_radius: None if p.vanishing is None else
              "decays" if p.vanishing else "flat" for p in FIG_3_1}
    rows = []
    for rho in _radii(runs):
        g = group(runs, {"spectral_radius": rho})
        done = g.done
        values = done.get(f"metrics.{RATIO}", pd.Series(dtype="float64")).dropna()
        median = float(values.median()) if len(values) else None
        shape, claim = shape_of(median), claims.get(rho)
        rows.append({"rho": rho, **g.counts(), "count": g.count_text(), "median": median,
                     "low": float(values.min()) if len(values) else None,
                     "high": float(values.max()) if len(values) else None,
                     "shape": shape, "claim": claim,
                     "agrees": None if shape is None or claim is None else shape == claim})
    return pd.DataFrame.from_records(rows)


def ratio_table(runs: SweepRuns, cells: pd.DataFrame | None = None) -> Table:
    """G Fig. 3.1 as a table: per ρ the measured decay beside G's description, with a
    verdict."""
    cells = ratio_cells(runs) if cells is None else cells
    rows = []
    for _, r in cells.iterrows():
        partial = bool(r["partial"])
        verdict = {True: "as G", False: "differs", None: None}[r["agrees"]]
        rows.append([Cell(r["rho"], "g"), Cell(r["median"], ".2f", partial),
                     Cell(r["low"], ".2f", partial), Cell(r["high"], ".2f", partial),
                     Cell(r["shape"], "", partial), Cell(r["claim"]),
                     Cell(verdict, "", partial), r["count"]])
    judged = cells[cells["agrees"].notna()]
    lengths = numeric_values(runs.runs, "seq_len", int)
    samples = numeric_values(runs.runs, "samples", int)
    tasks = sorted({str(v) for v in param_values(runs.runs, "task") if isinstance(v, str)})
    notes = [
        f"Verdict: {int(judged['agrees'].sum())} of {len(judged)} ρ behave as G describes "
        "them.",
        "log10 ratio = log10(‖∇r L|₁‖ / ‖∇r L|_T‖), the earliest step's temporal-gradient "
        "norm (G eqs. 3.1-3.3) over the latest's, both over the recurrent variables r = "
        "(W_xh, W_hh, b_h): the readout's gradient, which the figure plots at the last step "
        "only, carries nothing back through time; median, min and max over "
        f"the seeds. Shape: decays when the median ≤ {DECAY:g} (100 times smaller), flat when "
        f"≥ {FLAT:g} (within a factor of 10), else in between.",
        "Published: Galvan, Fig. 3.1 (no numbers): ρ < 1 are \"perfect examples of vanishing "
        "gradient\"; for ρ > 1 \"the temporal components have roughly the same norm\"; ρ = 1 "
        "is not described in words, so no verdict is given for it.",
        f"T = {', '.join(map(str, lengths)) or '?'} (G does not state it); "
        f"{', '.join(map(str, samples)) or '?'} samples (G: {FIG_3_1_SAMPLES}); "
        f"problem {', '.join(tasks) or '?'} (G: {FIG_3_1_TASK}).",
    ]
    return Table(name="temporal-gradients", title="G Fig. 3.1 — decay of the temporal "
                 "gradients at initialisation against ρ",
                 columns=["ρ", "log10 ratio", "min", "max", "shape", "G", "verdict",
                          "configurations"],
                 rows=rows, provenance=provenance(runs), notes=notes)


def norm_curves(runs: SweepRuns, histories: Histories) -> Figure:
    """G Fig. 3.1: ‖∇_θ L|_t‖ against the time step t, one line per ρ (the median over its
    seeds at each step), log scale."""
    rows, notes = [], []
    for rho in _radii(runs):
        chosen = group(runs, {"spectral_radius": rho}).done
        if chosen.empty:
            notes.append(f"No run with ρ = {rho:g} finished.")
            continue
        series = pd.concat([histories.get(rid, NORM).assign(run_id=rid)
                            for rid in chosen["run_id"]], ignore_index=True)
        median = series.groupby("step")["value"].median()
        rows.append(pd.DataFrame({"rho": rho, "step": median.index.astype("int64"),
                                  "norm": median.to_numpy(), "seeds": len(chosen)}))
    columns = ["rho", "step", "norm", "seeds"]
    data = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=columns)

    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        ax = fig.add_subplot()
        for rho, series in data.groupby("rho", sort=True):
            ax.plot(series["step"], series["norm"].where(series["norm"] > 0, np.nan),
                    label=f"ρ = {rho:g}")
        ax.set_yscale("log")
        ax.set_xlabel("time step t")
        ax.set_ylabel(r"$\|\nabla_\theta L|_t\|$ (median over seeds)")
        ax.legend(fontsize=8)

    sweep = runs.sweep
    return Figure(name="temporal-gradients", data=data[columns], draw=draw, notes=notes,
                  title=f"G Fig. 3.1 — temporal-gradient norms at initialisation · {sweep.spec}"
                        f" · {sweep.profile} · sweep {sweep.sweep_id}")


def ratio_claims(cells: pd.DataFrame) -> list[Claim]:
    """G-F31: for ρ < 1 the temporal gradients decay, for ρ > 1 they are roughly flat; each
    holds when every ρ G describes so has that measured shape (:func:`shape_of`)."""
    claims = []
    for shape, text in (("decays", "ρ < 1: the temporal gradients vanish with distance"),
                        ("flat", "ρ > 1: the temporal components have roughly the same norm")):
        mine = cells[cells["claim"] == shape]
        rhos = ", ".join(f"{r:g}" for r in mine["rho"])
        said = "; ".join(f"ρ = {r['rho']:g}: " + ("not measured" if r["median"] is None else
                                                   f"median log10 ratio {r['median']:.2f} "
                                                   f"({r['shape']})")
                         for _, r in mine.iterrows())
        judged = mine["agrees"].dropna()
        ok = None if judged.empty else bool(judged.all())
        claims.append(judge("G-F31", f"{text} (ρ = {rhos})", ok, said,
                            bool(mine["partial"].any())))
    return claims


def temporal_gradients_report(runs: SweepRuns, histories: Histories | None) -> Report:
    """Report of ``spectral-temporal-gradients``: the table and G's claims; with histories,
    the figure."""
    figures = [] if histories is None else [norm_curves(runs, histories)]
    cells = ratio_cells(runs)
    return Report(runs=runs, tables=[ratio_table(runs, cells)], figures=figures,
                  claims=ratio_claims(cells))
