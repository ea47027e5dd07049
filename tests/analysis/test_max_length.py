"""Report of ``synthetic-max-length``: Table I cell by cell, the choice rule, Fig. 2 and the bar
chart against the hand-built store of ``conftest.py``."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.load import Histories, SweepRuns, load_sweep
from analysis.published.manchev import FIG2_T, TABLE_I
from analysis.reports import max_length
from tests.analysis.conftest import SPEC, SW1, Store, frame_runs

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def runs(store: Store) -> SweepRuns:
    return load_sweep(store.client(), SPEC)


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
    cells = max_length.max_length_cells(runs)
    ids = [run_id for _, run_id in store.runs["sw-1"]]
    assert list(zip(cells["task"], cells["variant"], strict=True)) == list(CELLS)
    for (_, row), (key, want) in zip(cells.iterrows(), CELLS.items(), strict=True):
        n_exp, n_runs, n_done, n_failed, n_div, partial, index, t, lr, pen = want
        got = (row["n_expected"], row["n_runs"], row["n_done"], row["n_failed"],
               row["n_diverged"], row["partial"])
        assert got == (n_exp, n_runs, n_done, n_failed, n_div, partial), key
        values = [None if pd.isna(v) else v for v in row[["run_id", "max_len", "lr", "penalty"]]]
        assert values == [None if index is None else ids[index], t, lr, pen], key
        assert row["published"] == TABLE_I[key]
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
    assert list(max_length.rank_max_length(frame)["run_id"]) == ["d", "c", "b", "a", "f"]


def test_table_i_renders_published_beside_reproduced_with_partial_marks(
        runs: SweepRuns) -> None:
    table = max_length.max_length_table(runs)
    measured = [  # problem, model, T, α, λ, configurations
        ("Temporal Order", "SRNN", "30", "0.01", "–", "2/2"),
        ("Temporal Order", "SRNN+OPEN", "60", "0.01", "1", "4/4"),
        ("Temporal Order", "SRNN+OINIT", "70", "0.1", "–", "2/2 (1 diverged)"),
        ("Adding", "SRNN", "40†", "0.01†", "–", "1/2 (1 failed)"),
        ("Adding", "SRNN+OPEN", "50", "0.01", "0.1", "4/4"),
        ("Adding", "SRNN+OINIT", "missing", "missing", "–", "0/2")]
    held = dict(zip(CELLS, measured, strict=True))
    want = []
    for key, pub in TABLE_I.items():  # the whole published table, in the paper's order
        out = "not in profile"
        problem, model, t, lr, penalty, count = held.get(key, (
            max_length.PROBLEMS[key[0]], max_length.MODELS[key[1]], out, out,
            out if key[1] == "open" else "–", out))
        want.append([problem, model, t, str(pub.max_len), lr, format(pub.lr, "g"), penalty,
                     "–" if pub.penalty is None else format(pub.penalty, "g"), count])
    assert [[c.marked() for c in row] for row in table.rows] == want
    assert table.incomplete() == [(6, "T"), (6, "α"), (8, "T"), (8, "α")]
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
    data, used, notes = max_length.fig2_data(runs, Histories(store.client(), runs))
    # SRNN reached 30, so it trained at 40 but never at the paper's 60.
    assert used == 40 and notes == ["T = 40: no run of every model trained at the paper's "
                                    f"T = {FIG2_T}."]
    ids = [run_id for _, run_id in store.runs["sw-1"]]
    chosen = {"plain": 1, "open": 5, "oinit": 7}
    assert data.groupby("variant")["run_id"].unique().map(list).to_dict() == {
        v: [ids[i]] for v, i in chosen.items()}
    for variant, index in chosen.items():
        for metric in max_length.FIG2_METRICS:
            series = data[(data["variant"] == variant) & (data["metric"] == metric)]
            want = stage_series(store, index, metric, 40)
            assert list(zip(series["step"], series["value"], strict=True)) == want
            # T = 40 is the fourth length: iterations 900..1200 of the run, 100..300 at T.
            assert list(series["iteration"]) == [100, 200, 300]


class StageHistories:
    """Metric histories of hand-made runs: each run's ``seq_len`` at steps 100, 200, ...,
    and a ρ of 1 at each of those steps."""

    def __init__(self, lengths: dict[str, list[int]]) -> None:
        self.lengths = lengths

    def get(self, run_id: str, key: str) -> pd.DataFrame:
        lengths = self.lengths[run_id]
        steps = [100 * (i + 1) for i in range(len(lengths))]
        values = lengths if key == "seq_len" else [1.0] * len(lengths)
        return pd.DataFrame({"step": steps, "value": [float(v) for v in values]})


def test_fig2_without_a_length_every_model_trained_at_names_each_models_lengths() -> None:
    """SRNN and SRNN+OINIT trained at T = 10, SRNN+OPEN only at 30 and 40: no T is common, so
    nothing is plotted, T is None, and the note lists every model's lengths."""
    lengths = {"plain": [10, 20], "open": [30, 40], "oinit": [10]}
    frame = pd.DataFrame.from_records([
        {"run_id": v, "trial_key": v, "status": "FINISHED", "outcome": "solved",
         "params.task": "temporal_order", "params.variant": v, "params.lr": 0.1,
         "params.penalty": 0.0, "metrics.max_seq_len_solved": float(t[-1]),
         "metrics.iters_to_solve": 100.0} for v, t in lengths.items()])
    runs = frame_runs(frame, SPEC, None)
    data, used, notes = max_length.fig2_data(runs, StageHistories(lengths))
    assert used is None and data.empty
    assert list(data.columns) == ["variant", "run_id", "metric", "step", "iteration", "value"]
    assert notes == ["No T at which a run of every model trained: SRNN at T = 10, 20; "
                     "SRNN+OPEN at T = 30, 40; SRNN+OINIT at T = 10."]
    figure = max_length.fig2(runs, StageHistories(lengths))
    assert figure.title.startswith("M Fig. 2 — Temporal Order, no common T (partial) · ")


def test_figures_are_written_as_png_with_the_plotted_data(
        store: Store, runs: SweepRuns, tmp_path: Path) -> None:
    report = max_length.max_length_report(runs, Histories(store.client(), runs))
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
        assert row["published"] == TABLE_I[key].max_len
        assert row["partial"] == want[5]
    assert "(partial: hatched)" in report.figures[1].title


def test_report_without_histories_has_tables_only(runs: SweepRuns) -> None:
    report = max_length.max_length_report(runs, None)
    assert [t.name for t in report.tables] == ["max-length"] and report.figures == []
