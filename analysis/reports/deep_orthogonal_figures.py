"""The figures of ``deep-orthogonal``'s report: the planar data sets, N Fig. 1a, Fig. 3 and
Fig. 4 (per-layer gradient norms); see :mod:`analysis.reports.deep_orthogonal`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as MplFigure

from analysis.figures import Figure
from analysis.groups import group
from analysis.load import Histories, SweepRuns
from analysis.published.nosarzewski import (
    F3_SPREAD_LIMIT,
)
from analysis.reports.deep_orthogonal_tables import NAMES, f1_cells, f3_cells, lowest_run


def _title(runs: SweepRuns, what: str) -> str:
    s = runs.sweep
    return f"{what} · {s.spec} · {s.profile} · sweep {s.sweep_id}"


def data_figure(runs: SweepRuns, histories: Histories) -> Figure:
    """The two planar sets (N Fig. 1b, Fig. 3), coloured by class, with the points the best
    orthogonal (N-F1) and Orth/ReLU (N-F3) run misclassifies ringed."""
    rows = []
    for dataset, variant in (("two_class", "orth"), ("spiral", "orth_relu")):
        best = lowest_run(group(runs, {"dataset": dataset, "variant": variant}),
                          "best_train_error")
        points = None if best is None else histories.artifact_json(best["run_id"], "points")
        if points is not None:
            rows.append(pd.DataFrame({"dataset": dataset, "x": points["x"], "y": points["y"],
                                      "label": points["label"],
                                      "predicted": points["predicted"]}))
    columns = ["dataset", "x", "y", "label", "predicted"]
    data = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=columns)

    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        axes = fig.subplots(1, 2)
        for ax, (dataset, title) in zip(axes, (("two_class", "N-F1 two-class set"),
                                                ("spiral", "N-F3 spiral")), strict=True):
            d = data[data["dataset"] == dataset]
            ax.scatter(d["x"], d["y"], c=d["label"], cmap="coolwarm", s=10)
            wrong = d[d["label"] != d["predicted"]]
            ax.scatter(wrong["x"], wrong["y"], facecolors="none", edgecolors="k", s=40,
                       label=f"misclassified ({len(wrong)})")
            ax.set_title(title, fontsize=9)
            ax.set_aspect("equal")
            ax.legend(fontsize=7)

    return Figure(name="n-data", data=data[columns], draw=draw,
                  title=_title(runs, "N Figs. 1b, 3 — the 2-D sets and the best runs' errors"))


def _profiles(histories: Histories, picks: list[tuple[str, pd.Series | None]]) -> pd.DataFrame:
    """‖∂J/∂a^[l]‖ per layer at initialisation and after training of each picked run
    (its ``grad_profile`` artifact's ``act_grad``)."""
    rows = []
    for label, best in picks:
        prof = None if best is None else histories.artifact_json(best["run_id"], "grad_profile")
        if prof is None:
            continue
        for when, values in (("init", prof["act_grad"][0]),
                              ("end", prof["act_grad"][-1])):
            rows.append(pd.DataFrame({"net": label, "when": when,
                                      "layer": np.arange(1, len(values) + 1),
                                      "norm": values}))
    columns = ["net", "when", "layer", "norm"]
    return pd.concat(rows, ignore_index=True)[columns] if rows else pd.DataFrame(columns=columns)


def _draw_profiles(data: pd.DataFrame, ax: Any) -> None:
    for (net, when), d in data.groupby(["net", "when"], sort=False):
        if when == "end":
            ax.plot(d["layer"], d["norm"].where(d["norm"] > 0, np.nan), marker=".", label=net)
    ax.set_yscale("log")
    ax.set_xlabel("layer l")
    ax.set_ylabel(r"$\|\partial J/\partial a^{[l]}\|$")
    ax.legend(fontsize=6, ncol=2)


def f1_figure(runs: SweepRuns, histories: Histories) -> Figure:
    """N Fig. 1a: ‖∂J/∂a^[l]‖ per layer after training, per depth of ReLU net (best seed)
    and for the orthogonal net (a gradient exactly 0 is left out of the log axis)."""
    cells = f1_cells(runs)
    picks = [(f"{NAMES[v]} L={int(layers)}",
              lowest_run(group(runs, {"dataset": "two_class", "variant": v, "layers": layers}),
                         "best_train_error"))
             for v, layers in zip(cells["variant"], cells["layers"], strict=True)]
    data = _profiles(histories, picks)

    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        _draw_profiles(data, fig.add_subplot())

    return Figure(name="n-f1-act-grads", data=data, draw=draw,
                  title=_title(runs, "N Fig. 1a — activation-gradient norms per layer"))


def f3_figure(runs: SweepRuns) -> Figure:
    """N Fig. 3: best training error against the weight-gradient spread at initialisation,
    one point per run, with N's 2-3 orders of magnitude marked."""
    data = f3_cells(runs)

    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        ax = fig.add_subplot()
        for variant, d in data.groupby("variant"):
            ax.scatter(d["spread"], d["error"], label=NAMES.get(variant, variant), s=14)
        for limit in F3_SPREAD_LIMIT:
            ax.axvline(limit, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xlabel("weight-gradient spread at initialisation (orders of magnitude)")
        ax.set_ylabel("best training error %")
        ax.legend(fontsize=8)

    return Figure(name="n-f3-spread", data=data, draw=draw,
                  title=_title(runs, "N Fig. 3 — gradient spread against trainability"))


def f4_figure(runs: SweepRuns, histories: Histories) -> Figure:
    """N Fig. 4: test error over iterations (best seed of each net) and the per-layer
    activation-gradient norms after training."""
    picks = [(NAMES[v], lowest_run(group(runs, {"dataset": "mnist", "variant": v}),
                                    "best_test_error")) for v in ("relu", "orth")]
    curves = [histories.get(best["run_id"], "test_error").assign(net=label)
              for label, best in picks if best is not None]
    errors = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame(
        columns=["step", "value", "net"])
    profile = _profiles(histories, picks)
    data = pd.concat([errors.assign(kind="test_error"), profile.assign(kind="act_grad")],
                     ignore_index=True)

    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        left, right = fig.subplots(1, 2)
        for net, d in data[data["kind"] == "test_error"].groupby("net"):
            left.plot(d["step"], 100 * d["value"], label=net)
        left.set_xlabel("iteration")
        left.set_ylabel("test error %")
        left.legend(fontsize=8)
        _draw_profiles(data[data["kind"] == "act_grad"], right)

    return Figure(name="n-f4-mnist", data=data, draw=draw,
                  title=_title(runs, "N Fig. 4 — MNIST: test error and per-layer gradients"))
