"""Report of ``synthetic-max-length`` (paper M §III-A, EXPERIMENTS.md M-T1, M-F2): Table I, the
largest sequence length T each model solves on each problem with the α (and λ) that reached
it, beside the published table (:data:`analysis.published.manchev.TABLE_I`); the same as a
bar chart; and Fig. 2, ρ(W_hh) and ‖∇W_hh‖ over training at one T for the three models.

Choice rule (Table I): the paper reports, per problem and model, "the maximum T" over its
grid and the parameters that reached it, without a tie-break. Here the configuration with the
largest ``max_seq_len_solved`` wins; ties go to the fewest ``iters_to_solve`` (reached it
sooner), then the smaller α, then the smaller λ, then the run id (only for determinism).
With repeats, each seed is its own configuration, so the best seed counts, as a single run
did in the paper.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as MplFigure

from analysis.claims import Claim, evidence, judge, ordered
from analysis.figures import Figure
from analysis.groups import count_text, group, matching, protocol_notes, rank
from analysis.load import Histories, SweepRuns, numeric_values, param_values
from analysis.published.manchev import FIG2_T, PAPER_PROTOCOL, TABLE_I, PublishedMaxLength
from analysis.report import Report, expected, provenance
from analysis.tables import OUTSIDE, Cell, Table
from sweeps import contract

MODELS: dict[str, str] = {"plain": "SRNN", "open": "SRNN+OPEN", "oinit": "SRNN+OINIT"}
"""Variant -> the paper's model name."""
PROBLEMS: dict[str, str] = contract.TASK_NAMES
"""Task -> the paper's problem name (the one table run names use too)."""

MAX_LEN = "max_seq_len_solved"
"""Trial summary: the largest T solved (0 when the starting T was not)."""
ITERS = "iters_to_solve"
"""Trial summary used as the first tie-break (fewer is better)."""
FIG2_TASK = "temporal_order"
"""The problem of M Fig. 2."""
FIG2_METRICS: dict[str, str] = {"spectral_radius": r"$\rho(W_{hh})$",
                                "grad_norm_whh": r"$\|\nabla W_{hh}\|$"}
"""Metric -> axis label of the two panels of Fig. 2."""


def rank_max_length(cell: pd.DataFrame) -> pd.DataFrame:
    """The cell's finished configurations by Table I's rule, best first (:func:`rank` on
    ``max_seq_len_solved``, fewest ``iters_to_solve`` first among ties)."""
    return rank(cell, MAX_LEN, (ITERS,))


def max_length_cells(runs: SweepRuns) -> pd.DataFrame:
    """One row per (task, variant) the sweep defines or holds: counts, the chosen run and its
    values, and the published ones.

    Columns: ``task``, ``variant``, ``n_expected`` (None when the spec is unknown),
    ``n_runs`` (configurations tracked), ``n_done`` (trained to their end: solved, unsolved,
    diverged), ``n_failed``, ``n_diverged``, ``partial``, ``run_id`` (chosen), ``max_len``,
    ``lr``, ``penalty`` and ``published`` (a :class:`PublishedMaxLength` or None).
    """
    frame, spec = runs.runs, expected(runs)
    pairs: list[tuple[str, str]] = []
    sources = [(param_values(frame, "task"), param_values(frame, "variant"))]
    if spec is not None and {"task", "variant"} <= set(spec.columns):
        sources.insert(0, (spec["task"], spec["variant"]))
    for tasks, variants in sources:
        for pair in zip(tasks, variants, strict=True):
            if pair not in pairs and all(isinstance(p, str) for p in pair):
                pairs.append(pair)
    rows = []
    for task, variant in sorted(pairs, key=_order):
        g = group(runs, {"task": task, "variant": variant})
        ranked = rank_max_length(g.runs)
        best = ranked.iloc[0] if len(ranked) else None
        rows.append({
            "task": task, "variant": variant, **g.counts(),
            "run_id": None if best is None else best["run_id"],
            "max_len": None if best is None else int(best[f"metrics.{MAX_LEN}"]),
            "lr": None if best is None else best.get("params.lr"),
            "penalty": None if best is None else best.get("params.penalty"),
            "published": TABLE_I.get((task, variant))})
    return pd.DataFrame.from_records(rows, columns=[
        "task", "variant", "n_expected", "n_runs", "n_done", "n_failed", "n_diverged",
        "partial", "run_id", "max_len", "lr", "penalty", "published"])


def _order(pair: tuple[str, str]) -> tuple[int, str, int, str]:
    task, variant = pair
    tasks, variants = list(PROBLEMS), list(MODELS)
    return (tasks.index(task) if task in tasks else len(tasks), task,
            variants.index(variant) if variant in variants else len(variants), variant)


def _count_text(row: pd.Series) -> str:
    """The count of a :func:`max_length_cells` row (see :func:`analysis.groups.count_text`)."""
    of = row["n_runs"] if pd.isna(row["n_expected"]) else row["n_expected"]
    return count_text(int(row["n_done"]), int(of), int(row["n_failed"]),
                      int(row["n_diverged"]))


def max_length_table(runs: SweepRuns, cells: pd.DataFrame | None = None) -> Table:
    """M Table I: per problem and model, max T with the chosen α and λ, published beside."""
    cells = max_length_cells(runs) if cells is None else cells
    held = {(r["task"], r["variant"]): r for _, r in cells.iterrows()}
    rows = []
    for pair in sorted(set(held) | set(TABLE_I), key=_order):
        if pair not in held:
            paper = TABLE_I[pair]
            rows.append([PROBLEMS.get(pair[0], pair[0]), MODELS.get(pair[1], pair[1]), OUTSIDE,
                         Cell(paper.max_len, "d"), OUTSIDE, Cell(paper.lr, "g"),
                         OUTSIDE if pair[1] == "open" else Cell(None), Cell(paper.penalty, "g"),
                         OUTSIDE])
            continue
        r = held[pair]
        pub: PublishedMaxLength | None = r["published"]
        has_penalty = r["variant"] == "open"
        partial = bool(r["partial"])
        rows.append([
            PROBLEMS.get(r["task"], r["task"]), MODELS.get(r["variant"], r["variant"]),
            Cell(r["max_len"], "d", partial),
            Cell(None if pub is None else pub.max_len, "d"),
            Cell(r["lr"], "g", partial),
            Cell(None if pub is None else pub.lr, "g"),
            Cell(r["penalty"] if has_penalty else None, "g", partial and has_penalty),
            Cell(None if pub is None else pub.penalty, "g"),
            _count_text(r)])
    notes = [
        "Chosen per problem and model: the configuration with the largest T solved; ties go to "
        "the fewest iterations to solve, then the smaller α, then the smaller λ.",
        "configurations = trained to their end / defined by the spec (failed and diverged "
        "counted); 0 = the starting T was not solved.",
        "Published: Manchev & Spratling, Table I (SRNN, SRNN+OPEN, SRNN+OINIT; tanh, 100 "
        "hidden units, SGD, batch 20, ≤ 100,000 iterations).",
    ]
    notes += protocol_notes(runs, PAPER_PROTOCOL, "T") + _threshold_notes(runs)
    open_runs = runs.runs[matching(runs.runs, {"variant": "open"})]
    if _penalty_forms(open_runs).nunique() > 1:
        notes.append("SRNN+OPEN is chosen over both penalty forms; the table "
                     "max-length-penalty-form compares them.")
    missing = sorted({t for t, _ in TABLE_I} - set(cells["task"]), key=list(PROBLEMS).index)
    if missing:
        notes.append(f"Not in profile {runs.sweep.profile}: "
                     + ", ".join(PROBLEMS[t] for t in missing) + ".")
    return Table(name="max-length", title="M Table I — maximal sequence length by model",
                 columns=["Problem", "Model", "T", "T (paper)", "α", "α (paper)", "λ",
                          "λ (paper)", "configurations"],
                 rows=rows, provenance=provenance(runs), notes=notes)


def _threshold_notes(runs: SweepRuns) -> list[str]:
    """Which success threshold the adding problem used (EXPERIMENTS.md: a parameter)."""
    frame = runs.runs
    values = numeric_values(frame[param_values(frame, "task") == "adding"], "error_threshold")
    if not values:
        return []
    return ["Adding: a sample counts as wrong when (y − t)² > error_threshold = "
            + ", ".join(format(v, "g") for v in values)
            + " (0.04: M's reference code; M's text, |y − t| < 10⁻⁴, is 1e-08)."]


def max_length_bars(runs: SweepRuns, cells: pd.DataFrame | None = None) -> Figure:
    """Table I as grouped bars: reproduced max T per problem and model (hatched when the
    cell is partial) with the published value as a black tick."""
    cells = max_length_cells(runs) if cells is None else cells
    data = pd.DataFrame({
        "task": cells["task"], "variant": cells["variant"],
        "measured": pd.to_numeric(cells["max_len"], errors="coerce").astype("float64"),
        "published": [np.nan if p is None else float(p.max_len) for p in cells["published"]],
        "partial": cells["partial"].astype(bool)})

    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        ax = fig.add_subplot()
        tasks = list(dict.fromkeys(data["task"]))
        variants = list(dict.fromkeys(data["variant"]))
        width = 0.8 / max(len(variants), 1)
        for j, variant in enumerate(variants):
            rows = data[data["variant"] == variant].set_index("task").reindex(tasks)
            x = np.arange(len(tasks)) + (j - (len(variants) - 1) / 2) * width
            bars = ax.bar(x, rows["measured"].fillna(0.0), width,
                          label=MODELS.get(variant, variant))
            for bar, partial, measured in zip(bars, rows["partial"].fillna(True),
                                              rows["measured"], strict=True):
                if partial:
                    bar.set_hatch("//")
                if np.isnan(measured):
                    ax.annotate("missing", (bar.get_x() + bar.get_width() / 2, 0),
                                ha="center", va="bottom", rotation=90, fontsize=8)
            ax.scatter(x, rows["published"], marker="_", s=300, color="black", zorder=3,
                       label="paper" if j == 0 else None)
        ax.set_xticks(np.arange(len(tasks)), [PROBLEMS.get(t, t) for t in tasks])
        ax.set_ylabel("maximal T solved")
        ax.legend(fontsize=8)

    sweep = runs.sweep
    partial = " (partial: hatched)" if data["partial"].any() else ""
    return Figure(name="max-length-bars", data=data, draw=draw,
                  title=f"M Table I as bars — {sweep.spec} · {sweep.profile} · "
                        f"sweep {sweep.sweep_id}{partial}")


def _stage_lengths(runs: pd.DataFrame, histories: Histories) -> dict[str, pd.DataFrame]:
    """Per run: the sequence length at every evaluated step (columns ``step``, ``seq_len``),
    from its ``seq_len`` metric, or its ``seq_len`` param when it logged none."""
    out = {}
    for _, run in runs.iterrows():
        history = histories.get(run["run_id"], "seq_len")
        if history.empty and run.get("params.seq_len") is not None:
            steps = histories.get(run["run_id"], next(iter(FIG2_METRICS)))["step"]
            history = pd.DataFrame({"step": steps, "value": float(run["params.seq_len"])})
        out[run["run_id"]] = history.rename(columns={"value": "seq_len"})
    return out


def fig2_data(runs: SweepRuns, histories: Histories
              ) -> tuple[pd.DataFrame, int | None, list[str]]:
    """The series of M Fig. 2: for each model, ρ(W_hh) and ‖∇W_hh‖ of one run while it
    trained at sequence length T on the temporal order problem (:data:`FIG2_TASK`).

    The run of a model is its best configuration on that task by the Table I rule among those
    that trained at T. T is the paper's 60 when every model has such a run, else the largest
    T every model has one at (a reduced profile rarely reaches 60); where the models that ran
    share no T, there is no data and T is None, and a note names each model's lengths.
    Returns the data (columns ``variant``, ``run_id``, ``metric``, ``step``, ``iteration``,
    ``value``; ``iteration`` counts the iterations trained at T, from the last step
    evaluated at the previous length, since a run's steps run on across lengths), the T
    used, and notes on what was chosen or is missing.
    """
    frame, task = runs.runs, FIG2_TASK
    ranked = {v: rank_max_length(frame[matching(frame, {"task": task, "variant": v})])
              for v in MODELS}
    ranked = {v: r for v, r in ranked.items() if len(r)}
    notes = [f"No {MODELS[v]} run of {task} trained to its end."
             for v in MODELS if v not in ranked]
    stages = {v: _stage_lengths(r, histories) for v, r in ranked.items()}
    lengths = {v: set().union(*(set(h["seq_len"].astype(int)) for h in s.values()))
               for v, s in stages.items()}
    common = set.intersection(*lengths.values()) if lengths else set()
    columns = ["variant", "run_id", "metric", "step", "iteration", "value"]
    if not common:
        if ranked:
            notes.append("No T at which a run of every model trained: " + "; ".join(
                f"{MODELS[v]} at T = {', '.join(map(str, sorted(t))) or 'none logged'}"
                for v, t in lengths.items()) + ".")
        return pd.DataFrame(columns=columns), None, notes
    seq_len = FIG2_T if FIG2_T in common else max(common)
    if seq_len != FIG2_T:
        notes.append(f"T = {seq_len}: no run of every model trained at the paper's "
                     f"T = {FIG2_T}.")
    rows = []
    for variant, ranked_runs in ranked.items():
        chosen = next(rid for rid in ranked_runs["run_id"]
                      if seq_len in set(stages[variant][rid]["seq_len"].astype(int)))
        stage = stages[variant][chosen]
        steps = set(stage.loc[stage["seq_len"] == seq_len, "step"])
        before = stage.loc[stage["step"] < min(steps), "step"]
        start = int(before.max()) if len(before) else 0
        for metric in FIG2_METRICS:
            history = histories.get(chosen, metric)
            history = history[history["step"].isin(steps)]
            rows.append(pd.DataFrame({
                "variant": variant, "run_id": chosen, "metric": metric,
                "step": history["step"], "iteration": history["step"] - start,
                "value": history["value"]}))
    return pd.concat(rows, ignore_index=True)[columns], seq_len, notes


def fig2(runs: SweepRuns, histories: Histories) -> Figure:
    """M Fig. 2: ρ(W_hh) (left) and ‖∇W_hh‖ (right, log scale) against iterations at one T
    for SRNN, SRNN+OPEN and SRNN+OINIT (data: :func:`fig2_data`)."""
    data, used, notes = fig2_data(runs, histories)
    at = "no common T" if used is None else f"T = {used}"

    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        axes = fig.subplots(1, len(FIG2_METRICS))
        for ax, (metric, label) in zip(axes, FIG2_METRICS.items(), strict=True):
            for variant in MODELS:
                series = data[(data["variant"] == variant) & (data["metric"] == metric)]
                if len(series):
                    ax.plot(series["iteration"], series["value"], label=MODELS[variant])
            if metric == "spectral_radius":
                ax.axhline(1.0, color="grey", linestyle="--", linewidth=0.8)
            elif (data.loc[data["metric"] == metric, "value"] > 0).all() and len(data):
                ax.set_yscale("log")
            ax.set_xlabel(f"iteration at {at}")
            ax.set_ylabel(label)
            ax.legend(fontsize=8)

    sweep = runs.sweep
    missing = " (partial)" if notes and set(data["variant"]) != set(MODELS) else ""
    return Figure(name="fig2-spectral-radius", data=data, draw=draw, notes=notes,
                  title=f"M Fig. 2 — {PROBLEMS[FIG2_TASK]}, {at}{missing} · "
                        f"{sweep.spec} · {sweep.profile} · sweep {sweep.sweep_id}")


PENALTY_FORMS: dict[str, str] = {"squared": "λ‖WWᵀ − I‖²_F (M's text)",
                                 "unsquared": "λ‖WWᵀ − I‖_F (M's code)"}
"""``penalty_form`` -> the OPEN term it adds the gradient of."""


def _penalty_forms(frame: pd.DataFrame) -> pd.Series:
    """Each run's ``penalty_form`` (a run tracked before the option existed: ``squared``)."""
    return param_values(frame, "penalty_form").map(
        lambda v: v if isinstance(v, str) else "squared")


def penalty_form_table(runs: SweepRuns) -> Table | None:
    """SRNN+OPEN's max T under each penalty form (issue 9, item 6), one row per problem, α
    and λ, the two forms side by side; None when the sweep holds OPEN runs of one form only."""
    frame = runs.runs[matching(runs.runs, {"variant": "open"})]
    forms = _penalty_forms(frame)
    if forms.nunique() < 2:
        return None
    rows: list[list[object]] = []
    best: dict[tuple[str, str], int] = {}
    keys = frame.assign(_t=param_values(frame, "task"), _a=param_values(frame, "lr"),
                        _l=param_values(frame, "penalty"))
    for (task, lr, penalty), cell in keys.groupby(["_t", "_a", "_l"], sort=True):
        row: list[object] = [PROBLEMS.get(task, task), Cell(lr, "g"), Cell(penalty, "g")]
        for form in PENALTY_FORMS:
            ranked = rank_max_length(cell[_penalty_forms(cell) == form])
            value = None if ranked.empty else int(ranked.iloc[0][f"metrics.{MAX_LEN}"])
            row.append(Cell(value, "d", value is None))
            if value is not None:
                best[task, form] = max(best.get((task, form), 0), value)
        rows.append(row)
    notes = ["OPEN adds the gradient of λ‖WWᵀ − I‖²_F (M eqs. 29-31, penalty_form squared) or "
             "of λ‖WWᵀ − I‖_F (M's reference code, unsquared), with which M tuned the "
             "published λ; T = the largest sequence length solved (0: the first was not)."]
    notes += [f"{PROBLEMS.get(t, t)}: best T {best.get((t, 'squared'), 0)} (squared) vs "
              f"{best.get((t, 'unsquared'), 0)} (unsquared)."
              for t in sorted({t for t, _ in best})]
    return Table(name="max-length-penalty-form", title="SRNN+OPEN — maximal T per penalty "
                 "form", columns=["Problem", "α", "λ", *(f"T, {f}" for f in PENALTY_FORMS)],
                 rows=rows, provenance=provenance(runs), notes=notes)


def table_i_claims(runs: SweepRuns, cells: pd.DataFrame) -> list[Claim]:
    """M-T1, per problem: orthogonality lengthens the sequences solved, SRNN ≤ SRNN+OPEN ≤
    SRNN+OINIT in maximal T with SRNN+OINIT beyond SRNN (Table I; it holds on all four
    problems, adding's SRNN and SRNN+OPEN tie)."""
    claims = []
    for task, problem in PROBLEMS.items():
        mine = cells[cells["task"] == task]
        published = " / ".join(str(TABLE_I[task, v].max_len) for v in MODELS)
        text = (f"{problem}: maximal T of SRNN ≤ SRNN+OPEN ≤ SRNN+OINIT, SRNN+OINIT's above "
                f"SRNN's (paper {published})")
        if mine.empty:
            claims.append(judge("M-T1", text, None,
                                f"profile {runs.sweep.profile} does not run {problem}"))
            continue
        values = {MODELS[v]: _number(mine.loc[mine["variant"] == v, "max_len"]) for v in MODELS}
        claims.append(ordered("M-T1", text, values, list(MODELS.values()), fmt=".0f",
                              partial=bool(mine["partial"].any()), rising=True))
    return claims


def _number(column: pd.Series) -> float | None:
    values = pd.to_numeric(column, errors="coerce").dropna()
    return float(values.iloc[0]) if len(values) else None


FIG2_CLAIM = "SRNN's ρ(W_hh) grows past 1, SRNN+OPEN's and SRNN+OINIT's stay near 1 (Fig. 2)"
"""M-F2 in words."""


def fig2_claim(figure: Figure | None) -> Claim:
    """M-F2: SRNN's ρ(W_hh) grows past 1 while SRNN+OPEN's and SRNN+OINIT's stay near 1;
    holds when SRNN's largest ρ over the plotted iterations exceeds 1 and each other model's
    largest |ρ − 1| is smaller than SRNN's excess. Not measured without the figure (a report
    built without metric histories)."""
    if figure is None:
        return judge("M-F2", FIG2_CLAIM, None,
                     "judged on Fig. 2's histories, read for a report with figures "
                     "(`ortho report --out DIR` or `--format html`)")
    rho = figure.data[figure.data["metric"] == "spectral_radius"]
    peak = {MODELS[v]: float(rho.loc[rho["variant"] == v, "value"].max())
            if (rho["variant"] == v).any() else None for v in MODELS}
    drift = {v: float((rho.loc[rho["variant"] == v, "value"] - 1).abs().max())
             for v in ("open", "oinit") if (rho["variant"] == v).any()}
    said = "largest ρ: " + evidence(peak)
    plain = peak["SRNN"]
    if plain is None or len(drift) < 2:
        return judge("M-F2", FIG2_CLAIM, None, said)
    return judge("M-F2", FIG2_CLAIM, plain > 1 and all(d < plain - 1 for d in drift.values()),
                 said)


def max_length_report(runs: SweepRuns, histories: Histories | None) -> Report:
    """Report of ``synthetic-max-length``: Table I and, when the sweep ran both OPEN forms,
    their comparison; with histories, Fig. 2 and the bars; the claims of Table I and of
    Fig. 2 (not measured without histories)."""
    cells = max_length_cells(runs)
    spectral = None if histories is None else fig2(runs, histories)
    figures = [] if spectral is None else [spectral, max_length_bars(runs, cells)]
    forms = penalty_form_table(runs)
    tables = [max_length_table(runs, cells), *([] if forms is None else [forms])]
    claims = [*table_i_claims(runs, cells), fig2_claim(spectral)]
    return Report(runs=runs, tables=tables, figures=figures, claims=claims)
