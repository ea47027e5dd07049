"""The figures of the ``lcw-deep-mlp`` report (paper K, :mod:`analysis.reports.lcw_deep_mlp`):
training accuracy per epoch (K Fig. 12, left column); weight gradients per layer at
initialisation (K Fig. 13); θ per neuron and the activations at five layers (K Figs. 2-11),
the last three read from the runs' JSON artifacts. Each shows, per network and model, the
configuration :func:`analysis.reports.lcw_tables.chosen` picks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure as MplFigure

from analysis.figures import Figure, epoch_axis
from analysis.load import Histories, SweepRuns
from analysis.published.kutsuna import FIG2_SHAPES, FIG12_SHAPES, FIG13_SHAPE, Shape
from analysis.reports.lcw_tables import MODELS, chosen, shapes

QUANTILE_COLUMNS = ("q01", "q25", "q50", "q75", "q99")
"""The trainer's boxplot quantiles (1, 25, 50, 75, 99 %)."""


def train_accuracy_figure(runs: SweepRuns, histories: Histories) -> Figure:
    """K Fig. 12 (a, d, g): training accuracy per epoch, one panel per network of Fig. 12 (every
    sigmoid network when the sweep has none of them)."""
    sigmoid = [s for s in shapes(runs) if s[0] == "sigmoid"]
    rows = []
    for shape in [s for s in sigmoid if s in FIG12_SHAPES] or sigmoid:
        for variant in MODELS:
            best = chosen(runs, shape, variant)[1]
            if best is None:
                continue
            acc = histories.get(best["run_id"], "train_accuracy")
            epoch = histories.get(best["run_id"], "epoch").rename(columns={"value": "epoch"})
            merged = acc.merge(epoch, on="step", how="left")
            rows.append(pd.DataFrame({"network": f"MLP({shape[1]}, {shape[2]})",
                                      "variant": variant, "run_id": best["run_id"],
                                      "epoch": merged["epoch"],
                                      "train_accuracy": 100 * merged["value"]}))
    columns = ["network", "variant", "run_id", "epoch", "train_accuracy"]
    data = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=columns)

    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        networks = list(dict.fromkeys(data["network"])) or ["(none)"]
        axes = np.atleast_1d(fig.subplots(1, len(networks), sharey=True))
        for ax, network in zip(axes, networks, strict=True):
            for variant, name in MODELS.items():
                series = data[(data["network"] == network) & (data["variant"] == variant)]
                if len(series):
                    ax.plot(series["epoch"], series["train_accuracy"], marker=".", label=name)
            ax.set_title(network, fontsize=9)
            epoch_axis(ax)
            if ax.lines:
                ax.legend(fontsize=7)
        axes[0].set_ylabel("training accuracy %")

    sweep = runs.sweep
    return Figure(name="k-fig12-train-accuracy", data=data[columns], draw=draw,
                  title=f"K Fig. 12 — training accuracy per epoch (sigmoid) · {sweep.spec} · "
                        f"{sweep.profile} · sweep {sweep.sweep_id}")


def gradient_figure(runs: SweepRuns, histories: Histories) -> Figure:
    """K Fig. 13: per layer, the distribution of the weight gradients at initialisation
    (boxes: 25-75 %, whiskers 1-99 %) of the plain MLP and MLP_LCW of K's shape
    (:data:`FIG13_SHAPE`, else the last ReLU shape of
    :func:`~analysis.reports.lcw_tables.shapes`, the shallowest the sweep has), and their
    RMS (log)."""
    notes: list[str] = []
    shape = FIG13_SHAPE
    relu = [s for s in shapes(runs) if s[0] == "relu"]
    if shape not in shapes(runs) and relu:
        notes.append(f"No MLP({shape[1]}, {shape[2]}); showing MLP({relu[-1][1]}, "
                     f"{relu[-1][2]}).")
        shape = relu[-1]
    rows = []
    for variant in ("plain", "lcw") if shape in shapes(runs) else ():
        best = chosen(runs, shape, variant)[1]
        grads = None if best is None else histories.artifact_json(best["run_id"], "gradients_init")
        if best is None or grads is None:
            notes.append(f"No gradient diagnostics of {MODELS[variant]}.")
            continue
        for layer, q, rms in zip(grads["layer"], grads["grad_quantiles"], grads["grad_rms"],
                                 strict=True):
            rows.append({"variant": variant, "run_id": best["run_id"], "layer": layer,
                         **dict(zip(QUANTILE_COLUMNS, q, strict=True)), "rms": rms})
    if shape not in shapes(runs):
        notes.append("No ReLU network in this sweep.")
    columns = ["variant", "run_id", "layer", *QUANTILE_COLUMNS, "rms"]
    data = pd.DataFrame.from_records(rows, columns=columns)

    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        axes = fig.subplots(1, 3)
        for ax, variant in zip(axes[:2], ("plain", "lcw"), strict=True):
            part = data[data["variant"] == variant]
            stats = [{"whislo": r.q01, "q1": r.q25, "med": r.q50, "q3": r.q75, "whishi": r.q99,
                      "label": str(r.layer)} for r in part.itertuples()]
            if stats:
                ax.bxp(stats, showfliers=False)
            ax.set_title(MODELS[variant], fontsize=9)
            ax.set_xlabel("layer")
            ax.tick_params(axis="x", labelsize=6)
        axes[0].set_ylabel("weight gradient")
        for variant in ("plain", "lcw"):
            part = data[data["variant"] == variant]
            if len(part):
                axes[2].semilogy(part["layer"], part["rms"], marker=".", label=MODELS[variant])
        axes[2].set_xlabel("layer")
        axes[2].set_ylabel("RMS weight gradient")
        if axes[2].lines:
            axes[2].legend(fontsize=7)

    sweep = runs.sweep
    return Figure(name="k-fig13-gradients", data=data, draw=draw, notes=notes, size=(12.0, 4.0),
                  title=f"K Fig. 13 — weight gradients at initialisation, {shape[0]} "
                        f"MLP({shape[1]}, {shape[2]}) · {sweep.spec} · {sweep.profile} · "
                        f"sweep {sweep.sweep_id}")


def _fig2_shapes(runs: SweepRuns) -> list[Shape]:
    present = shapes(runs)
    return [s for s in FIG2_SHAPES if s in present]


def _diagnostics(runs: SweepRuns, histories: Histories, when: str
                 ) -> list[tuple[Shape, str, str, dict[str, Any]]]:
    """(shape, variant, run id, the ``angles_<when>`` artifact) of K Figs. 2-11's runs."""
    out = []
    for shape in _fig2_shapes(runs):
        for variant in ("plain", "lcw"):
            best = chosen(runs, shape, variant)[1]
            if best is None:
                continue
            angles = histories.artifact_json(best["run_id"], f"angles_{when}")
            if angles is not None:
                out.append((shape, variant, best["run_id"], angles))
    return out


def angle_figure(runs: SweepRuns, histories: Histories, when: str = "init") -> Figure:
    """K Figs. 3, 5, 7, 11: boxplots (1, 25, 50, 75, 99 %) of θ of the first ten neurons at
    five layers, one row per network and model."""
    rows = []
    for shape, variant, run_id, angles in _diagnostics(runs, histories, when):
        for layer, per_neuron in zip(angles["detail_layers"], angles["angle_quantiles"],
                                     strict=True):
            for neuron, q in enumerate(per_neuron):
                rows.append({"network": f"{shape[0]} MLP({shape[1]}, {shape[2]})",
                             "variant": variant, "run_id": run_id, "layer": layer,
                             "neuron": neuron + 1, **dict(zip(QUANTILE_COLUMNS, q, strict=True))})
    columns = ["network", "variant", "run_id", "layer", "neuron", *QUANTILE_COLUMNS]
    data = pd.DataFrame.from_records(rows, columns=columns)

    def boxes(ax: Axes, part: pd.DataFrame) -> None:
        ax.bxp([{"whislo": p.q01, "q1": p.q25, "med": p.q50, "q3": p.q75, "whishi": p.q99,
                 "label": str(p.neuron)} for p in part.itertuples()], showfliers=False)

    sweep = runs.sweep
    return _panel_figure(f"k-fig2-angles-{when}", data, boxes, "θ (degrees)", 12.0,
                         f"K Figs. 3, 5, 7, 11 — angle θ per neuron ({when}) · {sweep.spec} · "
                         f"{sweep.profile} · sweep {sweep.sweep_id}")


def _panels(data: pd.DataFrame) -> list[tuple[tuple[str, str], list[int]]]:
    """((network, variant), its layers) in the data's order."""
    keys = list(dict.fromkeys(zip(data["network"], data["variant"], strict=True)))
    return [(key, sorted(set(data.loc[(data["network"] == key[0])
                                      & (data["variant"] == key[1]), "layer"])))
            for key in keys]


def _panel_figure(name: str, data: pd.DataFrame, plot: Callable[[Axes, pd.DataFrame], None],
                  ylabel: str, width: float, title: str) -> Figure:
    """A figure of K Figs. 2-11's kind: one row of axes per (network, variant) of ``data``, one
    column per layer; ``plot`` draws a panel's rows of ``data`` on its axes."""
    panels = _panels(data)

    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        if not panels:
            return
        n_cols = max(len(layers) for _, layers in panels)
        axes = np.atleast_2d(fig.subplots(len(panels), n_cols, squeeze=False))
        for r, ((network, variant), layers) in enumerate(panels):
            for c, layer in enumerate(layers):
                plot(axes[r, c], data[(data["network"] == network)
                                      & (data["variant"] == variant) & (data["layer"] == layer)])
                axes[r, c].set_title(f"{MODELS[variant]}, {network}, layer {layer}",
                                     fontsize=7)
                axes[r, c].tick_params(labelsize=6)
            axes[r, 0].set_ylabel(ylabel, fontsize=7)

    return Figure(name=name, data=data, draw=draw, size=(width, 2.2 * max(len(panels), 1)),
                  notes=[] if panels else ["No plain/LCW pair of K Figs. 2-11's networks."],
                  title=title)


def activation_figure(runs: SweepRuns, histories: Histories, when: str = "init") -> Figure:
    """K Figs. 2, 4, 6, 10: activations (samples × neurons) at five layers, one row per network
    and model; horizontal stripes are angle bias."""
    frames = []
    for shape, variant, run_id, angles in _diagnostics(runs, histories, when):
        for layer, matrix in zip(angles["detail_layers"], angles["activations"], strict=True):
            values = np.asarray(matrix, dtype=float)
            samples, neurons = np.indices(values.shape)
            frames.append(pd.DataFrame({
                "network": f"{shape[0]} MLP({shape[1]}, {shape[2]})", "variant": variant,
                "run_id": run_id, "layer": layer, "sample": samples.ravel(),
                "neuron": neurons.ravel(), "activation": values.ravel()}))
    columns = ["network", "variant", "run_id", "layer", "sample", "neuron", "activation"]
    data = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)

    def heatmap(ax: Axes, part: pd.DataFrame) -> None:
        grid = part.pivot(index="neuron", columns="sample", values="activation")
        ax.figure.colorbar(ax.imshow(grid.to_numpy(), aspect="auto", cmap="viridis"), ax=ax)

    sweep = runs.sweep
    return _panel_figure(f"k-fig2-activations-{when}", data, heatmap, "neuron", 14.0,
                         f"K Figs. 2, 4, 6, 10 — activations, samples across, neurons down "
                         f"({when}) · {sweep.spec} · {sweep.profile} · sweep {sweep.sweep_id}")
