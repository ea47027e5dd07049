"""Paper M's deep feedforward net on MNIST (EXPERIMENTS.md M-T3, M-T4): Tables III and IV beside
the published values, and the test accuracy per epoch of each model's chosen configuration.

Spec ``ff-mnist`` (trainer ``ff-mnist``): FF, FF+OPEN and FF+OINIT, 784-100×10-10, tanh,
W ~ N(0, 0.001²), SGD with batch 20, 100 epochs. The trainer logs ``test_accuracy`` (a
fraction) after every epoch and the summaries ``best_test_accuracy`` and
``baseline_accuracy`` (the majority-class fraction of the test set it used: 11.35 % on the
full MNIST test set); tables show percentages.

Choice rule (Table III): M reports per model "the best accuracy" over its grid with the
parameters that reached it. Here the configuration with the highest ``best_test_accuracy``
(best over epochs) wins; ties go to the smaller α, then the smaller λ, then the run id (only
for determinism). Table IV is FF+OPEN with λ = 1, one row per α, the best over seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as MplFigure

from analysis.figures import Figure
from analysis.load import DONE, Histories, SweepRuns, param_values
from analysis.report import Report, expected, provenance
from analysis.tables import Cell, Table

MODELS: dict[str, str] = {"plain": "FF", "open": "FF+OPEN", "oinit": "FF+OINIT"}
"""Variant -> the paper's model name."""

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

PAPER_PROTOCOL: dict[str, float] = {"layers": 10, "hidden": 100, "init_std": 0.001,
                                    "batch_size": 20, "epochs": 100}
"""M §III-C's protocol, config key -> value (to flag a reduced profile)."""


def _mask(frame: pd.DataFrame, values: dict[str, object]) -> pd.Series:
    mask = pd.Series(True, index=frame.index)
    for key, value in values.items():
        column = param_values(frame, key)
        mask &= column.map(lambda v, value=value: _same(v, value))
    return mask


def _same(a: object, b: object) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-9)
    return a == b


def rank(cell: pd.DataFrame) -> pd.DataFrame:
    """The configurations of ``cell`` that trained to their end with a logged accuracy, best
    first by the module's choice rule."""
    column = f"metrics.{ACCURACY}"
    runs = cell[cell["outcome"].isin(DONE)]
    if column not in runs:
        return runs.iloc[0:0]
    runs = runs[runs[column].notna()]
    keys = pd.DataFrame({
        "acc": -runs[column],
        "lr": pd.to_numeric(param_values(runs, "lr"), errors="coerce").fillna(math.inf),
        "penalty": pd.to_numeric(param_values(runs, "penalty"), errors="coerce").fillna(0.0),
        "run_id": runs["run_id"]})
    order = keys.sort_values(["acc", "lr", "penalty", "run_id"], kind="stable").index
    return runs.loc[order]


@dataclass
class Group:
    """The configurations of one table row and how complete they are."""

    runs: pd.DataFrame
    """Tracked configurations of the row."""
    n_expected: int | None
    """Configurations the resolved spec defines for the row (None: spec unknown)."""

    @property
    def n_done(self) -> int:
        """Configurations that trained to their end."""
        return int(self.runs["outcome"].isin(DONE).sum())

    @property
    def partial(self) -> bool:
        """Whether the row rests on fewer configurations than it should."""
        return self.n_done < (len(self.runs) if self.n_expected is None else self.n_expected)

    @property
    def best(self) -> pd.Series | None:
        """The chosen configuration, if any finished."""
        ranked = rank(self.runs)
        return ranked.iloc[0] if len(ranked) else None

    def count_text(self) -> str:
        """``done/expected`` with failed and diverged counts."""
        of = len(self.runs) if self.n_expected is None else self.n_expected
        extra = [f"{int((self.runs['outcome'] == k).sum())} {k}" for k in ("failed", "diverged")
                 if (self.runs["outcome"] == k).any()]
        return f"{self.n_done}/{of}" + (f" ({', '.join(extra)})" if extra else "")


def group(runs: SweepRuns, values: dict[str, object]) -> Group:
    """The configurations whose params equal ``values``, with the spec's expected count."""
    frame, spec = runs.runs, expected(runs)
    n_expected = None
    if spec is not None and all(k in spec for k in values):
        mask = pd.Series(True, index=spec.index)
        for key, value in values.items():
            mask &= spec[key].map(lambda v, value=value: _same(v, value))
        n_expected = int(spec.loc[mask, "trials"].sum())
    return Group(frame[_mask(frame, values)], n_expected)


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


def _protocol_notes(runs: SweepRuns) -> list[str]:
    diffs = []
    for key, paper in PAPER_PROTOCOL.items():
        values = sorted({v for v in param_values(runs.runs, key)
                         if isinstance(v, (int, float)) and v == v})
        if values and values != [paper]:
            diffs.append(f"{key} = {', '.join(format(v, 'g') for v in values)} "
                         f"(paper {paper:g})")
    for key in ("train_size", "test_size"):
        values = sorted({v for v in param_values(runs.runs, key) if isinstance(v, int)})
        if values:
            diffs.append(f"{key} = {', '.join(map(str, values))} (paper: the whole split)")
    if not diffs:
        return []
    return ["Protocol differs from the paper's, so accuracies are not comparable one to one: "
            + "; ".join(diffs) + "."]


def table_iii(runs: SweepRuns) -> Table:
    """M Table III: the best test accuracy of FF, FF+OPEN and FF+OINIT with its α and λ."""
    rows = []
    for variant, name in MODELS.items():
        g = group(runs, {"variant": variant})
        best, pub = g.best, TABLE_III[variant]
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
                 notes=notes + _baseline(runs) + _protocol_notes(runs))


def table_iv(runs: SweepRuns) -> Table:
    """M Table IV: FF+OPEN with λ = 1, best test accuracy per α beside the published one."""
    present = {float(v) for v in param_values(
        runs.runs[_mask(runs.runs, {"variant": "open", "penalty": TABLE_IV_PENALTY})], "lr")
        if isinstance(v, (int, float))}
    rows = []
    for lr in sorted(set(TABLE_IV) | present, reverse=True):
        g = group(runs, {"variant": "open", "penalty": TABLE_IV_PENALTY, "lr": lr})
        if g.n_expected == 0 and g.runs.empty:
            rows.append([format(lr, "g"), Cell(None), Cell(TABLE_IV.get(lr), ".2f"),
                         "not in this profile"])
            continue
        rows.append([format(lr, "g"), _percent(g.best, g.partial),
                     Cell(TABLE_IV.get(lr), ".2f"), g.count_text()])
    return Table(name="ff-table-iv", title="M Table IV — FF+OPEN with λ = 1 across α",
                 columns=["α", "accuracy %", "paper %", "configurations"],
                 rows=rows, provenance=provenance(runs),
                 notes=["Published: Manchev & Spratling, Table IV.", *_protocol_notes(runs)])


def accuracy_curves(runs: SweepRuns, histories: Histories) -> Figure:
    """Test accuracy after every epoch of each model's chosen configuration (Table III's)."""
    rows, notes = [], []
    for variant, name in MODELS.items():
        best = group(runs, {"variant": variant}).best
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
        for variant, name in MODELS.items():
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
