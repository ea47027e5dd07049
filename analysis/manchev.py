"""Paper M (Manchev & Spratling, learned orthogonality): published values, tables and figures.

Specs and what their reports hold (EXPERIMENTS.md, M-pre, M-T1, M-F2):

- ``orth-pretrain-convergence``: convergence of orthogonal pre-training (§II-A) per
  distribution of the initial matrix: success rate, mean/min/max/std steps and repeats,
  beside the published 100 % and ≈ 22.77 (normal) / ≈ 24.00 (uniform) mean steps.
- ``synthetic-max-length``: Table I, the largest sequence length T each model solves on each
  problem with the α (and λ) that reached it, beside the published table; the same as a bar
  chart; and Fig. 2, ρ(W_hh) and ‖∇W_hh‖ over training at one T for the three models.

Choice rule (Table I): the paper reports, per problem and model, "the maximum T" over its
grid and the parameters that reached it, without a tie-break. Here the configuration with the
largest ``max_seq_len_solved`` wins; ties go to the fewest ``iters_to_solve`` (reached it
sooner), then the smaller α, then the smaller λ, then the run id (only for determinism).
With repeats, each seed is its own configuration, so the best seed counts, as a single run
did in the paper.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as MplFigure

from analysis.figures import Figure
from analysis.load import DONE, Histories, SweepRuns, param_values
from analysis.report import Report, expected, provenance
from analysis.tables import Cell, Table

MODELS: dict[str, str] = {"plain": "SRNN", "open": "SRNN+OPEN", "oinit": "SRNN+OINIT"}
"""Variant -> the paper's model name."""
PROBLEMS: dict[str, str] = {"temporal_order": "Temporal Order",
                            "temporal_order_3bit": "3-bit Temporal Order",
                            "adding": "Adding", "permutation": "Random Permutation"}
"""Task -> the paper's problem name."""

MAX_LEN = "max_seq_len_solved"
"""Trial summary: the largest T solved (0 when the starting T was not)."""
ITERS = "iters_to_solve"
"""Trial summary used as the first tie-break (fewer is better)."""
PAPER_PROTOCOL: dict[str, int] = {"hidden": 100, "batch_size": 20, "max_iters": 100_000,
                                  "eval_every": 100, "val_size": 10_000, "seq_len": 10,
                                  "seq_len_step": 10}
"""M §III-A's protocol for Table I, config key -> value (to flag a reduced profile)."""
FIG2_T = 60
"""The sequence length of M Fig. 2 (temporal order problem)."""
FIG2_METRICS: dict[str, str] = {"spectral_radius": r"$\rho(W_{hh})$",
                                "grad_norm_whh": r"$\|\nabla W_{hh}\|$"}
"""Metric -> axis label of the two panels of Fig. 2."""


@dataclass(frozen=True)
class PublishedMaxLength:
    """One cell of M Table I."""

    max_len: int
    """Maximal T solved."""
    lr: float
    """α that reached it."""
    penalty: float | None = None
    """λ (SRNN+OPEN only)."""


TABLE_I: dict[tuple[str, str], PublishedMaxLength] = {
    ("temporal_order", "plain"): PublishedMaxLength(50, 0.01),
    ("temporal_order", "open"): PublishedMaxLength(80, 0.001, 1.0),
    ("temporal_order", "oinit"): PublishedMaxLength(120, 0.0001),
    ("temporal_order_3bit", "plain"): PublishedMaxLength(50, 0.1),
    ("temporal_order_3bit", "open"): PublishedMaxLength(70, 0.001, 1.0),
    ("temporal_order_3bit", "oinit"): PublishedMaxLength(90, 0.0001),
    ("adding", "plain"): PublishedMaxLength(80, 0.01),
    ("adding", "open"): PublishedMaxLength(80, 0.01, 0.0001),
    ("adding", "oinit"): PublishedMaxLength(100, 0.01),
    ("permutation", "plain"): PublishedMaxLength(90, 0.0001),
    ("permutation", "open"): PublishedMaxLength(140, 0.1, 0.01),
    ("permutation", "oinit"): PublishedMaxLength(240, 0.1),
}
"""M Table I: (task, variant) -> published maximal T and parameters."""


@dataclass(frozen=True)
class PublishedPretrain:
    """M §II-A: convergence of orthogonal pre-training of a 100×100 matrix."""

    success_rate: float
    """Fraction of repeats that reached Eᵖ < 10⁻⁶."""
    mean_steps: float
    """Mean number of pre-training steps (αₚ = 0.1)."""
    repeats: int
    """Number of repeats."""


PRETRAIN: dict[str, PublishedPretrain] = {
    "normal": PublishedPretrain(1.0, 22.77, 10_000),
    "uniform": PublishedPretrain(1.0, 24.00, 10_000),
}
"""Distribution of the initial matrix (N(0, 0.1²), U(−0.1, 0.1)) -> published result."""


def _mask(frame: pd.DataFrame, values: Mapping[str, object]) -> pd.Series | None:
    """Rows of ``frame`` whose columns equal ``values``; None if a column is absent."""
    mask = pd.Series(True, index=frame.index)
    for key, value in values.items():
        if key not in frame:
            return None
        mask &= frame[key] == value
    return mask


def _runs_mask(runs: pd.DataFrame, values: Mapping[str, object]) -> pd.Series:
    mask = pd.Series(True, index=runs.index)
    for key, value in values.items():
        mask &= param_values(runs, key) == value
    return mask


def rank(cell: pd.DataFrame) -> pd.DataFrame:
    """The cell's configurations that trained to their end and logged ``max_seq_len_solved``,
    best first by the module's choice rule."""
    runs = cell[cell["outcome"].isin(DONE)]
    if f"metrics.{MAX_LEN}" not in runs:
        return runs.iloc[0:0]
    runs = runs[runs[f"metrics.{MAX_LEN}"].notna()]
    nan = pd.Series(np.nan, index=runs.index)
    keys = pd.DataFrame({
        "t": -runs[f"metrics.{MAX_LEN}"],
        "iters": runs.get(f"metrics.{ITERS}", nan).fillna(math.inf),
        "lr": pd.to_numeric(param_values(runs, "lr"), errors="coerce").fillna(math.inf),
        "penalty": pd.to_numeric(param_values(runs, "penalty"), errors="coerce").fillna(0.0),
        "run_id": runs["run_id"]})
    order = keys.sort_values(["t", "iters", "lr", "penalty", "run_id"], kind="stable").index
    return runs.loc[order]


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
        cell = frame[_runs_mask(frame, {"task": task, "variant": variant})]
        n_expected = None
        if spec is not None:
            mask = _mask(spec, {"task": task, "variant": variant})
            n_expected = None if mask is None else int(spec.loc[mask, "trials"].sum())
        ranked = rank(cell)
        best = ranked.iloc[0] if len(ranked) else None
        n_done = int(cell["outcome"].isin(DONE).sum())
        rows.append({
            "task": task, "variant": variant, "n_expected": n_expected, "n_runs": len(cell),
            "n_done": n_done, "n_failed": int((cell["outcome"] == "failed").sum()),
            "n_diverged": int((cell["outcome"] == "diverged").sum()),
            "partial": n_done < (len(cell) if n_expected is None else n_expected),
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


def _count_text(row: Mapping[str, object]) -> str:
    of = row["n_runs"] if row["n_expected"] is None else row["n_expected"]
    extra = [f"{row[k]} {k.removeprefix('n_')}" for k in ("n_failed", "n_diverged") if row[k]]
    return f"{row['n_done']}/{of}" + (f" ({', '.join(extra)})" if extra else "")


def max_length_table(runs: SweepRuns, cells: pd.DataFrame | None = None) -> Table:
    """M Table I: per problem and model, max T with the chosen α and λ, published beside."""
    cells = max_length_cells(runs) if cells is None else cells
    rows = []
    for _, r in cells.iterrows():
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
    notes += _protocol_notes(runs) + _threshold_notes(runs)
    missing = sorted({t for t, _ in TABLE_I} - set(cells["task"]), key=list(PROBLEMS).index)
    if missing:
        notes.append(f"Not in profile {runs.sweep.profile}: "
                     + ", ".join(PROBLEMS[t] for t in missing) + ".")
    return Table(name="max-length", title="M Table I — maximal sequence length by model",
                 columns=["Problem", "Model", "T", "T (paper)", "α", "α (paper)", "λ",
                          "λ (paper)", "configurations"],
                 rows=rows, provenance=provenance(runs), notes=notes)


def _protocol_notes(runs: SweepRuns) -> list[str]:
    """The protocol settings of the sweep that differ from M's (a reduced profile)."""
    diffs = []
    for key, paper in PAPER_PROTOCOL.items():
        values = sorted({v for v in param_values(runs.runs, key)
                         if isinstance(v, (int, float)) and v == v})
        if values and values != [paper]:
            diffs.append(f"{key} = {', '.join(format(v, 'g') for v in values)} "
                         f"(paper {paper:g})")
    if not diffs:
        return []
    return ["Protocol differs from the paper's, so T is not comparable one to one: "
            + "; ".join(diffs) + "."]


def _threshold_notes(runs: SweepRuns) -> list[str]:
    """Which success threshold the adding problem used (EXPERIMENTS.md: a parameter)."""
    frame = runs.runs
    values = param_values(frame[param_values(frame, "task") == "adding"], "error_threshold")
    values = sorted({float(v) for v in values if isinstance(v, (int, float)) and v == v})
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


def fig2_data(runs: SweepRuns, histories: Histories, seq_len: int | None = None,
              task: str = "temporal_order") -> tuple[pd.DataFrame, int | None, list[str]]:
    """The series of M Fig. 2: for each model, ρ(W_hh) and ‖∇W_hh‖ of one run while it
    trained at sequence length T.

    The run of a model is its best configuration on ``task`` by the Table I rule among those
    that trained at T. T is ``seq_len``, else the paper's 60 when every model has such a
    run, else the largest T every model has one at (a reduced profile rarely reaches 60).
    Returns the data (columns ``variant``, ``run_id``, ``metric``, ``step``, ``iteration``,
    ``value``; ``iteration`` counts the iterations trained at T, from the last step
    evaluated at the previous length, since a run's steps run on across lengths), the T
    used, and notes on what was chosen or is missing.
    """
    frame = runs.runs
    ranked = {v: rank(frame[_runs_mask(frame, {"task": task, "variant": v})])
              for v in MODELS}
    ranked = {v: r for v, r in ranked.items() if len(r)}
    notes = [f"No {MODELS[v]} run of {task} trained to its end."
             for v in MODELS if v not in ranked]
    stages = {v: _stage_lengths(r, histories) for v, r in ranked.items()}
    lengths = {v: set().union(*(set(h["seq_len"].astype(int)) for h in s.values()))
               for v, s in stages.items()}
    common = set.intersection(*lengths.values()) if lengths else set()
    if seq_len is None:
        seq_len = FIG2_T if FIG2_T in common else (max(common) if common else None)
        if seq_len is not None and seq_len != FIG2_T:
            notes.append(f"T = {seq_len}: no run of every model trained at the paper's "
                         f"T = {FIG2_T}.")
    rows = []
    for variant, ranked_runs in ranked.items():
        chosen = next((rid for rid in ranked_runs["run_id"]
                       if seq_len in set(stages[variant][rid]["seq_len"].astype(int))), None)
        if chosen is None:
            notes.append(f"No {MODELS[variant]} run of {task} trained at T = {seq_len}.")
            continue
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
    columns = ["variant", "run_id", "metric", "step", "iteration", "value"]
    data = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=columns)
    return data[columns], seq_len, notes


def fig2(runs: SweepRuns, histories: Histories, seq_len: int | None = None,
         task: str = "temporal_order") -> Figure:
    """M Fig. 2: ρ(W_hh) (left) and ‖∇W_hh‖ (right, log scale) against iterations at one T
    for SRNN, SRNN+OPEN and SRNN+OINIT (data: :func:`fig2_data`)."""
    data, used, notes = fig2_data(runs, histories, seq_len, task)

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
            ax.set_xlabel(f"iteration at T = {used}")
            ax.set_ylabel(label)
            ax.legend(fontsize=8)

    sweep = runs.sweep
    missing = " (partial)" if notes and set(data["variant"]) != set(MODELS) else ""
    return Figure(name="fig2-spectral-radius", data=data, draw=draw, notes=notes,
                  title=f"M Fig. 2 — {PROBLEMS.get(task, task)}, T = {used}{missing} · "
                        f"{sweep.spec} · {sweep.profile} · sweep {sweep.sweep_id}")


def max_length_report(runs: SweepRuns, histories: Histories | None) -> Report:
    """Report of ``synthetic-max-length``: Table I; with histories, Fig. 2 and the bars."""
    cells = max_length_cells(runs)
    figures = [] if histories is None else [fig2(runs, histories),
                                            max_length_bars(runs, cells)]
    return Report(runs=runs, tables=[max_length_table(runs, cells)], figures=figures)


PRETRAIN_SYMBOLS: dict[str, str] = {"size": "m", "init_std": "σ", "uniform_bound": "b",
                                    "pretrain_lr": "αₚ", "pretrain_tol": "tol",
                                    "pretrain_max_steps": "max steps"}
"""Config key -> column header, for keys a pre-training sweep varies."""
_NOT_GROUPED = ("seed", "data_seed", "device")


def _varying(frame: pd.DataFrame) -> list[str]:
    """Params (without ``params.``) that take more than one value among the rows, seeds
    aside."""
    return [c.removeprefix("params.") for c in frame.columns
            if c.startswith("params.") and c.removeprefix("params.") not in _NOT_GROUPED
            and frame[c].astype(str).nunique() > 1]


def pool_pretrain(runs: pd.DataFrame, dist: str) -> dict[str, float] | None:
    """One distribution's statistics pooled over configurations (seeds): total repeats,
    success rate, mean, sample std (pooled exactly from each configuration's count, mean and
    std of converged matrices), min and max steps. None when no configuration has them."""
    col = f"metrics.{dist}_"
    if f"{col}repeats" not in runs:
        return None
    rows = runs[runs[f"{col}repeats"].notna()]
    if rows.empty:
        return None
    repeats = rows[f"{col}repeats"].to_numpy(float)
    n = np.rint(rows[f"{col}success_rate"].to_numpy(float) * repeats)
    out = {"repeats": repeats.sum(), "success_rate": n.sum() / repeats.sum(),
           "mean": math.nan, "std": math.nan, "min": math.nan, "max": math.nan}
    ok = n > 0
    if ok.any():
        n, means = n[ok], rows[f"{col}mean_steps"].to_numpy(float)[ok]
        stds = rows[f"{col}std_steps"].to_numpy(float)[ok]
        mean = (n * means).sum() / n.sum()
        within = ((n - 1) * stds**2).sum() + (n * (means - mean) ** 2).sum()
        out.update(mean=mean, std=math.sqrt(within / (n.sum() - 1)) if n.sum() > 1 else 0.0,
                   min=rows[f"{col}min_steps"].to_numpy(float)[ok].min(),
                   max=rows[f"{col}max_steps"].to_numpy(float)[ok].max())
    return out


def _distributions(frame: pd.DataFrame, spec: pd.DataFrame | None) -> list[str]:
    """The distributions the sweep runs (param ``distributions``, logged comma-joined), in
    the paper's order; both when neither the runs nor the spec say."""
    named: set[str] = set()
    for value in param_values(frame, "distributions"):
        if isinstance(value, str):
            named.update(v.strip() for v in value.split(","))
    if spec is not None and "distributions" in spec:
        for value in spec["distributions"]:
            named.update([value] if isinstance(value, str) else value)
    return [d for d in PRETRAIN if d in named] or list(PRETRAIN)


def pretrain_table(runs: SweepRuns) -> Table:
    """M §II-A: success rate and steps of orthogonal pre-training per distribution (and per
    setting the sweep varies), pooled over seeds, beside the published 100 % and 22.77 /
    24.00 mean steps."""
    frame, spec = runs.runs, expected(runs)
    keys = list(dict.fromkeys(_varying(frame) + ([] if spec is None else [
        c for c in spec.columns if c not in (*_NOT_GROUPED, "trials")
        and spec[c].astype(str).nunique() > 1])))
    groups: dict[tuple, pd.DataFrame] = {}
    if keys:
        for values, group in frame.groupby([param_values(frame, k) for k in keys],
                                           dropna=False, sort=True):
            groups[values if isinstance(values, tuple) else (values,)] = group
    else:
        groups[()] = frame
    rows = []
    for values, group in groups.items():
        n_done = int(group["outcome"].isin(DONE).sum())
        n_expected = None
        if spec is not None:
            mask = _mask(spec, dict(zip(keys, values, strict=True)))
            n_expected = None if mask is None else int(spec.loc[mask, "trials"].sum())
        partial = n_done < (len(group) if n_expected is None else n_expected)
        counts = {"n_done": n_done, "n_runs": len(group), "n_expected": n_expected,
                  "n_failed": int((group["outcome"] == "failed").sum()),
                  "n_diverged": int((group["outcome"] == "diverged").sum())}
        done = group[group["outcome"].isin(DONE)]
        for dist in _distributions(frame, spec):
            pub = PRETRAIN[dist]
            s = pool_pretrain(done, dist) or dict.fromkeys(
                ("repeats", "success_rate", "mean", "std", "min", "max"))
            rows.append([dist, *values,
                         Cell(s["success_rate"], ".2%", partial), Cell(pub.success_rate, ".0%"),
                         Cell(s["mean"], ".2f", partial),
                         Cell(None if s["mean"] is None else s["mean"] + 1, ".2f", partial),
                         Cell(pub.mean_steps, ".2f"), Cell(s["std"], ".2f", partial),
                         Cell(s["min"], "d", partial), Cell(s["max"], "d", partial),
                         Cell(s["repeats"], "d", partial), Cell(pub.repeats, "d"),
                         _count_text(counts)])
    return Table(
        name="pretrain-convergence",
        title="M §II-A — convergence of orthogonal pre-training",
        columns=["Distribution", *(PRETRAIN_SYMBOLS.get(k, k) for k in keys), "success",
                 "success (paper)", "mean steps", "mean + 1", "mean (paper)", "std", "min",
                 "max", "repeats", "repeats (paper)", "configurations"],
        rows=rows, provenance=provenance(runs),
        notes=["Steps count the updates W := W − αₚ·4(WWᵀ − I)W applied before Eᵖ < tol; "
               "M's code prints its loop counter, one more ('mean + 1', the count the "
               "published means are compared with).",
               "Pooled over seeds: success and mean over all matrices, std pooled exactly "
               "from each configuration's count, mean and std; min and max over "
               "converged matrices.",
               "Published: Manchev & Spratling §II-A (100 × 100, σ = b = 0.1, αₚ = 0.1, "
               "Eᵖ < 10⁻⁶, 10,000 repeats)."])


def pretrain_report(runs: SweepRuns, histories: Histories | None) -> Report:
    """Report of ``orth-pretrain-convergence``: the convergence table (no figures)."""
    return Report(runs=runs, tables=[pretrain_table(runs)])
