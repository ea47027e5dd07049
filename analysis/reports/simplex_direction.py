"""Report of ``simplex-direction`` (paper G §4.1.2, EXPERIMENTS.md G-T41): G Table 4.1, the
iterations until convergence on the adding problem, mean over the runs of each descent
direction (the anti-gradient, the simplex direction, the simplex direction with conditional
switching), beside the published means (:data:`analysis.published.galvan.TABLE_4_1`); and
G Fig. 4.2, the validation loss against iterations per direction, the directions drawn on
the same seeds (:func:`loss_curves`).

A run *converged* when the trainer's outcome is ``solved`` (validation error < 1 %, G §4.1);
its iterations are the summary ``iters_to_solve``. The mean is over the converged runs; runs
that did not converge within their budget are counted beside it and left out of the mean
(their count would be at least the budget), and a direction none of whose runs converged
ranks after every direction with converged runs in the verdict (slower than any of them,
though by how much is unknown). The ratio to the gradient's mean is shown too,
since a reduced profile's counts are not comparable with G's but the ratio may be.

ψ is not in the thesis; the notes give G's code's (:data:`~analysis.published.galvan.
TABLE_4_1_SWITCH_NORM`) beside the sweep's.
G's order is ambiguous: Table 4.1's means put the switching variant first and the simplex
direction last, while Fig. 4.2's caption has the simplex direction second and the gradient
last (:data:`~analysis.published.galvan.FIG_4_2_ORDER`). Both agree that the switching
variant converges first; that is the verdict's claim, and both orders are printed.
"""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.figure import Figure as MplFigure

from analysis.claims import Claim, judge
from analysis.figures import Figure
from analysis.groups import done_runs, group, protocol_notes
from analysis.load import Histories, SweepRuns, numeric_values, param_values
from analysis.published.galvan import (
    FIG_4_2_ORDER,
    SYNTHETIC_PROTOCOL,
    TABLE_4_1,
    TABLE_4_1_RUNS,
    TABLE_4_1_SEQ_LEN,
    TABLE_4_1_SWITCH_NORM,
)
from analysis.report import Report, provenance
from analysis.reports.spectral_init import budget_notes
from analysis.tables import Cell, Table
from sweeps import contract

DIRECTIONS: dict[str, str] = contract.DIRECTION_NAMES
"""Direction -> G's name of it (the one table run names use too)."""
ITERS = "iters_to_solve"
"""Trial summary: iterations until the run converged."""
LOSS = "val_loss"
"""Stepwise metric of Fig. 4.2 (the validation loss, mean squared error)."""


def direction_cells(runs: SweepRuns) -> pd.DataFrame:
    """One row per direction: the group's counts, ``converged`` and ``not_converged`` (runs
    that trained to their end and did or did not converge), ``mean`` (iterations, over the
    converged runs), ``ratio`` (mean over the gradient's mean) and ``published``."""
    rows = []
    for direction in DIRECTIONS:
        g = group(runs, {"direction": direction})
        done = g.done
        ok = done[done["outcome"] == "solved"]
        iters = ok.get(f"metrics.{ITERS}", pd.Series(dtype="float64")).dropna()
        rows.append({"direction": direction, **g.counts(), "count": g.count_text(),
                     "converged": len(ok), "not_converged": len(done) - len(ok),
                     "mean": float(iters.mean()) if len(iters) else None,
                     "published": TABLE_4_1[direction]})
    cells = pd.DataFrame.from_records(rows)
    base = cells.loc[cells["direction"] == "gradient", "mean"].iloc[0]
    cells["ratio"] = [None if pd.isna(m) or pd.isna(base) else m / base for m in cells["mean"]]
    return cells


def _ranked(cells: pd.DataFrame) -> dict[str, float | None]:
    """Direction -> the value it is ranked by: its mean iterations over the converged runs;
    infinity when it has finished runs and none converged (each ran out of its budget, so
    it is slower than any run that converged within it); None when nothing is known."""
    ranked: dict[str, float | None] = {}
    for _, r in cells.iterrows():
        if r["converged"] == 0 and r["n_done"] > 0:
            ranked[r["direction"]] = math.inf
        else:
            ranked[r["direction"]] = None if pd.isna(r["mean"]) else float(r["mean"])
    return ranked


def _order(values: dict[str, float | None]) -> list[str]:
    """Directions by ascending value, those without one left out."""
    known = {d: v for d, v in values.items() if v is not None and not math.isnan(v)}
    return sorted(known, key=known.__getitem__)


def _switch_first(ranked: dict[str, float | None]) -> bool | None:
    """Whether the switching variant converged in fewer iterations than both other
    directions (None while one of them has no finished run, or when no run of any direction
    converged: three budgets run out order nothing): the decision of both the table's verdict
    note and the G-T41 claim."""
    known = {d: v for d, v in ranked.items() if v is not None}
    if len(known) < len(ranked) or all(math.isinf(v) for v in known.values()):
        return None
    switch = known["simplex_switch"]
    return not math.isinf(switch) and all(
        switch < v for d, v in known.items() if d != "simplex_switch")


def _said(direction: str, value: float | None) -> str:
    name = DIRECTIONS[direction]
    if value is None:
        return f"{name} not measured"
    return f"{name} none converged" if math.isinf(value) else f"{name} {value:,.0f}"


def verdict(cells: pd.DataFrame) -> list[str]:
    """The measured order beside G's two, and whether the switching variant is first (a
    direction none of whose runs converged ranks after those with converged runs)."""
    ranked = _ranked(cells)
    measured = _order(ranked)
    names = [DIRECTIONS[d] + (" (none converged)" if math.isinf(ranked[d] or 0.0) else "")
             for d in measured]
    if all(math.isinf(ranked[d] or 0.0) for d in measured):
        names = []
    line = "Measured order (fastest first): " + (", ".join(names) or "none converged") + \
        "; Table 4.1's: " + ", ".join(DIRECTIONS[d] for d in _order(dict(TABLE_4_1))) + \
        "; Fig. 4.2's caption: " + ", ".join(DIRECTIONS[d] for d in FIG_4_2_ORDER) + "."
    first = _switch_first(ranked)
    if first:
        result = "Verdict: as G — the simplex direction with switching converges first."
    elif first is not None:
        result = "Verdict: differs from G — the simplex direction with switching does not " \
                 "converge first."
    elif all(v is not None for v in ranked.values()):
        result = "Verdict: none — no run of any direction converged within its budget."
    else:
        result = "Verdict: none — some direction has no finished run."
    return [result, line]


def simplex_table(runs: SweepRuns, cells: pd.DataFrame | None = None) -> Table:
    """G Table 4.1: mean iterations to converge per direction, published beside."""
    cells = direction_cells(runs) if cells is None else cells
    base = TABLE_4_1["gradient"]
    rows = []
    for _, r in cells.iterrows():
        partial = bool(r["partial"])  # runs missing; unconverged ones are counted apart
        mean = Cell("none converged") if r["converged"] == 0 and r["n_done"] > 0 else Cell(
            r["mean"], ",.0f", partial)
        rows.append([DIRECTIONS[r["direction"]], mean,
                     Cell(r["published"], ",d"), Cell(r["ratio"], ".2f", partial),
                     Cell(r["published"] / base, ".2f"), int(r["converged"]),
                     int(r["not_converged"]), r["count"]])
    lengths = numeric_values(runs.runs, "seq_len", int)
    psi = numeric_values(runs.runs, "switch_norm")
    notes = [
        *verdict(cells),
        "Iterations: mean over the runs that converged (validation error < 1 %); runs that "
        "did not converge within their budget are counted under 'not converged' and left "
        "out of the mean.",
        f"Published: Galvan, Table 4.1 (adding, T = {TABLE_4_1_SEQ_LEN}, mean of "
        f"{TABLE_4_1_RUNS} runs).",
        f"T = {', '.join(map(str, lengths)) or '?'}"
        + (f"; ψ = {', '.join(format(v, 'g') for v in psi)} (G's code: "
           f"{TABLE_4_1_SWITCH_NORM:g}; the thesis gives none)" if psi else "") + ".",
        *protocol_notes(runs, {**SYNTHETIC_PROTOCOL, "seq_len": TABLE_4_1_SEQ_LEN},
                        "the iteration count"),
        *budget_notes(runs),
    ]
    return Table(name="simplex-direction", title="G Table 4.1 — iterations to converge on "
                 "adding per descent direction",
                 columns=["direction", "iterations", "paper", "÷ gradient", "÷ gradient "
                          "(paper)", "converged", "not converged", "configurations"],
                 rows=rows, provenance=provenance(runs), notes=notes)


def _finished_by_seed(runs: pd.DataFrame) -> dict[int, pd.Series]:
    """Seed -> the run of that seed that trained to its end (runs without a seed left out)."""
    done = done_runs(runs)
    seeds = param_values(done, "seed")
    return {int(seed): run for seed, (_, run) in zip(seeds, done.iterrows(), strict=True)
            if isinstance(seed, (int, float)) and seed == seed}


def _iterations(run: pd.Series) -> float:
    """A finished run's iterations to converge; infinity when it did not converge."""
    iters = run.get(f"metrics.{ITERS}")
    return float(iters) if run["outcome"] == "solved" and pd.notna(iters) else math.inf


def shown_seed(gradient: dict[int, pd.Series], seeds: list[int]) -> int | None:
    """The seed Fig. 4.2 draws bold for every direction: among ``seeds`` (those every
    direction finished), the one whose anti-gradient run is the median by iterations to
    converge (unconverged runs last, ties to the lower seed), the lower median. Chosen on the
    baseline alone, so that no direction picks the seed that suits it; None without seeds."""
    if not seeds:
        return None
    order = sorted(seeds, key=lambda s: (_iterations(gradient[s]), s))
    return order[(len(order) - 1) // 2]


def loss_curves(runs: SweepRuns, histories: Histories) -> Figure:
    """G Fig. 4.2: validation loss against iterations per direction, log scale. The
    directions are compared on the same seeds (the same initial weights; all runs share the
    data and β): every seed that each direction finished is drawn, :func:`shown_seed` bold
    and labelled with its seed, the others faint, so that the spread between seeds stands
    beside the difference between directions."""
    finished = {d: _finished_by_seed(group(runs, {"direction": d}).runs) for d in DIRECTIONS}
    notes = [f"No {name} run trained to its end." for d, name in DIRECTIONS.items()
             if not finished[d]]
    seeds = sorted(set.intersection(*(set(f) for f in finished.values())))
    left = sorted(set().union(*(set(f) for f in finished.values())) - set(seeds))
    if left:
        notes.append(f"Seed{'s' if len(left) > 1 else ''} {', '.join(map(str, left))} left "
                     "out: not every direction finished it.")
    shown = shown_seed(finished["gradient"], seeds)
    rows = []
    for direction in DIRECTIONS:
        for seed in seeds:
            run_id = str(finished[direction][seed]["run_id"])
            history = histories.get(run_id, LOSS)
            rows.append(pd.DataFrame({"direction": direction, "seed": seed, "shown":
                                      seed == shown, "run_id": run_id, "step": history["step"],
                                      "loss": history["value"]}))
    columns = ["direction", "seed", "shown", "run_id", "step", "loss"]
    data = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=columns)
    if shown is not None:
        others = [s for s in seeds if s != shown]
        notes.insert(0, f"Bold: seed {shown} for every direction, the seed whose anti-gradient "
                        "run is the median by iterations to converge (unconverged runs last, "
                        "ties to the lower seed) among the seeds every direction finished"
                        + (f"; faint: seed{'s' if len(others) > 1 else ''} "
                           f"{', '.join(map(str, others))}" if others else "")
                        + ". Lines of one seed start from the same weights.")

    notes.extend(_coinciding(data))

    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        ax = fig.add_subplot()
        for i, (direction, name) in enumerate(DIRECTIONS.items()):
            mine = data[data["direction"] == direction]
            for seed, series in mine.groupby("seed", sort=True):
                if series["shown"].iloc[0]:
                    ax.plot(series["step"], series["loss"], color=f"C{i}", linewidth=1.8,
                            label=f"{name} (seed {seed})", zorder=3)
                else:
                    ax.plot(series["step"], series["loss"], color=f"C{i}", linewidth=0.8,
                            alpha=0.35)
        if len(data) and (data["loss"] > 0).all():
            ax.set_yscale("log")
        ax.set_xlabel("iteration")
        ax.set_ylabel("validation loss (MSE)")
        if len(data):
            ax.legend(fontsize=8)

    sweep = runs.sweep
    return Figure(name="simplex-loss", data=data[columns], draw=draw, notes=notes,
                  title=f"G Fig. 4.2 — validation loss per descent direction · {sweep.spec} · "
                        f"{sweep.profile} · sweep {sweep.sweep_id}")


def _coinciding(data: pd.DataFrame) -> list[str]:
    """A note for each direction whose bold curve lies exactly under a later direction's (the
    switching variant whose switch never fired, say), which the figure cannot show."""
    bold = {d: list(s["loss"]) for d, s in data[data["shown"]].groupby("direction", sort=False)}
    order = [d for d in DIRECTIONS if d in bold]
    notes = []
    for i, a in enumerate(order):
        over = next((b for b in order[i + 1:] if bold[b] == bold[a]), None)
        if over is not None:
            notes.append(f"{DIRECTIONS[a]}'s curve lies under {DIRECTIONS[over]}'s: their "
                         "validation losses are equal at every evaluation.")
    return notes


def simplex_report(runs: SweepRuns, histories: Histories | None) -> Report:
    """Report of ``simplex-direction``: Table 4.1 and G's claim; with histories, Fig. 4.2."""
    cells = direction_cells(runs)
    figures = [] if histories is None else [loss_curves(runs, histories)]
    return Report(runs=runs, tables=[simplex_table(runs, cells)], figures=figures,
                  claims=[simplex_claim(cells)])


def simplex_claim(cells: pd.DataFrame) -> Claim:
    """G-T41: the simplex direction with switching converges first (the claim Table 4.1 and
    Fig. 4.2 agree on), on the mean iterations of the converged runs; a direction none of
    whose runs converged is slower than one with converged runs (:func:`_ranked`)."""
    ranked = _ranked(cells)
    published = ", ".join(f"{TABLE_4_1[d]:,}" for d in DIRECTIONS)
    partial = bool(cells["partial"].any())
    said = ", ".join(_said(d, ranked[d]) for d in ("simplex_switch", "gradient", "simplex"))
    return judge("G-T41", "the simplex direction with switching converges in the fewest "
                 f"iterations (paper, gradient / simplex / switching: {published})",
                 _switch_first(ranked), said,
                 partial)
