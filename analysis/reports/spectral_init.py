"""Report of ``spectral-init-success`` (paper G §4.1.1, EXPERIMENTS.md G-F41): G Fig. 4.1, the
rate of success over the runs of each length T on the temporal order problem for W_hh rescaled
to ρ = 1.2 (``spectral``) and for the plain Gaussian (``gaussian``, no rescaling), as a table
and a figure, with G's claim beside (:data:`analysis.published.galvan.FIG_4_1`: the plain
scheme fails beyond T = 20, the spectral one succeeds up to T = 150) and a verdict.

A run succeeds when the trainer's outcome is ``solved`` (the ``fixed`` protocol: its one
length reached G's criterion, validation error < 1 %). "Longest T solved" is the largest T
with a success rate above 0, the reading of G's "failed for sequences longer than 20" and
"managed to succeed up to sequences of length 150". The verdict holds when the spectral
initialisation's longest T solved exceeds the plain one's.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure as MplFigure

from analysis.claims import Claim, judge
from analysis.figures import Figure
from analysis.groups import Group, group, matching, protocol_notes, same
from analysis.load import Histories, SweepRuns, numeric_values, param_values
from analysis.published.galvan import FIG_4_1, FIG_4_1_RUNS, SYNTHETIC_PROTOCOL
from analysis.report import Report, expected, provenance
from analysis.tables import Cell, Table

INITS: dict[str, str] = {"gaussian": "Gaussian", "spectral": "ρ = 1.2"}
"""Fig. 4.1's two initialisations -> their names in tables and figures."""


def _is_init(values: pd.Series, init: str) -> pd.Series:
    """Which entries of a ``spectral_radius`` column belong to ``init`` (the plain Gaussian:
    no ρ, None or NaN once read back)."""
    rho = FIG_4_1[init].spectral_radius
    if rho is None:
        return values.isna()
    return values.map(lambda v: same(v, rho)).astype(bool)


def init_group(runs: SweepRuns, init: str, seq_len: int) -> Group:
    """The configurations of ``init`` at length ``seq_len``, with the spec's expected
    count."""
    frame = runs.runs
    mask = matching(frame, {"seq_len": seq_len}) & _is_init(
        param_values(frame, "spectral_radius"), init)
    spec = expected(runs)
    n_expected = None
    if spec is not None and "seq_len" in spec:
        rho = spec["spectral_radius"] if "spectral_radius" in spec else pd.Series(
            None, index=spec.index, dtype="float64")
        chosen = _is_init(rho, init) & spec["seq_len"].map(lambda v: same(v, seq_len))
        n_expected = int(spec.loc[chosen.astype(bool), "trials"].sum())
    return Group(frame[mask], n_expected)


def _lengths(runs: SweepRuns) -> list[int]:
    values = set(param_values(runs.runs, "seq_len"))
    spec = expected(runs)
    if spec is not None and "seq_len" in spec:
        values |= set(spec["seq_len"])
    return sorted({int(v) for v in values if isinstance(v, (int, float)) and v == v})


def success_cells(runs: SweepRuns) -> pd.DataFrame:
    """One row per (T, initialisation): ``seq_len``, ``init``, the group's counts,
    ``solved`` (runs that succeeded), ``rate`` (solved / finished; None when none finished)
    and ``count`` (the configurations text)."""
    rows = []
    for seq_len in _lengths(runs):
        for init in INITS:
            g = init_group(runs, init, seq_len)
            done = g.done
            solved = int((done["outcome"] == "solved").sum())
            rows.append({"seq_len": seq_len, "init": init, **g.counts(), "solved": solved,
                         "rate": solved / len(done) if len(done) else None,
                         "count": g.count_text()})
    return pd.DataFrame.from_records(rows, columns=[
        "seq_len", "init", "n_expected", "n_runs", "n_done", "n_failed", "n_diverged",
        "partial", "solved", "rate", "count"])


def longest_solved(cells: pd.DataFrame, init: str) -> int | None:
    """The largest T with a success rate above 0 for ``init`` (None: none)."""
    rows = cells[(cells["init"] == init) & (cells["solved"] > 0)]
    return int(rows["seq_len"].max()) if len(rows) else None


def verdict(cells: pd.DataFrame) -> str:
    """The verdict line: whether ρ = 1.2 solves longer sequences than the plain Gaussian."""
    plain, spectral = longest_solved(cells, "gaussian"), longest_solved(cells, "spectral")
    failing = cells.pivot(index="seq_len", columns="init", values="rate")
    shown = [int(t) for t, r in failing.iterrows()
             if r.get("gaussian") == 0 and (r.get("spectral") or 0) > 0]
    if spectral is not None and (plain is None or spectral > plain):
        where = f" (the plain one fails at T = {', '.join(map(str, shown))})" if shown else ""
        return ("Verdict: as G — ρ = 1.2 solves longer sequences than the plain Gaussian"
                f"{where}.")
    return "Verdict: differs from G — ρ = 1.2 does not solve longer sequences than the plain " \
           "Gaussian here."


def budget_notes(runs: SweepRuns) -> list[str]:
    """The sweep's budget per run beside G's failure rule (G §4.1: no budget; a run fails
    once the loss has not decreased for 3·10⁶ iterations)."""
    frame = runs.runs
    iters = numeric_values(frame, "max_iters", int)
    patience = numeric_values(frame, "patience", int)
    if not iters:
        return []
    rule = (f"failed when the validation loss has not decreased for "
            f"{', '.join(f'{p:,}' for p in patience)} iterations" if patience
            else "no failure rule")
    return [f"Budget: at most {', '.join(f'{i:,}' for i in iters)} iterations per run, {rule} "
            f"(G: no budget; failed after {SYNTHETIC_PROTOCOL['patience_iters']:,.0f} "
            "iterations without a decrease)."]


def success_table(runs: SweepRuns, cells: pd.DataFrame | None = None) -> Table:
    """G Fig. 4.1 as a table: per T the success rate of each initialisation."""
    cells = success_cells(runs) if cells is None else cells
    rows = []
    for seq_len, block in cells.groupby("seq_len", sort=True):
        row: list[object] = [int(seq_len)]
        solved = []
        for init in INITS:
            r = block[block["init"] == init].iloc[0]
            partial = bool(r["partial"])
            row.append(Cell(None if r["rate"] is None else 100 * r["rate"], ".0f", partial))
            solved.append(f"{r['solved']}/{r['n_done']}")
        rows.append([*row, *solved, group(runs, {"seq_len": int(seq_len)}).count_text()])
    notes = [
        verdict(cells),
        "Success %: runs that reached G's criterion (validation error < 1 %) among those that "
        "trained to their end (solved: succeeded / trained to their end); configurations: "
        "trained to their end / defined by the spec, both initialisations.",
        f"Published: Galvan, Fig. 4.1 (mean of {FIG_4_1_RUNS} runs, SGD with clipping, temporal "
        f"order): the plain Gaussian fails beyond T = {FIG_4_1['gaussian'].max_solved_len}, "
        f"ρ = {FIG_4_1['spectral'].spectral_radius:g} succeeds up to "
        f"T = {FIG_4_1['spectral'].max_solved_len}.",
        *protocol_notes(runs, SYNTHETIC_PROTOCOL, "T"),
        *budget_notes(runs),
    ]
    return Table(name="spectral-init-success", title="G Fig. 4.1 — success rate on temporal "
                 "order against T",
                 columns=["T", *(f"{name} success %" for name in INITS.values()),
                          *(f"{name} solved" for name in INITS.values()), "configurations"],
                 rows=rows, provenance=provenance(runs), notes=notes)


def longest_table(runs: SweepRuns, cells: pd.DataFrame | None = None) -> Table:
    """Per initialisation, the longest T solved beside G's."""
    cells = success_cells(runs) if cells is None else cells
    rows = []
    for init, name in INITS.items():
        mine = cells[cells["init"] == init]
        partial = bool(mine["partial"].any())
        longest = longest_solved(cells, init)
        rows.append([name, Cell("none" if longest is None else longest, "d", partial),
                     Cell(FIG_4_1[init].max_solved_len, "d"),
                     Cell(int(mine["seq_len"].max()) if len(mine) else None, "d")])
    return Table(name="spectral-init-longest", title="G Fig. 4.1 — longest T solved per "
                 "initialisation",
                 columns=["initialisation", "longest T solved", "paper", "longest T tried"],
                 rows=rows, provenance=provenance(runs),
                 notes=["Longest T solved: the largest T at which at least one run succeeded."])


def success_figure(runs: SweepRuns, cells: pd.DataFrame | None = None) -> Figure:
    """G Fig. 4.1: success rate against T, one line per initialisation, with G's longest
    solved T as dashed verticals."""
    cells = success_cells(runs) if cells is None else cells
    data = pd.DataFrame({"seq_len": cells["seq_len"], "init": cells["init"],
                         "rate": pd.to_numeric(cells["rate"], errors="coerce"),
                         "partial": cells["partial"].astype(bool)})

    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        ax = fig.add_subplot()
        for init, name in INITS.items():
            series = data[data["init"] == init]
            line, = ax.plot(series["seq_len"], 100 * series["rate"], marker="o", label=name)
            ax.axvline(FIG_4_1[init].max_solved_len, color=line.get_color(), linestyle="--",
                       linewidth=0.8, label=f"{name}: G's longest T")
        ax.set_xlabel("T (minimal sequence length)")
        ax.set_ylabel("success %")
        ax.set_ylim(-5, 105)
        ax.legend(fontsize=8)

    sweep = runs.sweep
    partial = " (partial)" if data["partial"].any() else ""
    return Figure(name="spectral-init-success", data=data, draw=draw,
                  title=f"G Fig. 4.1 — success rate against T{partial} · {sweep.spec} · "
                        f"{sweep.profile} · sweep {sweep.sweep_id}")


def success_claim(cells: pd.DataFrame) -> Claim:
    """G-F41: ρ = 1.2 solves longer sequences than the plain Gaussian (the verdict of
    :func:`verdict`); not measured when neither initialisation has a finished run."""
    text = (f"ρ = {FIG_4_1['spectral'].spectral_radius:g} solves longer temporal-order "
            f"sequences than the plain Gaussian (paper: up to T = "
            f"{FIG_4_1['spectral'].max_solved_len} vs {FIG_4_1['gaussian'].max_solved_len})")
    longest = {f"{name} longest T solved": longest_solved(cells, init)
               for init, name in INITS.items()}
    said = ", ".join(f"{k} {'none' if v is None else v}" for k, v in longest.items())
    partial = bool(cells["partial"].any())
    if (cells["n_done"] == 0).all():
        return judge("G-F41", text, None, "no run finished")
    ok = verdict(cells).startswith("Verdict: as G")
    return judge("G-F41", text, ok, said, partial)


def spectral_init_report(runs: SweepRuns, histories: Histories | None) -> Report:
    """Report of ``spectral-init-success``: the two tables and G's claim; with histories,
    the figure."""
    cells = success_cells(runs)
    figures = [] if histories is None else [success_figure(runs, cells)]
    return Report(runs=runs, tables=[success_table(runs, cells), longest_table(runs, cells)],
                  figures=figures, claims=[success_claim(cells)])
