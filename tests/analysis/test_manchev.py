"""Paper M's reports: published values, Table I cell by cell, Fig. 2, the bar chart and the
pre-training table against the hand-built store of ``conftest.py``; the feedforward report
(Tables III and IV, accuracy curves) on a hand-built sweep: the choice rule, partial and missing
cells, and the plotted data."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import manchev
from analysis.load import Histories, Sweep, SweepRuns, load_sweep
from analysis.report import REPORTS, builder
from tests.analysis.conftest import PRETRAIN_SPEC, PRETRAIN_STEPS, SPEC, SW1, Store

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def runs(store: Store) -> SweepRuns:
    return load_sweep(store.client(), SPEC)


def test_published_values_are_the_papers() -> None:
    got = {(t, v): (p.max_len, p.lr, p.penalty) for (t, v), p in manchev.TABLE_I.items()}
    assert got == {
        ("temporal_order", "plain"): (50, 0.01, None),
        ("temporal_order", "open"): (80, 0.001, 1.0),
        ("temporal_order", "oinit"): (120, 0.0001, None),
        ("temporal_order_3bit", "plain"): (50, 0.1, None),
        ("temporal_order_3bit", "open"): (70, 0.001, 1.0),
        ("temporal_order_3bit", "oinit"): (90, 0.0001, None),
        ("adding", "plain"): (80, 0.01, None),
        ("adding", "open"): (80, 0.01, 0.0001),
        ("adding", "oinit"): (100, 0.01, None),
        ("permutation", "plain"): (90, 0.0001, None),
        ("permutation", "open"): (140, 0.1, 0.01),
        ("permutation", "oinit"): (240, 0.1, None)}
    assert {d: (p.success_rate, p.mean_steps, p.repeats)
            for d, p in manchev.PRETRAIN.items()} == {"normal": (1.0, 22.77, 10_000),
                                                      "uniform": (1.0, 24.00, 10_000)}


# (task, variant) -> n_expected, n_runs, n_done, n_failed, n_diverged, partial,
#                    index in SW1 of the chosen run (None: missing), max T, α, λ
CELLS = {
    ("temporal_order", "plain"): (2, 2, 2, 0, 0, False, 1, 30, 0.01, 0.0),
    ("temporal_order", "open"): (4, 4, 4, 0, 0, False, 5, 60, 0.01, 1.0),
    ("temporal_order", "oinit"): (2, 2, 2, 0, 1, False, 7, 70, 0.1, 0.0),
    ("adding", "plain"): (2, 2, 1, 1, 0, True, 10, 40, 0.01, 0.0),
    ("adding", "open"): (4, 4, 4, 0, 0, False, 15, 50, 0.01, 0.1),
    ("adding", "oinit"): (2, 0, 0, 0, 0, True, None, None, None, None),
}


def test_max_length_cells_cell_by_cell(store: Store, runs: SweepRuns) -> None:
    cells = manchev.max_length_cells(runs)
    ids = [run_id for _, run_id in store.runs["sw-1"]]
    assert list(zip(cells["task"], cells["variant"], strict=True)) == list(CELLS)
    for (_, row), (key, want) in zip(cells.iterrows(), CELLS.items(), strict=True):
        n_exp, n_runs, n_done, n_failed, n_div, partial, index, t, lr, pen = want
        got = (row["n_expected"], row["n_runs"], row["n_done"], row["n_failed"],
               row["n_diverged"], row["partial"])
        assert got == (n_exp, n_runs, n_done, n_failed, n_div, partial), key
        values = [None if pd.isna(v) else v for v in row[["run_id", "max_len", "lr", "penalty"]]]
        assert values == [None if index is None else ids[index], t, lr, pen], key
        assert row["published"] == manchev.TABLE_I[key]
        if index is not None:
            assert SW1[index].max_len == t and SW1[index].lr == lr


def test_choice_rule_breaks_ties_by_iterations_then_rate_then_penalty() -> None:
    frame = pd.DataFrame({
        "run_id": ["a", "b", "c", "d", "e", "f"],
        "outcome": ["solved", "solved", "solved", "diverged", "failed", "solved"],
        "metrics.max_seq_len_solved": [40.0, 40.0, 40.0, 40.0, 90.0, 30.0],
        "metrics.iters_to_solve": [500.0, 300.0, 300.0, 300.0, 10.0, 10.0],
        "params.lr": [0.1, 0.1, 0.01, 0.01, 0.1, 0.1],
        "params.penalty": [0.1, 0.1, 1.0, 0.1, 0.1, 0.1]})
    assert list(manchev.rank(frame)["run_id"]) == ["d", "c", "b", "a", "f"]


def test_table_i_renders_published_beside_reproduced_with_partial_marks(
        runs: SweepRuns) -> None:
    table = manchev.max_length_table(runs)
    assert [[c.marked() for c in row] for row in table.rows] == [
        ["Temporal Order", "SRNN", "30", "50", "0.01", "0.01", "–", "–", "2/2"],
        ["Temporal Order", "SRNN+OPEN", "60", "80", "0.01", "0.001", "1", "1", "4/4"],
        ["Temporal Order", "SRNN+OINIT", "70", "120", "0.1", "0.0001", "–", "–",
         "2/2 (1 diverged)"],
        ["Adding", "SRNN", "40†", "80", "0.01†", "0.01", "–", "–", "1/2 (1 failed)"],
        ["Adding", "SRNN+OPEN", "50", "80", "0.01", "0.01", "0.1", "0.0001", "4/4"],
        ["Adding", "SRNN+OINIT", "missing", "100", "missing", "0.01", "–", "–", "0/2"]]
    assert table.incomplete() == [(3, "T"), (3, "α"), (5, "T"), (5, "α")]
    prov = table.provenance
    assert (prov.spec, prov.profile, prov.sweep_id) == (SPEC, "cpu", "sw-1")
    assert (prov.n_runs, prov.n_configurations, prov.n_expected) == (16, 14, 16)
    assert "Not in profile cpu: 3-bit Temporal Order, Random Permutation." in table.notes
    assert any("error_threshold = 0.04" in note for note in table.notes)


def stage_series(store: Store, run_index: int, metric: str, seq_len: int) -> list[tuple]:
    """(step, value) of a run's metric at one length, read straight from MLflow."""
    client = store.client()
    run_id = store.runs["sw-1"][run_index][1]
    lengths = {m.step: m.value for m in client.get_metric_history(run_id, "seq_len")}
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, metric)
                  if lengths.get(m.step) == seq_len)


def test_fig2_plots_each_models_run_at_the_longest_common_length(
        store: Store, runs: SweepRuns) -> None:
    data, used, notes = manchev.fig2_data(runs, Histories(store.client(), runs))
    # SRNN reached 30, so it trained at 40 but never at the paper's 60.
    assert used == 40 and notes == ["T = 40: no run of every model trained at the paper's "
                                    "T = 60."]
    ids = [run_id for _, run_id in store.runs["sw-1"]]
    chosen = {"plain": 1, "open": 5, "oinit": 7}
    assert data.groupby("variant")["run_id"].unique().map(list).to_dict() == {
        v: [ids[i]] for v, i in chosen.items()}
    for variant, index in chosen.items():
        for metric in manchev.FIG2_METRICS:
            series = data[(data["variant"] == variant) & (data["metric"] == metric)]
            want = stage_series(store, index, metric, 40)
            assert list(zip(series["step"], series["value"], strict=True)) == want
            # T = 40 is the fourth length: iterations 900..1200 of the run, 100..300 at T.
            assert list(series["iteration"]) == [100, 200, 300]


def test_fig2_at_the_papers_length_says_which_model_is_missing(
        store: Store, runs: SweepRuns) -> None:
    data, used, notes = manchev.fig2_data(runs, Histories(store.client(), runs), seq_len=60)
    assert used == 60 and notes == ["No SRNN run of temporal_order trained at T = 60."]
    assert set(data["variant"]) == {"open", "oinit"}
    series = data[(data["variant"] == "open") & (data["metric"] == "grad_norm_whh")]
    assert list(zip(series["step"], series["value"], strict=True)) == stage_series(
        store, 5, "grad_norm_whh", 60)


def test_figures_are_written_as_png_with_the_plotted_data(
        store: Store, runs: SweepRuns, tmp_path: Path) -> None:
    report = manchev.max_length_report(runs, Histories(store.client(), runs))
    assert [f.name for f in report.figures] == ["fig2-spectral-radius", "max-length-bars"]
    for figure in report.figures:
        path = figure.save(tmp_path)
        assert path == tmp_path / f"{figure.name}.png"
        assert path.read_bytes()[:8] == PNG and path.stat().st_size > 5_000
    bars = report.figures[1].data
    for (_, row), (key, want) in zip(bars.iterrows(), CELLS.items(), strict=True):
        assert (row["task"], row["variant"]) == key
        t = want[7]
        assert (math.isnan(row["measured"]) if t is None else row["measured"] == t)
        assert row["published"] == manchev.TABLE_I[key].max_len
        assert row["partial"] == want[5]
    assert "(partial: hatched)" in report.figures[1].title


def test_report_without_histories_has_tables_only(runs: SweepRuns) -> None:
    report = manchev.max_length_report(runs, None)
    assert [t.name for t in report.tables] == ["max-length"] and report.figures == []


def test_pretrain_table_pools_seeds_and_marks_the_failed_one(store: Store) -> None:
    runs = load_sweep(store.client(), PRETRAIN_SPEC)
    table = manchev.pretrain_table(runs)
    assert table.columns[:2] == ["Distribution", "success"]
    done = [steps for steps in PRETRAIN_STEPS.values() if steps is not None]
    for row, dist in zip(table.rows, ("normal", "uniform"), strict=True):
        steps = np.array([s for seed in done for s in seed[dist]], dtype=float)
        repeats = 6 * len(done)
        assert row[0].value == dist
        assert row[1].value == pytest.approx(len(steps) / repeats)
        assert row[3].value == pytest.approx(steps.mean())
        assert row[4].value == pytest.approx(steps.mean() + 1)
        assert row[6].value == pytest.approx(steps.std(ddof=1))
        assert (row[7].value, row[8].value, row[9].value) == (steps.min(), steps.max(), repeats)
        assert all(c.partial for c in (row[1], row[3], row[4], row[6], row[7], row[8], row[9]))
        published = manchev.PRETRAIN[dist]
        assert (row[2].value, row[5].value, row[10].value) == (
            published.success_rate, published.mean_steps, published.repeats)
        assert row[11].marked() == "2/3 (1 failed)"
    assert [c.marked() for c in table.rows[0][:3]] == ["normal", "91.67%†", "100%"]
    assert table.provenance.line().startswith(
        "spec orth-pretrain-convergence · profile smoke · sweep pc-1 · 3 runs → "
        "3 configurations of 3 expected (2 unsolved, 1 failed)")


# ---------------------------------------------------------------- ff-mnist (Tables III, IV)


FF_SPEC_TEXT = """\
name: ff-mnist
fixed: {layers: 10, hidden: 100, epochs: 10}
space:
  lr: [0.1, 0.01]
groups:
  - fixed: {variant: plain}
  - fixed: {variant: open}
    space: {penalty: [1.0, 0.01]}
  - fixed: {variant: oinit}
seed: 0
"""

FF_RUNS = [  # run_id, variant, lr, penalty, outcome, best accuracy
    ("p1", "plain", 0.1, None, "unsolved", 0.1135),
    ("p2", "plain", 0.01, None, "unsolved", 0.1135),
    ("o1", "open", 0.1, 1.0, "solved", 0.90),
    ("o2", "open", 0.1, 0.01, "solved", 0.95),
    ("o3", "open", 0.01, 1.0, "solved", 0.92),
    ("o4", "open", 0.01, 0.01, "diverged", None),
    ("i1", "oinit", 0.1, None, "solved", 0.93),
    ("i2", "oinit", 0.01, None, "failed", None),
]


def ff_sweep_runs(rows=FF_RUNS, spec_text: str | None = FF_SPEC_TEXT) -> SweepRuns:
    frame = pd.DataFrame({
        "run_id": [r[0] for r in rows], "trial_key": [r[0] for r in rows],
        "status": ["FINISHED"] * len(rows), "outcome": [r[4] for r in rows],
        "params.variant": [r[1] for r in rows], "params.lr": [r[2] for r in rows],
        "params.penalty": [r[3] for r in rows], "params.epochs": [10] * len(rows),
        "params.layers": [10] * len(rows),
        "metrics.best_test_accuracy": [r[5] for r in rows],
        "metrics.baseline_accuracy": [0.1135] * len(rows)})
    sweep = Sweep(spec="ff-mnist", sweep_id="s-1", profile="cpu", spec_sha256="", git_sha="",
                  n_configs=None, parent_run_id="parent", status="FINISHED",
                  experiment_id="0", start_time=0)
    return SweepRuns(sweep=sweep, runs=frame, n_runs=len(frame), spec_text=spec_text)


class FFHistories:
    """Stepwise metrics: ``test_accuracy`` rises by 0.1 per epoch from the run's index."""

    def get(self, run_id: str, key: str) -> pd.DataFrame:
        steps = [3000, 6000]
        if key == "epoch":
            return pd.DataFrame({"step": steps, "value": [1.0, 2.0]})
        start = [r[0] for r in FF_RUNS].index(run_id) / 100
        return pd.DataFrame({"step": steps, "value": [start, start + 0.1]})


def test_published_ff_values_are_the_papers():
    assert {v: (p.accuracy, p.lr, p.penalty) for v, p in manchev.TABLE_III.items()} == {
        "plain": (11.35, None, None), "open": (97.03, 0.01, 0.01), "oinit": (96.77, 0.01, None)}
    assert manchev.TABLE_IV == {0.1: 91.40, 0.01: 91.65, 0.001: 90.66, 0.0001: 88.80,
                                   1e-05: 72.81}


def test_registered_as_the_ff_mnist_report():
    assert REPORTS["ff-mnist"] == "analysis.manchev:ff_mnist_report"
    assert builder("ff-mnist") is manchev.ff_mnist_report


def test_table_iii_chooses_the_best_configuration_per_model():
    table = manchev.table_iii(ff_sweep_runs())
    rows = {row[0].text(): [c.marked() for c in row] for row in table.rows}
    # FF: a tie at the baseline goes to the smaller α.
    assert rows["FF"] == ["FF", "11.35", "11.35", "0.01", "–", "–", "–", "2/2"]
    # FF+OPEN: o2 wins; one configuration diverged, so the cell is complete but says so.
    assert rows["FF+OPEN"] == ["FF+OPEN", "95.00", "97.03", "0.1", "0.01", "0.01", "0.01",
                               "4/4 (1 diverged)"]
    # FF+OINIT: one of two configurations failed, so the row is partial.
    assert rows["FF+OINIT"] == ["FF+OINIT", "93.00†", "96.77", "0.1†", "0.01", "–", "–",
                                "1/2 (1 failed)"]
    assert any("11.35 %" in note for note in table.notes)
    assert any("epochs = 10 (paper 100)" in note for note in table.notes)


def test_table_iv_lists_every_published_alpha_and_marks_missing_ones():
    table = manchev.table_iv(ff_sweep_runs())
    rows = [[c.marked() for c in row] for row in table.rows]
    assert rows[0] == ["0.1", "90.00", "91.40", "1/1"]
    assert rows[1] == ["0.01", "92.00", "91.65", "1/1"]
    assert rows[2] == ["0.001", "–", "90.66", "not in this profile"]
    assert [r[0] for r in rows] == ["0.1", "0.01", "0.001", "0.0001", "1e-05"]


def test_without_a_spec_only_tracked_runs_count():
    table = manchev.table_iii(ff_sweep_runs(FF_RUNS[:3], spec_text=None))
    rows = {row[0].text(): [c.marked() for c in row] for row in table.rows}
    assert rows["FF+OPEN"][1] == "90.00" and rows["FF+OPEN"][-1] == "1/1"
    assert rows["FF+OINIT"][1] == "–"


def test_accuracy_curves_plot_the_chosen_runs(tmp_path):
    figure = manchev.accuracy_curves(ff_sweep_runs(), FFHistories())
    data = figure.data
    assert list(dict.fromkeys(data["run_id"])) == ["p2", "o2", "i1"]
    chosen = data[data["run_id"] == "o2"]
    assert chosen["epoch"].tolist() == [1.0, 2.0]
    assert chosen["accuracy"].tolist() == pytest.approx([3.0, 13.0])
    assert figure.save(tmp_path).read_bytes().startswith(b"\x89PNG")
