"""Paper K (Kutsuna, linearly constrained weights): the ``lcw-deep-mlp`` report (EXPERIMENTS.md
K-F12, K-F13, K-F2).

Tables:

- ``k-fig12``: per shape MLP(L, M), nonlinearity and model (plain, LCW, BN, WN): final and best
  training accuracy, final test accuracy, seconds per epoch and the overhead over the plain
  MLP of the same shape, beside what K §5 states. The dataset a sweep used is named in a note
  (the ``cpu`` profile trains on MNIST, the paper on CIFAR-10).
- ``k-angle-bias``: the initial diagnostics at a glance per shape and model: activation spread
  over samples in the first and last hidden layer, the spread of the neurons' mean angles θ in
  the last hidden layer and the ratio of the first to the last hidden layer's weight-gradient
  RMS (K Figs. 2-3, 6-7, 13).

Figures (with histories): training accuracy per epoch (K Fig. 12, left column); weight
gradients per layer at initialisation (K Fig. 13); θ per neuron and the activations at five
layers (K Figs. 2-11), the last three read from the runs' JSON artifacts.

Seconds per epoch are the trainer's ``seconds_per_epoch`` divided by its ``pack_size`` (a pack
of K members trains K configurations per epoch); times from a shared machine are noisy, and
an overhead compares trials of equal pack size only when the spec packs none (``pack_size:
1``, as ``lcw-deep-mlp`` does).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure as MplFigure

from analysis.figures import Figure
from analysis.groups import Group, group
from analysis.load import DONE, Histories, SweepRuns, param_values
from analysis.report import Report, provenance
from analysis.tables import Cell, Table

MODELS: dict[str, str] = {"plain": "MLP", "lcw": "MLP_LCW", "bn": "MLP_BN", "wn": "MLP_WN"}
"""Variant -> the paper's model name."""

DATASET_NAMES: dict[str, str] = {"mnist": "MNIST", "cifar10": "CIFAR-10",
                                 "cifar100": "CIFAR-100", "svhn": "SVHN"}
"""Dataset key -> name."""

Shape = tuple[str, int, int]
"""(activation, layers L, hidden M)."""

PUBLISHED: dict[tuple[str, int, int, str], str] = {
    ("sigmoid", 100, 128, "plain"): "10 % training accuracy throughout",
    ("sigmoid", 100, 128, "lcw"): "trains, faster than BN; time ≈ +55 %",
    ("sigmoid", 100, 128, "bn"): "trains; time above LCW's",
    ("sigmoid", 100, 128, "wn"): "does not train",
    ("sigmoid", 50, 256, "lcw"): "trains, faster than BN",
    ("sigmoid", 50, 256, "bn"): "trains",
    ("sigmoid", 50, 256, "wn"): "does not train",
    ("sigmoid", 5, 512, "lcw"): "trains, faster than BN",
    ("sigmoid", 5, 512, "bn"): "trains",
    ("relu", 20, 256, "plain"): "trains",
    ("relu", 20, 256, "lcw"): "explodes after a few updates",
}
"""What K §5 states (CIFAR-10, Fig. 12 and §5.2) per (activation, L, M, variant)."""

LCW_OVERHEAD = 0.55
"""K §5.1: MLP_LCW(100, 128) takes about 55 % more time than the plain MLP(100, 128)."""

FIG12_SHAPES: tuple[Shape, ...] = (("sigmoid", 100, 128), ("sigmoid", 50, 256),
                                   ("sigmoid", 5, 512))
"""K Fig. 12's networks."""
FIG13_SHAPE: Shape = ("relu", 20, 256)
"""K Fig. 13's network."""
FIG2_SHAPES: tuple[Shape, ...] = (("sigmoid", 10, 128), ("relu", 50, 128))
"""K Figs. 2-11's networks."""
QUANTILE_COLUMNS = ("q01", "q25", "q50", "q75", "q99")
"""The trainer's boxplot quantiles (1, 25, 50, 75, 99 %)."""


def shapes(runs: SweepRuns) -> list[Shape]:
    """The (activation, L, M) the sweep's configurations have, deepest first."""
    frame = runs.runs
    found = {(a, int(layers), int(hidden)) for a, layers, hidden in zip(
        param_values(frame, "activation"), param_values(frame, "layers"),
        param_values(frame, "hidden"), strict=True)
        if isinstance(a, str) and isinstance(layers, (int, float))
        and isinstance(hidden, (int, float))}
    return sorted(found, key=lambda s: (s[0] != "sigmoid", -s[1], s[2]))


def _values(shape: Shape, variant: str) -> dict[str, object]:
    activation, layers, hidden = shape
    return {"activation": activation, "layers": layers, "hidden": hidden, "variant": variant}


def _chosen(runs: SweepRuns, shape: Shape, variant: str) -> tuple[Group, pd.Series | None]:
    """The group of (shape, variant) and its configuration with the best training accuracy."""
    g = group(runs, _values(shape, variant))
    done = g.runs[g.runs["outcome"].isin(DONE)]
    column = "metrics.best_train_accuracy"
    if column not in done or done[column].isna().all():
        return g, None
    return g, done.sort_values([column, "run_id"], ascending=[False, True]).iloc[0]


def _metric(row: pd.Series | None, name: str) -> float | None:
    if row is None:
        return None
    value = row.get(f"metrics.{name}")
    return None if value is None or value != value else float(value)


def _seconds(row: pd.Series | None) -> float | None:
    seconds, pack = _metric(row, "seconds_per_epoch"), _metric(row, "pack_size")
    return None if seconds is None else seconds / (pack or 1.0)


def _dataset_notes(runs: SweepRuns) -> list[str]:
    used = sorted({v for v in param_values(runs.runs, "dataset") if isinstance(v, str)})
    names = ", ".join(DATASET_NAMES.get(d, d) for d in used) or "unknown"
    note = f"Dataset: {names} (profile {runs.sweep.profile}); K's Fig. 12 used CIFAR-10."
    if "mnist" in used:
        note += (" MNIST pixels in [0, 1] have a nonzero mean vector, so angle bias acts from "
                 "the first layer on.")
    return [note]


def _protocol_notes(runs: SweepRuns) -> list[str]:
    notes = []
    epochs = sorted({int(v) for v in param_values(runs.runs, "epochs")
                     if isinstance(v, (int, float))})
    if epochs and epochs != [100]:
        notes.append("Epochs: " + ", ".join(map(str, epochs)) + " (K: 100).")
    sizes = sorted({int(v) for v in param_values(runs.runs, "train_size")
                    if isinstance(v, (int, float))})
    if sizes:
        notes.append("Training subsets of " + ", ".join(f"{s:,}" for s in sizes)
                     + " images (K: the whole training split).")
    return notes


def fig12_table(runs: SweepRuns) -> Table:
    """Accuracies, time per epoch and overhead over plain per shape and model."""
    rows = []
    for shape in shapes(runs):
        activation, layers, hidden = shape
        plain_time = _seconds(_chosen(runs, shape, "plain")[1])
        for variant, name in MODELS.items():
            g, best = _chosen(runs, shape, variant)
            if g.runs.empty and not g.n_expected:
                continue
            partial = g.partial
            seconds = _seconds(best)
            overhead = None if seconds is None or not plain_time or variant == "plain" \
                else f"{100 * (seconds / plain_time - 1):+.0f} %"
            percent = {k: None if _metric(best, k) is None else 100 * _metric(best, k)
                       for k in ("train_accuracy", "best_train_accuracy", "test_accuracy")}
            rows.append([f"MLP({layers}, {hidden})", activation, name,
                         Cell(percent["train_accuracy"], ".1f", partial),
                         Cell(percent["best_train_accuracy"], ".1f", partial),
                         Cell(percent["test_accuracy"], ".1f", partial),
                         Cell(seconds, ".2f", partial),
                         Cell(overhead, "", partial and variant != "plain"),
                         "" if best is None else str(best["outcome"]),
                         PUBLISHED.get((*shape, variant), ""), g.count_text()])
    notes = ["Per shape and model the configuration with the best training accuracy; "
             "accuracies in % after the last epoch (best: over epochs).",
             "s / epoch: training time per epoch and configuration (evaluation excluded); "
             "vs plain: relative to the plain MLP of the same shape. K §5.1 measured "
             f"+{100 * LCW_OVERHEAD:.0f} % for MLP_LCW(100, 128) on a GPU.",
             "paper: what K §5 states for CIFAR-10 (Fig. 12, §5.2).",
             *_dataset_notes(runs), *_protocol_notes(runs)]
    return Table(name="k-fig12", title="K Fig. 12 — deep MLPs: accuracy and time per epoch",
                 columns=["network", "f", "model", "train %", "best train %", "test %",
                          "s / epoch", "vs plain", "outcome", "paper", "configurations"],
                 rows=rows, provenance=provenance(runs), notes=notes)


def angle_bias_table(runs: SweepRuns) -> Table:
    """The initial diagnostics per shape and model (summaries ``init_*`` of the trainer)."""
    rows = []
    for shape in shapes(runs):
        for variant, name in MODELS.items():
            g, best = _chosen(runs, shape, variant)
            if best is None or _metric(best, "init_act_std_last") is None:
                continue
            rows.append([f"MLP({shape[1]}, {shape[2]})", shape[0], name,
                         Cell(_metric(best, "init_act_std_first"), ".3g", g.partial),
                         Cell(_metric(best, "init_act_std_last"), ".3g", g.partial),
                         Cell(_metric(best, "init_angle_std_neurons_last"), ".3g", g.partial),
                         Cell(_metric(best, "init_grad_ratio"), ".3g", g.partial)])
    notes = ["At initialisation, on the trainer's diagnostic samples: 'act spread' = the "
             "standard deviation of a neuron's activation over samples, averaged over the "
             "layer's neurons (near 0: the layer's output no longer depends on the input, K "
             "Fig. 2); 'θ bias' = the standard deviation over neurons of their mean angle θ "
             "(degrees; K Fig. 3 vs 7); 'grad ratio' = RMS weight gradient of the first "
             "hidden layer over the last one's (≫ 1: K Fig. 13's growth towards the input).",
             "Published (K Figs. 2-7, 13): plain sigmoid MLPs lose the input dependence in "
             "deep layers and their θ is biased per neuron; LCW keeps both; ReLU MLP_LCW's "
             "gradients grow exponentially towards the input.", *_dataset_notes(runs)]
    return Table(name="k-angle-bias", title="K Figs. 2-7, 13 — angle bias at initialisation",
                 columns=["network", "f", "model", "act spread, layer 1",
                          "act spread, last layer", "θ bias, last layer", "grad ratio"],
                 rows=rows, provenance=provenance(runs), notes=notes)


def train_accuracy_figure(runs: SweepRuns, histories: Histories) -> Figure:
    """K Fig. 12 (a, d, g): training accuracy per epoch, one panel per network of Fig. 12 (every
    sigmoid network when the sweep has none of them)."""
    sigmoid = [s for s in shapes(runs) if s[0] == "sigmoid"]
    rows = []
    for shape in [s for s in sigmoid if s in FIG12_SHAPES] or sigmoid:
        for variant in MODELS:
            best = _chosen(runs, shape, variant)[1]
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
            ax.set_xlabel("epoch")
            if ax.lines:
                ax.legend(fontsize=7)
        axes[0].set_ylabel("training accuracy %")

    sweep = runs.sweep
    return Figure(name="k-fig12-train-accuracy", data=data[columns], draw=draw,
                  title=f"K Fig. 12 — training accuracy per epoch (sigmoid) · {sweep.spec} · "
                        f"{sweep.profile} · sweep {sweep.sweep_id}")


def _artifact(histories: Histories, run_id: str, name: str) -> dict[str, Any] | None:
    """The run's JSON artifact ``name`` (None when it has none)."""
    try:
        path = histories.client.download_artifacts(run_id, f"{name}.json")
    except Exception:  # MLflow raises several types for a missing artifact
        return None
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def gradient_figure(runs: SweepRuns, histories: Histories, shape: Shape = FIG13_SHAPE
                    ) -> Figure:
    """K Fig. 13: per layer, the distribution of the weight gradients at initialisation
    (boxes: 25-75 %, whiskers 1-99 %) of the plain MLP and MLP_LCW, and their RMS (log)."""
    notes: list[str] = []
    relu = [s for s in shapes(runs) if s[0] == "relu"]
    if shape not in shapes(runs) and relu:
        notes.append(f"No MLP({shape[1]}, {shape[2]}); showing MLP({relu[-1][1]}, "
                     f"{relu[-1][2]}).")
        shape = relu[-1]
    rows = []
    for variant in ("plain", "lcw") if shape in shapes(runs) else ():
        best = _chosen(runs, shape, variant)[1]
        grads = None if best is None else _artifact(histories, best["run_id"], "gradients_init")
        if grads is None:
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
            best = _chosen(runs, shape, variant)[1]
            if best is None:
                continue
            angles = _artifact(histories, best["run_id"], f"angles_{when}")
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


def lcw_report(runs: SweepRuns, histories: Histories | None) -> Report:
    """Report of ``lcw-deep-mlp``: the two tables; with histories, the figures."""
    figures: Sequence[Figure] = [] if histories is None else [
        train_accuracy_figure(runs, histories), gradient_figure(runs, histories),
        angle_figure(runs, histories, "init"), activation_figure(runs, histories, "init"),
        angle_figure(runs, histories, "final")]
    return Report(runs=runs, tables=[fig12_table(runs), angle_bias_table(runs)],
                  figures=list(figures))
