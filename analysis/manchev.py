"""Paper M (Manchev & Spratling, learned orthogonality): published values, tables and figures.

Specs and what their reports hold (EXPERIMENTS.md, M-pre, M-T1, M-F2, M-T3, M-T4):

- ``orth-pretrain-convergence``: convergence of orthogonal pre-training (§II-A) per
  distribution of the initial matrix: success rate, mean/min/max/std steps and repeats,
  beside the published 100 % and ≈ 22.77 (normal) / ≈ 24.00 (uniform) mean steps.
- ``synthetic-max-length``: Table I, the largest sequence length T each model solves on each
  problem with the α (and λ) that reached it, beside the published table; the same as a bar
  chart; and Fig. 2, ρ(W_hh) and ‖∇W_hh‖ over training at one T for the three models.
- ``ff-mnist``: Tables III and IV, the best MNIST test accuracy of the deep feedforward nets
  FF, FF+OPEN and FF+OINIT (784-100×10-10, tanh, W ~ N(0, 0.001²), SGD with batch 20, 100
  epochs) beside the published values, and the test accuracy per epoch of each model's
  chosen configuration. The trainer logs ``test_accuracy`` (a fraction) after every epoch
  and the summaries ``best_test_accuracy`` and ``baseline_accuracy`` (the majority-class
  fraction of the test set it used: 11.35 % on the full MNIST test set); tables show
  percentages.

Choice rule (Table I): the paper reports, per problem and model, "the maximum T" over its
grid and the parameters that reached it, without a tie-break. Here the configuration with the
largest ``max_seq_len_solved`` wins; ties go to the fewest ``iters_to_solve`` (reached it
sooner), then the smaller α, then the smaller λ, then the run id (only for determinism).
With repeats, each seed is its own configuration, so the best seed counts, as a single run
did in the paper.

Choice rule (Table III): M reports per model "the best accuracy" over its grid with the
parameters that reached it. Here the configuration with the highest ``best_test_accuracy``
(best over epochs) wins; ties go to the smaller α, then the smaller λ, then the run id (only
for determinism). Table IV is FF+OPEN with λ = 1, one row per α, the best over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as MplFigure

from analysis.figures import Figure
from analysis.groups import Group, count_text, expected_count, group, matching
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


def rank(cell: pd.DataFrame, metric: str = MAX_LEN,
         fewer: Sequence[str] = (ITERS,)) -> pd.DataFrame:
    """The cell's configurations that trained to their end and logged the summary ``metric``,
    best first: the largest ``metric``; ties go to the smallest of the summaries ``fewer`` in
    turn (missing: last), then the smaller α, then the smaller λ, then the run id. The
    defaults are Table I's rule; Table III ranks by ``best_test_accuracy`` alone."""
    runs = cell[cell["outcome"].isin(DONE)]
    if f"metrics.{metric}" not in runs:
        return runs.iloc[0:0]
    runs = runs[runs[f"metrics.{metric}"].notna()]
    nan = pd.Series(np.nan, index=runs.index)
    keys = {"best": -runs[f"metrics.{metric}"]}
    keys |= {f"fewer {name}": runs.get(f"metrics.{name}", nan).fillna(math.inf)
             for name in fewer}
    keys |= {
        "lr": pd.to_numeric(param_values(runs, "lr"), errors="coerce").fillna(math.inf),
        "penalty": pd.to_numeric(param_values(runs, "penalty"), errors="coerce").fillna(0.0),
        "run_id": runs["run_id"]}
    order = pd.DataFrame(keys).sort_values(list(keys), kind="stable").index
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
        g = group(runs, {"task": task, "variant": variant})
        ranked = rank(g.runs)
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


def _count_text(row: Mapping[str, object]) -> str:
    """The count of a :func:`max_length_cells` row (see :func:`analysis.groups.count_text`)."""
    of = row["n_runs"] if row["n_expected"] is None else row["n_expected"]
    return count_text(row["n_done"], of, row["n_failed"], row["n_diverged"])


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
    notes += _protocol_notes(runs, PAPER_PROTOCOL, "T") + _threshold_notes(runs)
    missing = sorted({t for t, _ in TABLE_I} - set(cells["task"]), key=list(PROBLEMS).index)
    if missing:
        notes.append(f"Not in profile {runs.sweep.profile}: "
                     + ", ".join(PROBLEMS[t] for t in missing) + ".")
    return Table(name="max-length", title="M Table I — maximal sequence length by model",
                 columns=["Problem", "Model", "T", "T (paper)", "α", "α (paper)", "λ",
                          "λ (paper)", "configurations"],
                 rows=rows, provenance=provenance(runs), notes=notes)


def _protocol_notes(runs: SweepRuns, paper: Mapping[str, float], what: str,
                    subsets: Sequence[str] = ()) -> list[str]:
    """The protocol settings of the sweep that differ from M's ``paper`` ones (a reduced
    profile), and the keys among ``subsets`` the sweep set (a subset of a data split where M
    used all of it); ``what`` names the results that are then not comparable."""
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
    ranked = {v: rank(frame[matching(frame, {"task": task, "variant": v})]) for v in MODELS}
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
        for values, members in frame.groupby([param_values(frame, k) for k in keys],
                                             dropna=False, sort=True):
            groups[values if isinstance(values, tuple) else (values,)] = members
    else:
        groups[()] = frame
    rows = []
    for values, members in groups.items():
        g = Group(members, expected_count(spec, dict(zip(keys, values, strict=True))))
        partial = g.partial
        done = g.runs[g.runs["outcome"].isin(DONE)]
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
                         g.count_text()])
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


FF_MODELS: dict[str, str] = {"plain": "FF", "open": "FF+OPEN", "oinit": "FF+OINIT"}
"""Variant -> the paper's name of the feedforward model."""

ACCURACY = "best_test_accuracy"
"""Trial summary that Tables III and IV report (a fraction)."""


@dataclass(frozen=True)
class PublishedAccuracy:
    """One row of M Table III."""

    accuracy: float
    """Best test accuracy, in %."""
    lr: float | None = None
    """α that reached it (None: the paper lists no parameters)."""
    penalty: float | None = None
    """λ (FF+OPEN only)."""


TABLE_III: dict[str, PublishedAccuracy] = {
    "plain": PublishedAccuracy(11.35),
    "open": PublishedAccuracy(97.03, 0.01, 0.01),
    "oinit": PublishedAccuracy(96.77, 0.01),
}
"""M Table III: variant -> published best accuracy and parameters."""

TABLE_IV: dict[float, float] = {1e-1: 91.40, 1e-2: 91.65, 1e-3: 90.66, 1e-4: 88.80, 1e-5: 72.81}
"""M Table IV: FF+OPEN with λ = 1, α -> published accuracy (%)."""

TABLE_IV_PENALTY = 1.0
"""λ of Table IV."""

FF_PAPER_PROTOCOL: dict[str, float] = {"layers": 10, "hidden": 100, "init_std": 0.001,
                                       "batch_size": 20, "epochs": 100}
"""M §III-C's protocol, config key -> value (to flag a reduced profile)."""

FF_SUBSETS = ("train_size", "test_size")
"""Config keys that train or test on a subset of MNIST (M: the whole splits)."""


def _best_accuracy(g: Group) -> pd.Series | None:
    """The configuration of ``g`` with the best test accuracy (Table III's rule), if any
    finished."""
    ranked = rank(g.runs, ACCURACY, ())
    return ranked.iloc[0] if len(ranked) else None


def _percent(row: pd.Series | None, partial: bool) -> Cell:
    value = None if row is None else 100.0 * float(row[f"metrics.{ACCURACY}"])
    return Cell(value, ".2f", partial)


def _baseline(runs: SweepRuns) -> list[str]:
    column = runs.runs.get("metrics.baseline_accuracy")
    values = sorted({round(100.0 * v, 2) for v in column.dropna()}) if column is not None else []
    if not values:
        return []
    return ["Majority-class baseline of the test set used: "
            + ", ".join(f"{v:.2f} %" for v in values) + " (M: 11.35 % on all 10,000)."]


def _ff_protocol_notes(runs: SweepRuns) -> list[str]:
    return _protocol_notes(runs, FF_PAPER_PROTOCOL, "accuracy", FF_SUBSETS)


def table_iii(runs: SweepRuns) -> Table:
    """M Table III: the best test accuracy of FF, FF+OPEN and FF+OINIT with its α and λ."""
    rows = []
    for variant, name in FF_MODELS.items():
        g = group(runs, {"variant": variant})
        best, pub = _best_accuracy(g), TABLE_III[variant]
        has_penalty = variant == "open"
        rows.append([
            name, _percent(best, g.partial), Cell(pub.accuracy, ".2f"),
            Cell(None if best is None else best.get("params.lr"), "g", g.partial),
            Cell(pub.lr, "g"),
            Cell(None if best is None or not has_penalty else best.get("params.penalty"), "g",
                 g.partial and has_penalty),
            Cell(pub.penalty, "g"), g.count_text()])
    notes = ["Accuracy: the best test accuracy over epochs of the configuration chosen per "
             "model (highest; ties to the smaller α, then λ), in %.",
             "configurations = trained to their end / defined by the spec.",
             "Published: Manchev & Spratling, Table III (784-100×10-10, tanh, σ = 0.001, "
             "SGD, batch 20, 100 epochs; FF: no α left the baseline)."]
    return Table(name="ff-table-iii", title="M Table III — best MNIST accuracy of the "
                 "feedforward nets",
                 columns=["Network", "accuracy %", "paper %", "α", "α (paper)", "λ",
                          "λ (paper)", "configurations"],
                 rows=rows, provenance=provenance(runs),
                 notes=notes + _baseline(runs) + _ff_protocol_notes(runs))


def table_iv(runs: SweepRuns) -> Table:
    """M Table IV: FF+OPEN with λ = 1, best test accuracy per α beside the published one."""
    frame = runs.runs
    open_runs = frame[matching(frame, {"variant": "open", "penalty": TABLE_IV_PENALTY})]
    present = {float(v) for v in param_values(open_runs, "lr") if isinstance(v, (int, float))}
    rows = []
    for lr in sorted(set(TABLE_IV) | present, reverse=True):
        g = group(runs, {"variant": "open", "penalty": TABLE_IV_PENALTY, "lr": lr})
        if g.n_expected == 0 and g.runs.empty:
            rows.append([format(lr, "g"), Cell(None), Cell(TABLE_IV.get(lr), ".2f"),
                         "not in this profile"])
            continue
        rows.append([format(lr, "g"), _percent(_best_accuracy(g), g.partial),
                     Cell(TABLE_IV.get(lr), ".2f"), g.count_text()])
    return Table(name="ff-table-iv", title="M Table IV — FF+OPEN with λ = 1 across α",
                 columns=["α", "accuracy %", "paper %", "configurations"],
                 rows=rows, provenance=provenance(runs),
                 notes=["Published: Manchev & Spratling, Table IV.", *_ff_protocol_notes(runs)])


def accuracy_curves(runs: SweepRuns, histories: Histories) -> Figure:
    """Test accuracy after every epoch of each model's chosen configuration (Table III's)."""
    rows, notes = [], []
    for variant, name in FF_MODELS.items():
        best = _best_accuracy(group(runs, {"variant": variant}))
        if best is None:
            notes.append(f"No {name} configuration trained to its end.")
            continue
        acc = histories.get(best["run_id"], "test_accuracy")
        epochs = histories.get(best["run_id"], "epoch").rename(columns={"value": "epoch"})
        merged = acc.merge(epochs, on="step", how="left")
        rows.append(pd.DataFrame({"variant": variant, "run_id": best["run_id"],
                                  "epoch": merged["epoch"], "step": merged["step"],
                                  "accuracy": 100.0 * merged["value"]}))
    columns = ["variant", "run_id", "epoch", "step", "accuracy"]
    data = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=columns)
    baseline = runs.runs.get("metrics.baseline_accuracy")
    level = float(baseline.dropna().iloc[0]) * 100 if baseline is not None and \
        baseline.notna().any() else np.nan

    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        ax = fig.add_subplot()
        for variant, name in FF_MODELS.items():
            series = data[data["variant"] == variant]
            if len(series):
                ax.plot(series["epoch"], series["accuracy"], marker=".", label=name)
        if level == level:
            ax.axhline(level, color="grey", linestyle="--", linewidth=0.8,
                       label="majority class")
        ax.set_xlabel("epoch")
        ax.set_ylabel("test accuracy %")
        ax.legend(fontsize=8)

    sweep = runs.sweep
    return Figure(name="ff-accuracy", data=data[columns], draw=draw, notes=notes,
                  title=f"M §III-C — test accuracy per epoch of the chosen configurations · "
                        f"{sweep.spec} · {sweep.profile} · sweep {sweep.sweep_id}")


def ff_mnist_report(runs: SweepRuns, histories: Histories | None) -> Report:
    """Report of ``ff-mnist``: Tables III and IV; with histories, the accuracy curves."""
    figures = [] if histories is None else [accuracy_curves(runs, histories)]
    return Report(runs=runs, tables=[table_iii(runs), table_iv(runs)], figures=figures)
