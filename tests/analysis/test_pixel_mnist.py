"""Report of ``pixel-mnist`` (Table II and Fig. 3b): the choice rule, when each network left
the baseline, the published values beside, the training named per row, Fig. 3b cut at M's
150,000 samples; and the smoke profile end to end, from ``ortho sweep run`` to the report."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from analysis.published.manchev import FIG3B_LEARNING_STARTS, FIG3B_SAMPLES, TABLE_II
from analysis.report import build_report, builder
from analysis.reports import pixel_mnist
from analysis.tables import as_cell
from tests.analysis.conftest import frame_runs

SPEC_TEXT = """\
name: pixel-mnist
fixed: {hidden: 100, max_iters: 12000}
space:
  lr: [1.0e-5, 1.0e-4]
groups:
  - fixed: {variant: plain}
  - fixed: {variant: open, penalty: 0.1}
  - fixed: {variant: oinit}
seed: 0
"""

RUNS = [  # run_id, variant, lr, penalty, outcome, best accuracy, learned at
    ("p1", "plain", 1e-5, None, "unsolved", 0.1135, None),
    ("p2", "plain", 1e-4, None, "unsolved", 0.1135, None),
    ("o1", "open", 1e-5, 0.1, "solved", 0.40, 96_000.0),
    ("o2", "open", 1e-4, 0.1, "solved", 0.75, 64_000.0),
    ("i1", "oinit", 1e-5, None, "solved", 0.60, 72_000.0),
    ("i2", "oinit", 1e-4, None, "diverged", None, None),
]


def sweep_runs():
    frame = pd.DataFrame({
        "run_id": [r[0] for r in RUNS], "trial_key": [r[0] for r in RUNS],
        "status": ["FINISHED"] * len(RUNS), "outcome": [r[4] for r in RUNS],
        "params.variant": [r[1] for r in RUNS], "params.lr": [r[2] for r in RUNS],
        "params.penalty": [r[3] for r in RUNS], "params.init_std": [0.01] * len(RUNS),
        "params.hidden": [100] * len(RUNS), "params.max_iters": [12000] * len(RUNS),
        "params.optimizer": ["rmsprop"] * len(RUNS),
        "params.preprocessing": ["standardise"] * len(RUNS),
        "metrics.best_test_accuracy": [r[5] for r in RUNS],
        "metrics.learned_samples": [r[6] for r in RUNS],
        "metrics.baseline_accuracy": [0.1135] * len(RUNS)})
    return frame_runs(frame, "pixel-mnist", SPEC_TEXT)


class Histories:
    """Every metric of every run at samples 0, 100,000 and 200,000 (steps 0, 6250, 12500)."""

    def get(self, run_id: str, key: str) -> pd.DataFrame:
        steps = [0, 6250, 12500]
        if key == "samples":
            return pd.DataFrame({"step": steps, "value": [0.0, 1e5, 2e5]})
        return pd.DataFrame({"step": steps, "value": [0.1, 0.5, 0.9]})


def test_registered():
    assert builder("pixel-mnist") is pixel_mnist.pixel_mnist_report


def test_table_ii_chooses_each_networks_best_beside_the_published_row():
    table = pixel_mnist.table_ii(sweep_runs())
    rows = {row[0].text(): [as_cell(c).marked() for c in row] for row in table.rows}
    assert list(rows) == ["SRNN", "SRNN+OINIT", "SRNN+OPEN"]
    # SRNN: a tie at the baseline goes to the smaller α; it never learned.
    assert rows["SRNN"][1:5] == ["11.35", format(TABLE_II["plain"].accuracy, ".2f"),
                                 "never", "1e-05"]
    assert rows["SRNN+OPEN"][1:5] == ["75.00", "91.81", "64,000", "0.0001"]
    assert rows["SRNN+OPEN"][8:10] == ["0.1", "0.1"]
    # OINIT: the diverged run ended (it counts as done) but has no accuracy to rank.
    assert rows["SRNN+OINIT"][1:4] == ["60.00", "86.81", "72,000"]
    assert rows["SRNN+OINIT"][10] == "rmsprop, standardise"
    assert rows["SRNN+OINIT"][-1] == "2/2 (1 diverged)"
    assert any("max_iters = 12000 (paper 1e+06)" in note for note in table.notes)


def test_fig_3b_shows_the_chosen_oinit_and_open_runs_up_to_150000_samples(tmp_path):
    figure = pixel_mnist.fig_3b(sweep_runs(), Histories())
    assert figure.save(tmp_path).read_bytes().startswith(b"\x89PNG")
    data = figure.data
    assert dict(zip(data["variant"], data["run_id"], strict=True)) == {"oinit": "i1",
                                                                       "open": "o2"}
    assert set(data["metric"]) == set(pixel_mnist.FIG3B_CURVES)
    assert data["samples"].max() <= FIG3B_SAMPLES
    accuracy = data[(data["metric"] == "test_accuracy") & (data["variant"] == "oinit")]
    assert accuracy["value"].tolist() == [10.0, 50.0]  # %, the 200,000-sample point left out


class ShortHistories(Histories):
    """Runs that stop at 320 samples, as the smoke profile's do."""

    def get(self, run_id: str, key: str) -> pd.DataFrame:
        frame = super().get(run_id, key)
        return frame.assign(value=[0.0, 160.0, 320.0]) if key == "samples" else frame


@pytest.mark.parametrize(("histories", "line"), [(Histories(), True), (ShortHistories(), False)])
def test_fig_3b_marks_m_s_learning_start_only_where_the_runs_reach_it(histories, line):
    """A dotted line at 60,000 samples would stretch a short run's axis 190-fold and squeeze
    its curves into the left edge; the axis note says where learning starts instead."""
    figure = pixel_mnist.fig_3b(sweep_runs(), histories).render()
    ax = figure.axes[-1]
    right = ax.get_xlim()[1]
    assert bool(right > FIG3B_LEARNING_STARTS) is line
    assert ("dotted" in ax.get_xlabel()) is line
    assert ("past these runs" in ax.get_xlabel()) is not line


@pytest.mark.slow
@pytest.mark.smoke_sweep("pixel-mnist")
def test_smoke_profile_end_to_end(smoke_home: Path) -> None:
    report = build_report("pixel-mnist", tracking_uri=f"sqlite:///{smoke_home / 'mlflow.db'}",
                          figures=True, use_cache=False)
    [table] = report.tables
    assert [row[0].text() for row in table.rows] == ["SRNN", "SRNN+OINIT", "SRNN+OPEN"]
    client = MlflowClient(tracking_uri=f"sqlite:///{smoke_home / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("pixel-mnist").experiment_id
    best: dict[str, float] = {}
    rates: dict[str, list[float]] = {}
    for run in client.search_runs([experiment], "tags.`ortho.role` = 'configuration'"):
        variant = run.data.params["variant"]
        best[variant] = max(best.get(variant, 0.0), run.data.metrics[pixel_mnist.ACCURACY])
        rates.setdefault(variant, []).append(float(run.data.params["lr"]))
    assert {v: sorted(r) for v, r in rates.items()} == {
        "plain": [1e-5, 1e-4], "oinit": [1e-5], "open": [1e-4]}
    # every smoke run stays at the baseline's accuracy, so each row's count and, for the
    # networks of one run, its α tell whose runs it read
    for row, variant in zip(table.rows, ["plain", "oinit", "open"], strict=True):
        assert row[1].value == pytest.approx(100 * best[variant])  # as MLflow holds it
        assert row[-1].text() == f"{len(rates[variant])}/{len(rates[variant])}"
        if len(rates[variant]) == 1:
            assert float(row[4].value) == rates[variant][0]
    assert "smoke" in table.provenance.line()
    [figure] = report.figures
    assert set(figure.data["metric"]) == set(pixel_mnist.FIG3B_CURVES)
    assert set(figure.data["variant"]) == {"oinit", "open"}
    assert figure.data["samples"].max() == 20 * 16
