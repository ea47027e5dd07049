"""Report of ``ff-mnist`` (paper M §III-C, EXPERIMENTS.md M-T3, M-T4): Tables III and IV, the
best MNIST test accuracy of the deep feedforward nets FF, FF+OPEN and FF+OINIT (784-100×10-10,
tanh, W ~ N(0, 0.001²), SGD with batch 20, 100 epochs) beside the published values
(:mod:`analysis.published.manchev`), and the test accuracy over the epochs of each model's
chosen configuration. The trainer logs ``test_accuracy`` (a fraction) at every evaluation
(after every epoch, or every ``eval_every`` samples as M's code does) and the summaries
``best_test_accuracy`` and ``baseline_accuracy`` (the majority-class fraction of the test set
it used); tables show percentages. M's code, whose runs the tables come from, builds 11 hidden
layers where the text says 10 (:data:`analysis.published.manchev.FF_PAPER_PROTOCOL`).

Choice rule (Table III): M reports per model "the best accuracy" over its grid with the
parameters that reached it. Here the configuration with the highest ``best_test_accuracy``
(best over its evaluations) wins; ties go to the smaller α, then the smaller λ, then the run
id (only for determinism). Table IV is FF+OPEN with λ = 1, one row per α, the best over seeds.

Every row names the pixel preprocessing of the run its number comes from (the ``preprocessing``
param: ``unit``, value / 255, or ``standardise``, M's code's per-pixel standardisation); runs
tracked before the param existed logged none and used ``unit``, the only one then.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure as MplFigure

from analysis.claims import Claim, beats, evidence, judge, ordered
from analysis.figures import Figure, epoch_axis
from analysis.groups import (
    baseline_level,
    baseline_notes,
    first_ranked,
    group,
    matching,
    protocol_notes,
)
from analysis.load import Histories, SweepRuns, param_values
from analysis.published.manchev import (
    FF_PAPER_PROTOCOL,
    TABLE_III,
    TABLE_IV,
    TABLE_IV_PENALTY,
)
from analysis.report import Report, provenance
from analysis.tables import OUTSIDE, Cell, Table

FF_MODELS: dict[str, str] = {"plain": "FF", "open": "FF+OPEN", "oinit": "FF+OINIT"}
"""Variant -> the paper's name of the feedforward model."""

MARKERS: dict[str, str] = {"plain": "o", "open": "s", "oinit": "^"}
"""Each model's hollow marker in the accuracy figure: models that sit at the same accuracy
(at chance, or a one-epoch profile's single point) stay visible on top of each other."""

ACCURACY = "best_test_accuracy"
"""Trial summary that Tables III and IV report (a fraction)."""

FF_SUBSETS = ("train_size", "test_size")
"""Config keys that train or test on a subset of MNIST (M: the whole splits)."""

PREPROCESSING_NAMES: dict[str, str] = {"unit": "unit", "standardise": "standardise (M's code)"}
"""``preprocessing`` param -> its name in the tables."""

PREPROCESSING_NOTE = ("preprocessing: of the run behind the number; unit = pixel / 255 in "
                      "[0, 1]; standardise (M's code, FF_MNIST.py) = each pixel at zero mean "
                      "and unit variance over its split (training and test sets each with "
                      "their own statistics); runs that logged no preprocessing used unit.")
"""Table note that explains the preprocessing column."""



def _preprocessing(row: pd.Series | None, partial: bool) -> Cell:
    """The pixel preprocessing of ``row``'s run: ``unit`` when it logged none (the default
    before the param existed); nothing without a run."""
    if row is None:
        return Cell(None, partial=partial)
    value = row.get("params.preprocessing")
    value = "unit" if pd.isna(value) else str(value)
    return Cell(PREPROCESSING_NAMES.get(value, value), partial=partial)


def _accuracy(row: pd.Series | None) -> float | None:
    """A chosen run's test accuracy in % (None without a run)."""
    return None if row is None else 100.0 * float(row[f"metrics.{ACCURACY}"])


def _percent(row: pd.Series | None, partial: bool) -> Cell:
    return Cell(_accuracy(row), ".2f", partial)


def _ff_protocol_notes(runs: SweepRuns) -> list[str]:
    return protocol_notes(runs, FF_PAPER_PROTOCOL, "accuracy", FF_SUBSETS)


def table_iii(runs: SweepRuns) -> Table:
    """M Table III: the best test accuracy of FF, FF+OPEN and FF+OINIT with its α and λ."""
    rows = []
    for variant, name in FF_MODELS.items():
        g = group(runs, {"variant": variant})
        best, pub = first_ranked(g.runs, ACCURACY), TABLE_III[variant]
        has_penalty = variant == "open"
        if g.runs.empty and g.n_expected == 0:
            rows.append([name, OUTSIDE, Cell(pub.accuracy, ".2f"), OUTSIDE, Cell(pub.lr, "g"),
                         OUTSIDE if has_penalty else Cell(None), Cell(pub.penalty, "g"),
                         OUTSIDE, OUTSIDE])
            continue
        rows.append([
            name, _percent(best, g.partial), Cell(pub.accuracy, ".2f"),
            Cell(None if best is None else best.get("params.lr"), "g", g.partial),
            Cell(pub.lr, "g"),
            Cell(None if best is None or not has_penalty else best.get("params.penalty"), "g",
                 g.partial and has_penalty),
            Cell(pub.penalty, "g"), _preprocessing(best, g.partial), g.count_text()])
    notes = ["Accuracy: the best test accuracy over the evaluations of the configuration "
             "chosen per model (highest; ties to the smaller α, then λ), in %.",
             "configurations = trained to their end / defined by the spec.",
             PREPROCESSING_NOTE,
             "Published: Manchev & Spratling, Table III (784-100×10-10 in the text, 11 "
             "hidden layers in M's code that ran it; tanh, σ = 0.001, SGD, batch 20, 100 "
             "epochs; FF: no α left the baseline)."]
    return Table(name="ff-table-iii", title="M Table III — best MNIST accuracy of the "
                 "feedforward nets",
                 columns=["Network", "accuracy %", "paper %", "α", "α (paper)", "λ",
                          "λ (paper)", "preprocessing", "configurations"],
                 rows=rows, provenance=provenance(runs),
                 notes=notes + baseline_notes(runs, TABLE_III["plain"].accuracy)
                 + _ff_protocol_notes(runs))


def table_iv(runs: SweepRuns) -> Table:
    """M Table IV: FF+OPEN with λ = 1, best test accuracy per α beside the published one."""
    frame = runs.runs
    open_runs = frame[matching(frame, {"variant": "open", "penalty": TABLE_IV_PENALTY})]
    present = {float(v) for v in param_values(open_runs, "lr") if isinstance(v, (int, float))}
    rows = []
    for lr in sorted(set(TABLE_IV) | present, reverse=True):
        g = group(runs, {"variant": "open", "penalty": TABLE_IV_PENALTY, "lr": lr})
        if g.n_expected == 0 and g.runs.empty:
            rows.append([format(lr, "g"), OUTSIDE, Cell(TABLE_IV.get(lr), ".2f"), OUTSIDE,
                         OUTSIDE])
            continue
        best = first_ranked(g.runs, ACCURACY)
        rows.append([format(lr, "g"), _percent(best, g.partial), Cell(TABLE_IV.get(lr), ".2f"),
                     _preprocessing(best, g.partial), g.count_text()])
    return Table(name="ff-table-iv", title="M Table IV — FF+OPEN with λ = 1 across α",
                 columns=["α", "accuracy %", "paper %", "preprocessing", "configurations"],
                 rows=rows, provenance=provenance(runs),
                 notes=["Published: Manchev & Spratling, Table IV.", PREPROCESSING_NOTE,
                        *_ff_protocol_notes(runs)])


def accuracy_curves(runs: SweepRuns, histories: Histories) -> Figure:
    """Test accuracy at every evaluation of each model's chosen configuration (Table III's)
    against the epochs trained (a fraction at a checkpoint inside an epoch), each labelled
    with its pixel preprocessing."""
    rows, notes = [], []
    for variant, name in FF_MODELS.items():
        best = first_ranked(group(runs, {"variant": variant}).runs, ACCURACY)
        if best is None:
            notes.append(f"No {name} configuration trained to its end.")
            continue
        acc = histories.get(best["run_id"], "test_accuracy")
        epochs = histories.get(best["run_id"], "epoch").rename(columns={"value": "epoch"})
        merged = acc.merge(epochs, on="step", how="left")
        rows.append(pd.DataFrame({"variant": variant, "run_id": best["run_id"],
                                  "preprocessing": _preprocessing(best, False).text(),
                                  "epoch": merged["epoch"], "step": merged["step"],
                                  "accuracy": 100.0 * merged["value"]}))
    columns = ["variant", "run_id", "preprocessing", "epoch", "step", "accuracy"]
    data = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=columns)
    level = baseline_level(runs)

    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        ax = fig.add_subplot()
        for variant, name in FF_MODELS.items():
            series = data[data["variant"] == variant]
            if len(series):
                ax.plot(series["epoch"], series["accuracy"], marker=MARKERS[variant],
                        markerfacecolor="none", label=f"{name} ({series['preprocessing'].iloc[0]})")
        if level == level:
            ax.axhline(level, color="grey", linestyle="--", linewidth=0.8,
                       label="majority class")
        ax.set_xlim(left=0)
        epoch_axis(ax)
        ax.set_ylabel("test accuracy %")
        ax.legend(fontsize=8)

    sweep = runs.sweep
    return Figure(name="ff-accuracy", data=data[columns], draw=draw, notes=notes,
                  title=f"M §III-C — test accuracy over the epochs of the chosen configurations · "
                        f"{sweep.spec} · {sweep.profile} · sweep {sweep.sweep_id}")


def _best_percent(runs: SweepRuns, values: dict[str, object]) -> tuple[float | None, bool]:
    """The best accuracy (%) of the configurations with ``values`` by Table III's rule, and
    whether it rests on a partial group."""
    g = group(runs, values)
    best = first_ranked(g.runs, ACCURACY)
    return _accuracy(best), g.partial


def ff_claims(runs: SweepRuns) -> list[Claim]:
    """M-T3: FF+OPEN and FF+OINIT train where FF does not, and OPEN edges out OINIT; M-T4:
    with λ = 1 the accuracy falls as α falls below 10⁻²."""
    best = {name: _best_percent(runs, {"variant": v}) for v, name in FF_MODELS.items()}
    acc = {name: b[0] for name, b in best.items()}
    partial = any(b[1] for b in best.values())
    pub = {name: TABLE_III[v].accuracy for v, name in FF_MODELS.items()}
    claims = [
        beats("M-T3", f"FF+OPEN and FF+OINIT beat FF in test accuracy (paper {pub['FF+OPEN']} "
              f"and {pub['FF+OINIT']} % vs {pub['FF']} %)", acc, ["FF+OPEN", "FF+OINIT"], ["FF"],
              unit=" %", partial=partial),
        beats("M-T3", f"FF+OPEN beats FF+OINIT (paper {pub['FF+OPEN']} % vs "
              f"{pub['FF+OINIT']} %)", acc, ["FF+OPEN"], ["FF+OINIT"], unit=" %",
              partial=partial)]
    rates = sorted(lr for lr in TABLE_IV if lr <= 1e-2)
    measured = {lr: _best_percent(runs, {"variant": "open", "penalty": TABLE_IV_PENALTY,
                                         "lr": lr}) for lr in rates}
    shown = {f"α={lr:g}": m[0] for lr, m in measured.items() if m[0] is not None}
    text = ("FF+OPEN with λ = 1: accuracy falls as α falls from 10⁻² to 10⁻⁵ (paper "
            + " → ".join(f"{TABLE_IV[lr]:.2f}" for lr in reversed(rates)) + " %)")
    if len(shown) < 2:
        claims.append(judge("M-T4", text, None, "fewer than two of these α measured"
                            + (f" ({evidence(shown, unit=' %')})" if shown else "")))
    else:
        claims.append(ordered("M-T4", text, shown, list(shown), unit=" %",
                              partial=any(m[1] for m in measured.values() if m[0] is not None),
                              rising=True))
    return claims


def ff_mnist_report(runs: SweepRuns, histories: Histories | None) -> Report:
    """Report of ``ff-mnist``: Tables III and IV and their claims; with histories, the
    accuracy curves."""
    figures = [] if histories is None else [accuracy_curves(runs, histories)]
    return Report(runs=runs, tables=[table_iii(runs), table_iv(runs)], figures=figures,
                  claims=ff_claims(runs))
