"""The tables of the ``lcw-deep-mlp`` report (paper K, :mod:`analysis.reports.lcw_deep_mlp`),
and the choice of the configuration shown per network and model that its figures share.

- ``k-fig12``: per shape MLP(L, M), nonlinearity and model (plain, LCW, BN, WN): final, best
  and mean training accuracy (the mean over the epochs: K's "rate of increase"), final test
  accuracy (a diverged run's final accuracies, of the net frozen at its divergence, are not
  shown), seconds per epoch and the overhead over the plain MLP of the same shape, beside
  what K §5 states (:mod:`analysis.published.kutsuna`). The dataset a sweep used is named in
  a note (the ``cpu`` profile trains on MNIST, the paper on CIFAR-10).
- ``k-angle-bias``: the initial diagnostics at a glance per shape and model: activation spread
  over samples in the first and last hidden layer, the spread of the neurons' mean angles θ in
  the last hidden layer and the ratio of the first to the last hidden layer's weight-gradient
  RMS (K Figs. 2-3, 6-7, 13).
"""

from __future__ import annotations

import pandas as pd

from analysis.groups import Group, first_ranked, group
from analysis.load import SweepRuns, numeric_values, param_values
from analysis.published.kutsuna import EPOCHS, LCW_OVERHEAD, PUBLISHED, Shape
from analysis.report import provenance
from analysis.tables import OUTSIDE, Cell, Table

MODELS: dict[str, str] = {"plain": "MLP", "lcw": "MLP_LCW", "bn": "MLP_BN", "wn": "MLP_WN"}
"""Variant -> the paper's model name."""

DATASET_NAMES: dict[str, str] = {"mnist": "MNIST", "cifar10": "CIFAR-10",
                                 "cifar100": "CIFAR-100", "svhn": "SVHN"}
"""Dataset key -> name."""


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


def chosen(runs: SweepRuns, shape: Shape, variant: str) -> tuple[Group, pd.Series | None]:
    """The group of (shape, variant) and its configuration with the best training accuracy
    (the run the tables and figures show for it, ties to the smaller α: :func:`first_ranked`;
    None when none finished)."""
    g = group(runs, _values(shape, variant))
    return g, first_ranked(g.runs, "best_train_accuracy")


def _metric(row: pd.Series | None, name: str) -> float | None:
    if row is None:
        return None
    value = row.get(f"metrics.{name}")
    return None if value is None or value != value else float(value)


def seconds_per_epoch(row: pd.Series | None) -> float | None:
    """A run's training seconds per epoch and configuration: its pack's time over the pack's
    size (None when not measured)."""
    seconds, pack = _metric(row, "seconds_per_epoch"), _metric(row, "pack_size")
    return None if seconds is None else seconds / (pack or 1.0)


def device(row: pd.Series) -> str:
    """The ``device`` a run trained on (``cpu``, ``cuda`` or ``cuda:N``: a sweep's trial logs
    ``auto`` resolved to the device it holds, ``sweeps.trial.resolve_device``); ``cpu``, the
    trainer's default, when it logged none."""
    value = row.get("params.device")
    return value if isinstance(value, str) else "cpu"


ACCURACY_COLUMNS = ("train_accuracy", "best_train_accuracy", "mean_train_accuracy",
                    "test_accuracy")
"""The trainer's accuracies the table shows, in its column order."""
FINAL = ("train_accuracy", "test_accuracy")
"""The accuracies after the last epoch, which a diverged run's row leaves out."""
DIVERGED_NOTE = ("diverged: the training loss became NaN or inf and the net was frozen there; "
                 "its train % and test % after the last epoch (of the frozen net) are not "
                 "shown, and its best and mean count the epochs from the one it diverged in "
                 "as 0.")
"""The note of a table that shows a diverged run."""


def _accuracy_cells(row: pd.Series | None, partial: bool) -> list[Cell]:
    """The row's accuracies in % (:data:`ACCURACY_COLUMNS`), with a diverged run's final
    ones (:data:`FINAL`) as ``–``.

    The trainer counts a diverged member's epochs from its divergence on as 0 in its best and
    mean, while its final accuracies are of the net frozen at the divergence (NaN outputs pick
    one class): shown, the row would read a best below its final accuracy. The summaries
    stay as the trainer wrote them (other code and stored runs depend on them)."""
    diverged = row is not None and row["outcome"] == "diverged"
    cells = []
    for name in ACCURACY_COLUMNS:
        value = _metric(row, name)
        cells.append(Cell() if diverged and name in FINAL else
                     Cell(None if value is None else 100 * value, ".1f", partial))
    return cells


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
    epochs = numeric_values(runs.runs, "epochs", int)
    if epochs and epochs != [EPOCHS]:
        notes.append("Epochs: " + ", ".join(map(str, epochs)) + f" (K: {EPOCHS}).")
    sizes = numeric_values(runs.runs, "train_size", int)
    if sizes:
        notes.append("Training subsets of " + ", ".join(f"{s:,}" for s in sizes)
                     + " images (K: the whole training split).")
    return notes


def _timing_notes(runs: SweepRuns) -> list[str]:
    """Why the times of CPU runs that kept subnormal numbers are not comparable to K's."""
    kept = [(mode, device) for mode, device in zip(param_values(runs.runs, "subnormals"),
                                                   param_values(runs.runs, "device"), strict=True)
            if mode != "flush" and not str(device).startswith("cuda")]
    if not kept:
        return []
    return ["Subnormals kept (IEEE 754) on the CPU by some runs (`subnormals: keep`, or tracked "
            "before the key existed): the gradients of the nets that do not train (plain, WN) "
            "vanish through subnormal numbers, which many CPUs compute several times slower, "
            "so their s / epoch read high and the overheads vs plain low; `subnormals: flush` "
            "(the default) gives the same accuracies without that cost."]


def fig12_table(runs: SweepRuns) -> Table:
    """Accuracies, time per epoch and overhead over plain per shape and model; a row of
    K's statements that the profile does not run is marked as such."""
    rows = []
    diverged = False
    shown: set[tuple[str, int, int, str]] = set()
    for shape in shapes(runs):
        activation, layers, hidden = shape
        plain_time = seconds_per_epoch(chosen(runs, shape, "plain")[1])
        for variant, name in MODELS.items():
            g, best = chosen(runs, shape, variant)
            if g.runs.empty and not g.n_expected:
                continue
            partial = g.partial
            seconds = seconds_per_epoch(best)
            overhead = None if seconds is None or not plain_time or variant == "plain" \
                else f"{100 * (seconds / plain_time - 1):+.0f} %"
            diverged |= best is not None and best["outcome"] == "diverged"
            shown.add((*shape, variant))
            rows.append([f"MLP({layers}, {hidden})", activation, name,
                         *_accuracy_cells(best, partial),
                         Cell(seconds, ".2f", partial),
                         Cell(overhead, "", partial and variant != "plain"),
                         "" if best is None else str(best["outcome"]),
                         PUBLISHED.get((*shape, variant), ""), g.count_text()])
    for (activation, layers, hidden, variant), said in PUBLISHED.items():
        if (activation, layers, hidden, variant) in shown:
            continue
        rows.append([f"MLP({layers}, {hidden})", activation, MODELS[variant], *[OUTSIDE] * 6,
                     OUTSIDE, said, OUTSIDE])
    notes = ["Per shape and model the configuration with the best training accuracy; "
             "accuracies in % after the last epoch (best: over epochs; mean: over the "
             "scheduled epochs, the area under the training curve, which K's 'higher rate of "
             "increase' of LCW over BN is judged on).",
             "s / epoch: training time per epoch and configuration (evaluation excluded); "
             "vs plain: relative to the plain MLP of the same shape. K §5.1 measured "
             f"+{100 * LCW_OVERHEAD:.0f} % for MLP_LCW(100, 128) on a GPU.",
             "paper: what K §5 states for CIFAR-10 (Fig. 12, §5.2).",
             *([DIVERGED_NOTE] if diverged else []),
             *_dataset_notes(runs), *_protocol_notes(runs), *_timing_notes(runs)]
    return Table(name="k-fig12", title="K Fig. 12 — deep MLPs: accuracy and time per epoch",
                 columns=["network", "f", "model", "train %", "best train %", "mean train %",
                          "test %", "s / epoch", "vs plain", "outcome", "paper",
                          "configurations"],
                 rows=rows, provenance=provenance(runs), notes=notes)


def angle_bias_table(runs: SweepRuns) -> Table:
    """The initial diagnostics per shape and model (summaries ``init_*`` of the trainer)."""
    rows = []
    for shape in shapes(runs):
        for variant, name in MODELS.items():
            g, best = chosen(runs, shape, variant)
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
