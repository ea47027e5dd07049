"""Report of ``polyphonic-music`` (paper G §4.2, EXPERIMENTS.md G-T42): Tables 4.2 and 4.3, the
NLL per time step of a tanh RNN predicting piano rolls, beside the published values
(:mod:`analysis.published.galvan`), and the NLL over training (G Fig. 4.3).

The trainer logs two conventions of the NLL per time step, both on every split: ``*_nll``
(G eq. 4.2: each song's NLL over its length, averaged over songs) and ``*_nll_frame``
(Boulanger-Lewandowski et al.: all frames pooled, the convention of the published references
of Table 4.3). Table 4.2 here shows G's convention, with the pooled test NLL beside it; Table
4.3 shows both. G gives no early stopping but marks the best validation value (Fig. 4.3's
stars): every number is taken at each configuration's evaluation with the lowest validation
NLL (the trainer's ``selected_*`` summaries). A row averages the configurations (seeds) of
its dataset, width H and α that trained to their end.
"""

from __future__ import annotations

import math
from typing import TypedDict

import pandas as pd
from matplotlib.figure import Figure as MplFigure

from analysis.claims import Claim, beats, judge, ordered
from analysis.figures import Figure, epoch_axis
from analysis.groups import Group, done_runs, first_ranked, group, protocol_notes
from analysis.load import Histories, SweepRuns, param_values
from analysis.published.galvan import (
    MUSIC_DATASET,
    MUSIC_PROTOCOL,
    TABLE_4_2,
    TABLE_4_3,
    TABLE_4_3_LABELS,
)
from analysis.report import Report, expected, provenance
from analysis.tables import OUTSIDE, Cell, Table

DATASETS: dict[str, str] = {"musedata": "MuseData", "jsb_chorales": "JSB Chorales",
                            "nottingham": "Nottingham", "piano_midi": "Piano-midi.de"}
"""``dataset`` -> the name Boulanger-Lewandowski et al. give the set."""

ROW_KEYS = ("dataset", "hidden", "lr")
"""The params that make one row of Table 4.2."""


class RowKey(TypedDict):
    """The params of one row of Table 4.2 (:data:`ROW_KEYS`), typed as the rows read them."""

    dataset: str
    hidden: int
    lr: float

CONVENTION_NOTE = ("NLL per time step in nats. G eq. 4.2: each song's NLL divided by its "
                   "number of predicted frames, averaged over the songs; pooled: the NLL of "
                   "all predicted frames divided by their number (Boulanger-Lewandowski et "
                   "al.'s convention, that of the published references of Table 4.3).")

PREDICTED = {False: "frames 2 … L of a song of L (its first is read only, as in G's code)",
             True: "every frame of a song, the first from a silent input"}
"""``predict_first`` -> the frames predicted, in words (runs from before the key predicted
every frame)."""


def predicted_note(runs: SweepRuns) -> str:
    """Which frames the sweep's runs predict, from their ``predict_first``."""
    kinds = sorted({v if isinstance(v, bool) else True
                    for v in param_values(runs.runs, "predict_first")})
    return "Predicted: " + "; ".join(PREDICTED[k] for k in kinds) + "."


def _rows(runs: SweepRuns) -> list[RowKey]:
    """The (dataset, hidden, lr) combinations the spec defines or the sweep tracked, with
    MuseData's published widths first, in order."""
    found: list[tuple] = []
    spec = expected(runs)
    if spec is not None and all(k in spec for k in ROW_KEYS):
        found += [tuple(r) for r in spec[list(ROW_KEYS)].itertuples(index=False)]
    frame = runs.runs
    found += list(zip(*(param_values(frame, k) for k in ROW_KEYS), strict=True))
    unique = {(str(d), int(h), float(lr)) for d, h, lr in found if d is not None}
    order = list(DATASETS)
    return [RowKey(dataset=d, hidden=h, lr=lr) for d, h, lr in sorted(
        unique, key=lambda k: (order.index(k[0]) if k[0] in order else len(order), *k))]


def _mean_value(g: Group, summary: str) -> float | None:
    """The mean of ``selected_<summary>`` over the row's finished configurations; None where
    none of them logged it."""
    column = f"metrics.selected_{summary}"
    done = g.done
    values = done[column].dropna() if column in done else pd.Series(dtype=float)
    return float(values.mean()) if len(values) else None


def _mean(g: Group, summary: str, fmt: str = ".2f") -> Cell:
    """:func:`_mean_value` as a cell, marked partial where the row is."""
    return Cell(_mean_value(g, summary), fmt, g.partial)


def _notes(runs: SweepRuns) -> list[str]:
    notes = [CONVENTION_NOTE, predicted_note(runs),
             "Every value is taken at the evaluation with the lowest validation NLL (G Fig. "
             "4.3's stars), averaged over the row's finished configurations."]
    baseline = runs.runs.get("metrics.baseline_valid_nll")
    if baseline is not None and baseline.notna().any():
        notes.append("Notes independent of the past (each at its training frequency): "
                     "validation NLL " + ", ".join(sorted({f"{v:.2f}" for v in baseline.dropna()}))
                     + "; a configuration below it is 'solved'.")
    return notes + protocol_notes(runs, MUSIC_PROTOCOL, "the NLL", ("train_size",))


def table_4_2(runs: SweepRuns) -> Table:
    """G Table 4.2: train and test NLL per width H, for every dataset and α of the sweep, G's
    MuseData values beside (at G's α only)."""
    rows = []
    for key in _rows(runs):
        g = group(runs, key)
        published = (TABLE_4_2.get(key["hidden"])
                     if key["dataset"] == MUSIC_DATASET and math.isclose(
                         key["lr"], MUSIC_PROTOCOL["lr"]) else None)
        rows.append([
            DATASETS.get(key["dataset"], key["dataset"]), Cell(key["hidden"], "d"),
            Cell(key["lr"], "g"), _mean(g, "train_nll"),
            Cell(None if published is None else published.train, ".2f"),
            _mean(g, "test_nll"), Cell(None if published is None else published.test, ".2f"),
            _mean(g, "test_nll_frame"), _mean(g, "epoch", ".0f"), g.count_text()])
    for hidden in sorted(set(TABLE_4_2) - set(_published_widths(runs))):
        pub = TABLE_4_2[hidden]
        rows.append([DATASETS[MUSIC_DATASET], Cell(hidden, "d"), Cell(MUSIC_PROTOCOL["lr"], "g"),
                     OUTSIDE, Cell(pub.train, ".2f"), OUTSIDE, Cell(pub.test, ".2f"), OUTSIDE,
                     OUTSIDE, OUTSIDE])
    return Table(name="polyphonic-table-4-2",
                 title="G Table 4.2 — NLL per time step of the tanh RNN by hidden units "
                       "(G eq. 4.2)",
                 columns=["dataset", "H", "α", "train NLL", "train (paper)", "test NLL",
                          "test (paper)", "test NLL pooled", "epoch", "configurations"],
                 rows=rows, provenance=provenance(runs),
                 notes=[*_notes(runs), "Published: Galvan, Table 4.2 (MuseData, μ = 10⁻³, "
                        "τ = 3, songs cut at 300 steps); the other sets are not in the thesis."])


def _published_widths(runs: SweepRuns) -> list[int]:
    """The widths H the sweep runs on MuseData at G's α (the rows Table 4.2 publishes)."""
    return [k["hidden"] for k in _rows(runs) if k["dataset"] == MUSIC_DATASET
            and math.isclose(k["lr"], MUSIC_PROTOCOL["lr"])]


def polyphonic_claims(runs: SweepRuns) -> list[Claim]:
    """G-T42: on MuseData the test NLL grows with the width H (Table 4.2, at G's α); G's best
    RNN beats the published vanilla-RNN reference (Table 4.3, pooled convention)."""
    widths = sorted(set(_published_widths(runs)))
    groups = {h: group(runs, {"dataset": MUSIC_DATASET, "hidden": h,
                              "lr": MUSIC_PROTOCOL["lr"]}) for h in widths}
    values = {f"H={h}": _mean_value(g, "test_nll") for h, g in groups.items()}
    shown = {k: v for k, v in values.items() if v is not None}
    partial = any(g.partial for g in groups.values())
    text = ("MuseData test NLL grows with H, the smallest width best (paper "
            + " / ".join(f"{TABLE_4_2[h].test:.2f}" for h in sorted(TABLE_4_2)) + " for H = "
            + ", ".join(map(str, sorted(TABLE_4_2))) + ")")
    claims = [ordered("G-T42", text, shown, list(shown), partial=partial, rising=True)
              if len(shown) >= 2
              else judge("G-T42", text, None, "fewer than two widths measured on MuseData at "
                         f"α = {MUSIC_PROTOCOL['lr']:g}")]
    best, g = _best_musedata(runs)
    ref = TABLE_4_3["state_of_art_rnn"].test
    value = None if best is None else best.get("metrics.selected_test_nll_frame")
    value = None if value is None or value != value else float(value)
    claims.append(beats("G-T42", f"the best RNN beats the published vanilla-RNN reference on "
                        f"MuseData test NLL, pooled (paper {TABLE_4_3['ours'].test:.2f} vs "
                        f"{ref:.2f})", {"this sweep's best": value, "reference": ref},
                        ["this sweep's best"], ["reference"], higher=False, partial=g.partial))
    return claims


def _best_musedata(runs: SweepRuns) -> tuple[pd.Series | None, Group]:
    """The finished MuseData configuration with the lowest selected validation NLL."""
    g = group(runs, {"dataset": MUSIC_DATASET})
    return first_ranked(g.runs, "selected_valid_nll", lowest=True), g


def table_4_3(runs: SweepRuns) -> Table:
    """G Table 4.3: the published references and G's best RNN on MuseData beside this
    sweep's best configuration on validation, in both conventions."""
    rows = [[TABLE_4_3_LABELS[name], Cell(pub.train, ".2f"), Cell(pub.test, ".2f"), "paper"]
            for name, pub in TABLE_4_3.items()]
    best, g = _best_musedata(runs)
    absent = [] if len(g.runs) or g.n_expected else [
        "This sweep has no MuseData configuration (the profile trains another set)."]
    label = "this sweep, best on validation"
    if best is not None:
        label += f" (H = {int(best['params.hidden'])}, α = {float(best['params.lr']):g})"
    for convention, suffix in (("G eq. 4.2", ""), ("pooled", "_frame")):
        values = [None if best is None else best.get(f"metrics.selected_{split}_nll{suffix}")
                  for split in ("train", "test")]
        rows.append([label, *(OUTSIDE if absent else Cell(v, ".2f", g.partial) for v in values),
                     convention])
    return Table(name="polyphonic-table-4-3",
                 title="G Table 4.3 — MuseData NLL per time step beside the published results",
                 columns=["model", "train NLL", "test NLL", "convention"],
                 rows=rows, provenance=provenance(runs),
                 notes=[*absent, *_notes(runs), "Published: Galvan, Table 4.3 (the references are "
                        "Boulanger-Lewandowski et al., ICML 2012, as G quotes them)."])


def nll_curves(runs: SweepRuns, histories: Histories) -> Figure:
    """G Fig. 4.3: train and validation NLL (eq. 4.2) after every evaluation of each
    configuration, one panel per dataset, one colour per width and rate."""
    rows = []
    frame = done_runs(runs.runs)
    for _, run in frame.iterrows():
        epochs = histories.get(run["run_id"], "epoch").rename(columns={"value": "epoch"})
        for split in ("train", "valid"):
            series = histories.get(run["run_id"], f"{split}_nll").merge(epochs, on="step",
                                                                        how="left")
            rows.append(pd.DataFrame({
                "dataset": run.get("params.dataset"), "hidden": run.get("params.hidden"),
                "lr": run.get("params.lr"), "seed": run.get("params.seed"),
                "run_id": run["run_id"], "split": split, "epoch": series["epoch"],
                "nll": series["value"]}))
    columns = ["dataset", "hidden", "lr", "seed", "run_id", "split", "epoch", "nll"]
    data = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=columns)
    notes = [] if rows else ["No configuration trained to its end."]

    def draw(data: pd.DataFrame, fig: MplFigure) -> None:
        sets = list(dict.fromkeys(data["dataset"])) or [MUSIC_DATASET]
        axes = fig.subplots(1, len(sets), squeeze=False)[0]
        for ax, name in zip(axes, sets, strict=True):
            mine = data[data["dataset"] == name]
            for i, ((hidden, lr), curves) in enumerate(mine.groupby(["hidden", "lr"])):
                for split, style, marker in (("train", "-", "."), ("valid", "--", "x")):
                    for _, run in curves[curves["split"] == split].groupby("run_id"):
                        ax.plot(run["epoch"], run["nll"], style, color=f"C{i}", marker=marker,
                                label=f"H = {hidden}, α = {lr:g}, {split}")
            ax.set_title(DATASETS.get(name, name), fontsize=9)
            epoch_axis(ax)
            ax.set_ylabel("NLL per time step (G eq. 4.2)")
            ax.set_yscale("log")
            if name == MUSIC_DATASET:
                tests = [pub.test for pub in TABLE_4_2.values()]
                ax.axhspan(min(tests), max(tests), color="grey", alpha=0.3,
                           label="G Table 4.2, test (H = 50…300)")
            ax.legend(fontsize=6)

    sweep = runs.sweep
    return Figure(name="polyphonic-nll", data=data[columns], draw=draw, notes=notes,
                  title=f"G Fig. 4.3 — train (solid, ·) and validation (dashed, ×) NLL over "
                        f"training · {sweep.spec} · {sweep.profile} · sweep {sweep.sweep_id}")


def polyphonic_report(runs: SweepRuns, histories: Histories | None) -> Report:
    """Report of ``polyphonic-music``: Tables 4.2 and 4.3 and their claims; with histories,
    the NLL curves."""
    figures = [] if histories is None else [nll_curves(runs, histories)]
    return Report(runs=runs, tables=[table_4_2(runs), table_4_3(runs)], figures=figures,
                  claims=polyphonic_claims(runs))
