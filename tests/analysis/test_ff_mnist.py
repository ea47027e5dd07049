"""Report of ``ff-mnist`` (Tables III, IV and the accuracy curves) on a hand-built sweep: the
choice rule, partial and missing cells, the published values beside, the pixel preprocessing
of every number (``unit`` for runs that logged none), and the plotted data."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.load import SweepRuns
from analysis.published.manchev import TABLE_III, TABLE_IV
from analysis.report import builder
from analysis.reports import ff_mnist
from tests.analysis.conftest import frame_runs

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


def ff_sweep_runs(rows=FF_RUNS, spec_text: str | None = FF_SPEC_TEXT,
                  preprocessing: dict[str, str] | None = None) -> SweepRuns:
    """The sweep of ``rows``; with ``preprocessing`` (run id -> value) the runs log that param
    (the others leave it empty, as a run without it loads), else no run logs it."""
    frame = pd.DataFrame({
        "run_id": [r[0] for r in rows], "trial_key": [r[0] for r in rows],
        "status": ["FINISHED"] * len(rows), "outcome": [r[4] for r in rows],
        "params.variant": [r[1] for r in rows], "params.lr": [r[2] for r in rows],
        "params.penalty": [r[3] for r in rows], "params.epochs": [10] * len(rows),
        "params.layers": [10] * len(rows),
        "metrics.best_test_accuracy": [r[5] for r in rows],
        "metrics.baseline_accuracy": [0.1135] * len(rows)})
    if preprocessing is not None:
        frame["params.preprocessing"] = [preprocessing.get(r[0]) for r in rows]
    return frame_runs(frame, "ff-mnist", spec_text)


class FFHistories:
    """Stepwise metrics: ``test_accuracy`` rises by 0.1 per epoch from the run's index."""

    def get(self, run_id: str, key: str) -> pd.DataFrame:
        steps = [3000, 6000]
        if key == "epoch":
            return pd.DataFrame({"step": steps, "value": [1.0, 2.0]})
        start = [r[0] for r in FF_RUNS].index(run_id) / 100
        return pd.DataFrame({"step": steps, "value": [start, start + 0.1]})


def test_registered_as_the_ff_mnist_report():
    assert builder("ff-mnist") is ff_mnist.ff_mnist_report


def test_table_iii_chooses_the_best_configuration_per_model():
    table = ff_mnist.table_iii(ff_sweep_runs())
    rows = {row[0].text(): [c.marked() for c in row] for row in table.rows}
    pub = {v: (format(p.accuracy, ".2f"), "–" if p.lr is None else format(p.lr, "g"),
               "–" if p.penalty is None else format(p.penalty, "g"))
           for v, p in TABLE_III.items()}
    # FF: a tie at the baseline goes to the smaller α.
    assert rows["FF"] == ["FF", "11.35", pub["plain"][0], "0.01", pub["plain"][1], "–",
                          pub["plain"][2], "unit", "2/2"]
    # FF+OPEN: o2 wins; one configuration diverged, so the cell is complete but says so.
    assert rows["FF+OPEN"] == ["FF+OPEN", "95.00", pub["open"][0], "0.1", pub["open"][1],
                               "0.01", pub["open"][2], "unit", "4/4 (1 diverged)"]
    # FF+OINIT: one of two configurations failed, so the row is partial.
    assert rows["FF+OINIT"] == ["FF+OINIT", "93.00†", pub["oinit"][0], "0.1†", pub["oinit"][1],
                                "–", pub["oinit"][2], "unit†", "1/2 (1 failed)"]
    assert table.columns[7] == "preprocessing"
    assert any(note.startswith("preprocessing: ") for note in table.notes)
    assert any(f"(M: {pub['plain'][0]} % on all 10,000)" in note for note in table.notes)
    assert any("epochs = 10 (paper 100)" in note for note in table.notes)


def test_table_iv_lists_every_published_alpha_and_marks_missing_ones():
    table = ff_mnist.table_iv(ff_sweep_runs())
    rows = [[c.marked() for c in row] for row in table.rows]
    assert rows[0] == ["0.1", "90.00", format(TABLE_IV[0.1], ".2f"), "unit", "1/1"]
    assert rows[1] == ["0.01", "92.00", format(TABLE_IV[0.01], ".2f"), "unit", "1/1"]
    assert rows[2] == ["0.001", "not in profile", format(TABLE_IV[0.001], ".2f"),
                       "not in profile", "not in profile"]
    assert table.incomplete() == []  # a published row the profile does not run: not partial
    assert [r[0] for r in rows] == [format(lr, "g") for lr in sorted(TABLE_IV, reverse=True)]
    assert len(rows) == 5


def test_each_number_names_the_preprocessing_of_its_run():
    # o2 and i1 logged M's standardisation, o3 logged unit, the rest logged nothing (older).
    runs = ff_sweep_runs(preprocessing={"o2": "standardise", "i1": "standardise",
                                        "o3": "unit"})
    table = ff_mnist.table_iii(runs)
    column = table.columns.index("preprocessing")
    rows = {row[0].text(): row[column].marked() for row in table.rows}
    assert rows == {"FF": "unit", "FF+OPEN": "standardise (M's code)",
                    "FF+OINIT": "standardise (M's code)†"}
    table = ff_mnist.table_iv(runs)
    column = table.columns.index("preprocessing")
    assert [row[column].marked() for row in table.rows][:3] == ["unit", "unit",
                                                                 "not in profile"]
    figure = ff_mnist.accuracy_curves(runs, FFHistories())
    chosen = figure.data.drop_duplicates("run_id").set_index("run_id")["preprocessing"]
    assert chosen.to_dict() == {"p2": "unit", "o2": "standardise (M's code)",
                                "i1": "standardise (M's code)"}


def test_the_protocol_note_takes_m_s_code_s_eleven_hidden_layers_as_the_paper_s():
    """Tables III and IV come from M's code, whose ``--layers 10`` builds 11 hidden layers:
    a sweep of 11 (the paper profile) is the published protocol, one of 10 is flagged."""
    runs = ff_sweep_runs()
    notes = " ".join(ff_mnist.table_iii(runs).notes)
    assert "layers = 10 (paper 11)" in notes
    runs.runs["params.layers"], runs.runs["params.epochs"] = 11, 100
    assert not any("Protocol differs" in note for note in ff_mnist.table_iii(runs).notes)


@pytest.mark.parametrize(("accuracies", "status"), [((0.80, 0.90), "holds"),
                                                    ((0.90, 0.80), "does not hold"),
                                                    ((0.1135, 0.1135), "does not hold")])
def test_the_table_iv_claim_needs_accuracy_to_fall_with_alpha(accuracies, status):
    """M-T4: accuracy falls as α falls; the same accuracy at every α (a net that learned
    nothing at either) does not bear it out."""
    rows = [(f"o{i}", "open", lr, 1.0, "solved", acc)
            for i, (lr, acc) in enumerate(zip((1e-3, 1e-2), accuracies, strict=True))]
    claim = next(c for c in ff_mnist.ff_claims(ff_sweep_runs(rows)) if c.source == "M-T4")
    assert claim.status == status


def test_without_a_spec_only_tracked_runs_count():
    table = ff_mnist.table_iii(ff_sweep_runs(FF_RUNS[:3], spec_text=None))
    rows = {row[0].text(): [c.marked() for c in row] for row in table.rows}
    assert rows["FF+OPEN"][1] == "90.00" and rows["FF+OPEN"][-1] == "1/1"
    assert rows["FF+OINIT"][1] == "–"


def test_accuracy_curves_plot_the_chosen_runs(tmp_path):
    figure = ff_mnist.accuracy_curves(ff_sweep_runs(), FFHistories())
    data = figure.data
    assert list(dict.fromkeys(data["run_id"])) == ["p2", "o2", "i1"]
    chosen = data[data["run_id"] == "o2"]
    assert chosen["epoch"].tolist() == [1.0, 2.0]
    assert chosen["accuracy"].tolist() == pytest.approx([3.0, 13.0])
    assert figure.save(tmp_path).read_bytes().startswith(b"\x89PNG")


class OneEpochHistories:
    """One evaluation per run, at epoch 1, every model at chance (the smoke profile's)."""

    def get(self, run_id: str, key: str) -> pd.DataFrame:
        return pd.DataFrame({"step": [3000], "value": [1.0 if key == "epoch" else 0.1]})


@pytest.mark.parametrize("histories", [FFHistories(), OneEpochHistories()])
def test_models_at_the_same_accuracy_stay_visible_on_whole_epochs(histories):
    """A one-epoch profile leaves a point per model, often all at chance: each model keeps a
    hollow marker of its own, and the epoch axis starts at 0, ticked at whole epochs only."""
    figure = ff_mnist.accuracy_curves(ff_sweep_runs(), histories).render()
    [ax] = figure.axes
    models = [line for line in ax.get_lines() if line.get_label() != "majority class"]
    assert len(models) == 3 and len({line.get_marker() for line in models}) == 3
    assert all(line.get_markerfacecolor() == "none" for line in models)
    left, right = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if left <= t <= right]
    assert left == 0 and right > 1
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks)
