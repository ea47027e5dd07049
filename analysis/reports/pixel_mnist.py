"""Report of ``pixel-mnist`` (paper M §III-B, EXPERIMENTS.md M-T2, M-F3b): Table II, the best
test accuracy of SRNN, SRNN+OINIT and SRNN+OPEN fed MNIST one pixel at a time (T = 784),
beside the published values (:mod:`analysis.published.manchev`), whether and when each left
the majority-class baseline, and Fig. 3b, the learning dynamics (Eᵖ, ρ(W_hh), ‖∇W_hh‖ and the
test accuracy) over the first samples of the chosen SRNN+OINIT run, with the chosen SRNN+OPEN
run beside it (:func:`fig_3b` says why).

The trainer logs at every evaluation ``samples``, ``test_accuracy`` (a fraction),
``ortho_error``, ``spectral_radius``, ``grad_norm_whh``, and the summaries
``best_test_accuracy``, ``baseline_accuracy`` and ``learned_samples`` (the first evaluation
above the baseline by the configured margin; absent when it never left it).

Choice rule (Table II): M reports per network "the highest accuracy and respective
parameters" over its grid. Here the configuration with the highest ``best_test_accuracy``
wins; ties go to the smaller α, then the smaller λ, then the run id (only for determinism).
Every row names the optimiser and the pixel preprocessing of the run behind it (M's code:
RMSProp, pixels standardised; the paper says neither).
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure as MplFigure

from analysis.claims import Claim, beats
from analysis.figures import Figure
from analysis.groups import baseline_level, baseline_notes, first_ranked, group, protocol_notes
from analysis.load import Histories, SweepRuns
from analysis.published.manchev import (
    FIG3B_LEARNING_STARTS,
    FIG3B_SAMPLES,
    PIXEL_PAPER_PROTOCOL,
    TABLE_II,
)
from analysis.report import Report, provenance
from analysis.tables import OUTSIDE, Cell, Table

NETWORKS: dict[str, str] = {"plain": "SRNN", "oinit": "SRNN+OINIT", "open": "SRNN+OPEN"}
"""Variant -> the paper's name of the network, in Table II's order."""
ACCURACY = "best_test_accuracy"
"""The summary Table II reports (a fraction)."""
FIG3B_CURVES: dict[str, str] = {"ortho_error": "Eᵖ", "spectral_radius": "ρ(W_hh)",
                                "grad_norm_whh": "‖∇W_hh‖", "test_accuracy": "test acc. %"}
"""The panels of Fig. 3b: metric -> axis label (Eᵖ = ‖W_hhW_hhᵀ − I‖²_F; ‖∇W_hh‖ is the mean
over the iterations since the previous evaluation, as the figure's note says)."""
FIG3B_VARIANTS = ("oinit", "open")
"""The runs Fig. 3b draws: M's OINIT run, and the OPEN run whose dynamics M's text describes."""



def _param(row: pd.Series | None, key: str, partial: bool) -> Cell:
    return Cell(None if row is None else row.get(f"params.{key}"), "g", partial)


def _learned(row: pd.Series | None, partial: bool) -> Cell:
    """When the run left the baseline (samples), ``never`` if it did not."""
    if row is None:
        return Cell(None, partial=partial)
    value = row.get("metrics.learned_samples")
    if value is None or pd.isna(value):
        return Cell("never", partial=partial)
    return Cell(f"{float(value):,.0f}", partial=partial)


def table_ii(runs: SweepRuns) -> Table:
    """M Table II: each network's best accuracy with its α, σ and λ, and when it learned."""
    rows = []
    for variant, name in NETWORKS.items():
        g = group(runs, {"variant": variant})
        best, pub = first_ranked(g.runs, ACCURACY), TABLE_II[variant]
        penalty = variant == "open"
        if g.runs.empty and g.n_expected == 0:
            rows.append([name, OUTSIDE, Cell(pub.accuracy, ".2f"), OUTSIDE, OUTSIDE,
                         Cell(pub.lr, "g"), OUTSIDE, Cell(pub.init_std, "g"),
                         OUTSIDE if penalty else Cell(None), Cell(pub.penalty, "g"), OUTSIDE,
                         OUTSIDE])
            continue
        accuracy = None if best is None else 100.0 * float(best[f"metrics.{ACCURACY}"])
        rows.append([
            name, Cell(accuracy, ".2f", g.partial), Cell(pub.accuracy, ".2f"),
            _learned(best, g.partial),
            _param(best, "lr", g.partial), Cell(pub.lr, "g"),
            _param(best, "init_std", g.partial), Cell(pub.init_std, "g"),
            _param(best if penalty else None, "penalty", g.partial and penalty),
            Cell(pub.penalty, "g"),
            Cell(None if best is None else
                 f"{best.get('params.optimizer')}, {best.get('params.preprocessing')}",
                 partial=g.partial),
            g.count_text()])
    notes = ["accuracy: the best test accuracy over the evaluations of the configuration chosen "
             "per network (highest; ties to the smaller α, then λ), in %.",
             "learned at: training samples seen when the test accuracy first exceeded the "
             "majority-class baseline by the configured margin (learned_margin); never: it "
             "stayed at the baseline.",
             "training: optimiser and pixel preprocessing of that run (M's code: rmsprop, "
             "standardise; the paper names neither).",
             "configurations = trained to their end / defined by the spec.",
             "Published: Manchev & Spratling, Table II (T = 784, 100 tanh units, batch 16, "
             "10⁶ iterations; SRNN: no α of the grid left the baseline)."]
    return Table(name="pixel-table-ii", title="M Table II — pixel-by-pixel MNIST, best test "
                 "accuracy", columns=["Network", "accuracy %", "paper %", "learned at",
                                      "α", "α (paper)", "σ", "σ (paper)", "λ", "λ (paper)",
                                      "training", "configurations"],
                 rows=rows, provenance=provenance(runs),
                 notes=notes + baseline_notes(runs, TABLE_II["plain"].accuracy)
                 + protocol_notes(runs, PIXEL_PAPER_PROTOCOL, "accuracy", ("test_size",)))


def _learning_starts(reaches: bool) -> str:
    """Fig. 3b's x-axis note on M's learning start: the dotted line where the drawn runs reach
    it; otherwise in words, so that a short profile's curves keep the whole axis."""
    where = f"{FIG3B_LEARNING_STARTS:,}"
    return (f"dotted: M's {where}, where learning starts" if reaches else
            f"M's learning starts at {where}, past these runs")


def fig_3b(runs: SweepRuns, histories: Histories) -> Figure:
    """M Fig. 3b: Eᵖ, ρ(W_hh), ‖∇W_hh‖ and test accuracy over the first
    :data:`FIG3B_SAMPLES` samples of the chosen SRNN+OINIT run (Table II's), and of the chosen
    SRNN+OPEN run beside it.

    M's text describes the OINIT run as starting with ρ and ‖∇W_hh‖ near zero, Eᵖ falling and
    ρ settling at 1 before learning starts at about 60,000 samples; yet OINIT starts from
    orthogonal weights (ρ = 1, Eᵖ < 10⁻⁶), and those dynamics are the ones an OPEN run goes
    through from N(0, σ²). Both runs are drawn, so that the figure shows which one behaves as
    M describes."""
    columns = ["variant", "run_id", "metric", "samples", "value"]
    notes, frames = [], []
    for variant in FIG3B_VARIANTS:
        best = first_ranked(group(runs, {"variant": variant}).runs, ACCURACY)
        if best is None:
            notes.append(f"No {NETWORKS[variant]} configuration trained to its end.")
            continue
        samples = histories.get(best["run_id"], "samples").rename(columns={"value": "samples"})
        for metric in FIG3B_CURVES:
            curve = histories.get(best["run_id"], metric).merge(samples, on="step")
            scale = 100.0 if metric == "test_accuracy" else 1.0
            frames.append(pd.DataFrame({"variant": variant, "run_id": best["run_id"],
                                        "metric": metric, "samples": curve["samples"],
                                        "value": scale * curve["value"]}))
    data = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
    data = data[data["samples"] <= FIG3B_SAMPLES].reset_index(drop=True)
    level = baseline_level(runs)
    reaches = len(data) > 0 and data["samples"].max() >= FIG3B_LEARNING_STARTS

    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        axes = fig.subplots(len(FIG3B_CURVES), 1, sharex=True)
        for ax, (metric, label) in zip(axes, FIG3B_CURVES.items(), strict=True):
            for variant in FIG3B_VARIANTS:
                curve = data[(data["metric"] == metric) & (data["variant"] == variant)]
                if len(curve):
                    ax.plot(curve["samples"], curve["value"], marker=".", linewidth=1,
                            label=NETWORKS[variant])
            ax.set_ylabel(label, fontsize=8)
            if reaches:
                ax.axvline(FIG3B_LEARNING_STARTS, color="grey", linestyle=":", linewidth=0.8)
            if metric == "test_accuracy" and level == level:
                ax.axhline(level, color="grey", linestyle="--", linewidth=0.8)
        axes[0].legend(fontsize=8)
        axes[-1].set_xlabel(f"training samples ({_learning_starts(reaches)})")

    notes.append("Eᵖ = ‖W_hhW_hhᵀ − I‖²_F; ‖∇W_hh‖: mean over the iterations since the "
                 "previous evaluation (the OPEN term included); test accuracy in %, the dashed "
                 "line the majority-class baseline.")
    sweep = runs.sweep
    return Figure(name="pixel-fig-3b", data=data[columns], draw=draw, notes=notes,
                  size=(10.0, 7.0),
                  title=f"M Fig. 3b — learning dynamics of SRNN+OINIT (and SRNN+OPEN) · "
                        f"{sweep.spec} · {sweep.profile} · sweep {sweep.sweep_id}")


def pixel_claims(runs: SweepRuns) -> list[Claim]:
    """M-T2: SRNN+OINIT and SRNN+OPEN learn pixel-by-pixel MNIST where SRNN stays at the
    baseline, and OPEN does best (each network's best accuracy by Table II's rule)."""
    acc: dict[str, float | None] = {}
    partial = False
    for variant, name in NETWORKS.items():
        g = group(runs, {"variant": variant})
        best = first_ranked(g.runs, ACCURACY)
        acc[name] = None if best is None else 100.0 * float(best[f"metrics.{ACCURACY}"])
        partial |= g.partial
    pub = {name: TABLE_II[v].accuracy for v, name in NETWORKS.items()}
    return [
        beats("M-T2", f"SRNN+OINIT and SRNN+OPEN beat SRNN (paper {pub['SRNN+OINIT']} and "
              f"{pub['SRNN+OPEN']} % vs {pub['SRNN']} %)", acc, ["SRNN+OINIT", "SRNN+OPEN"],
              ["SRNN"], unit=" %", partial=partial),
        beats("M-T2", f"SRNN+OPEN beats SRNN+OINIT (paper {pub['SRNN+OPEN']} % vs "
              f"{pub['SRNN+OINIT']} %)", acc, ["SRNN+OPEN"], ["SRNN+OINIT"], unit=" %",
              partial=partial)]


def pixel_mnist_report(runs: SweepRuns, histories: Histories | None) -> Report:
    """Report of ``pixel-mnist``: Table II and its claims; with histories, Fig. 3b."""
    figures = [] if histories is None else [fig_3b(runs, histories)]
    return Report(runs=runs, tables=[table_ii(runs)], figures=figures,
                  claims=pixel_claims(runs))
