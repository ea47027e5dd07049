"""Report of ``polyphonic-music`` (G Tables 4.2, 4.3, Fig. 4.3): on a hand-built sweep (rows,
means over seeds, published values at G's α only, the best MuseData configuration), and on a
REAL smoke sweep (sweep -> MLflow -> report)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from analysis.load import load_sweep
from analysis.published import galvan
from analysis.report import builder
from analysis.reports import polyphonic_music as pm
from sweeps.cli import main
from tests.analysis.conftest import frame_runs

ROOT = Path(__file__).resolve().parents[2]
SPEC = "polyphonic-music"
SPEC_TEXT = """\
name: polyphonic-music
fixed: {dataset: musedata}
space:
  hidden: [50, 100]
  lr: [0.001, 0.01]
seed: 0
repeats: 2
"""

RUNS = [  # run_id, hidden, lr, seed, outcome, selected (valid, train, test, test pooled, epoch)
    ("a0", 50, 0.001, 0, "unsolved", (9.0, 8.0, 9.5, 10.0, 10)),
    ("a1", 50, 0.001, 1, "solved", (7.0, 6.0, 7.5, 8.0, 20)),
    ("b0", 50, 0.01, 0, "solved", (6.5, 6.1, 6.6, 7.1, 30)),
    ("b1", 50, 0.01, 1, "diverged", (None, None, None, None, None)),
    ("c0", 100, 0.001, 0, "failed", (None, None, None, None, None)),
    ("d0", 100, 0.01, 0, "solved", (6.8, 5.0, 6.9, 7.4, 40)),
    ("d1", 100, 0.01, 1, "solved", (6.4, 5.2, 7.1, 7.6, 40)),
]


def sweep_runs(rows=RUNS) -> object:
    values = [r[5] for r in rows]
    frame = pd.DataFrame({
        "run_id": [r[0] for r in rows], "trial_key": [r[0] for r in rows],
        "status": ["FINISHED"] * len(rows), "outcome": [r[4] for r in rows],
        "params.dataset": ["musedata"] * len(rows), "params.hidden": [r[1] for r in rows],
        "params.lr": [r[2] for r in rows], "params.seed": [r[3] for r in rows],
        "params.max_len": [300] * len(rows), "params.clip": [3.0] * len(rows),
        "metrics.selected_valid_nll": [v[0] for v in values],
        "metrics.selected_train_nll": [v[1] for v in values],
        "metrics.selected_test_nll": [v[2] for v in values],
        "metrics.selected_test_nll_frame": [v[3] for v in values],
        "metrics.selected_train_nll_frame": [v[1] and v[1] + 0.5 for v in values],
        "metrics.selected_epoch": [v[4] for v in values],
        "metrics.baseline_valid_nll": [10.9] * len(rows)})
    return frame_runs(frame, SPEC, SPEC_TEXT)


def test_registered_as_the_polyphonic_music_report():
    assert builder(SPEC) is pm.polyphonic_report


def test_table_4_2_averages_seeds_and_sets_g_beside_at_his_rate():
    table = pm.table_4_2(sweep_runs())
    rows = [[c.marked() for c in row] for row in table.rows]
    pub50, pub100 = galvan.TABLE_4_2[50], galvan.TABLE_4_2[100]
    assert rows == [
        ["MuseData", "50", "0.001", "7.00", f"{pub50.train:.2f}", "8.50", f"{pub50.test:.2f}",
         "9.00", "15", "2/2"],
        ["MuseData", "50", "0.01", "6.10", "–", "6.60", "–", "7.10", "30", "2/2 (1 diverged)"],
        ["MuseData", "100", "0.001", "missing", f"{pub100.train:.2f}", "missing",
         f"{pub100.test:.2f}", "missing", "missing", "0/2 (1 failed)"],
        ["MuseData", "100", "0.01", "5.10", "–", "7.00", "–", "7.50", "40", "2/2"],
        *[["MuseData", str(h), "0.001", "not in profile", f"{galvan.TABLE_4_2[h].train:.2f}",
           "not in profile", f"{galvan.TABLE_4_2[h].test:.2f}", "not in profile",
           "not in profile", "not in profile"] for h in (200, 300)],
    ]
    assert any("validation NLL 10.90" in note for note in table.notes)
    assert any("eq. 4.2" in note and "pooled" in note for note in table.notes)


def test_the_notes_say_which_frames_the_runs_predict():
    runs = sweep_runs()
    assert pm.predicted_note(runs) == "Predicted: every frame of a song, the first from a " \
        "silent input."  # runs from before predict_first predicted every frame
    runs.runs["params.predict_first"] = False
    assert "Predicted: frames 2 … L of a song of L" in pm.table_4_2(runs).notes[1]
    runs.runs.loc[0, "params.predict_first"] = True
    assert pm.predicted_note(runs).count(";") == 1  # a sweep that mixes both says both


def test_table_4_3_sets_the_best_on_validation_beside_the_references():
    table = pm.table_4_3(sweep_runs())
    rows = [[c.marked() for c in row] for row in table.rows]
    assert rows[:3] == [[galvan.TABLE_4_3_LABELS[k], f"{p.train:.2f}", f"{p.test:.2f}", "paper"]
                        for k, p in galvan.TABLE_4_3.items()]
    assert rows[2][1:3] == ["6.20", "6.44"]  # G's best, 50 hidden units (Table 4.2's first row)
    # d1 has the lowest validation NLL (6.4); the table is partial: c0 failed
    label = "this sweep, best on validation (H = 100, α = 0.01)"
    assert rows[3:] == [[label, "5.20†", "7.10†", "G eq. 4.2"],
                        [label, "5.70†", "7.60†", "pooled"]]


def test_table_4_3_says_not_in_profile_for_a_sweep_without_musedata():
    runs = sweep_runs()
    runs.runs["params.dataset"] = "jsb_chorales"
    runs = frame_runs(runs.runs, SPEC, SPEC_TEXT.replace("musedata", "jsb_chorales"))
    table = pm.table_4_3(runs)
    assert [[c.marked() for c in row] for row in table.rows[3:]] == [
        ["this sweep, best on validation", "not in profile", "not in profile", convention]
        for convention in ("G eq. 4.2", "pooled")]
    assert table.notes[0].startswith("This sweep has no MuseData configuration")


@pytest.mark.parametrize(("tests", "status"), [((6.5, 6.6), "holds"), ((6.6, 6.5), "does not hold"),
                                               ((6.5, 6.5), "does not hold")])
def test_the_width_claim_needs_the_nll_to_grow(tests: tuple[float, float], status: str):
    """G-T42: the test NLL grows with H; the same NLL at every width does not bear it out."""
    rows = [(f"{h}-{s}", h, 0.001, s, "solved", (6.0, 5.0, test, 7.0, 10))
            for h, test in zip((50, 100), tests, strict=True) for s in (0, 1)]
    claim = pm.polyphonic_claims(sweep_runs(rows))[0]
    assert (claim.source, claim.status) == ("G-T42", status)


def test_published_music_values_are_g_tables_4_2_and_4_3():
    assert {h: (p.test, p.train) for h, p in galvan.TABLE_4_2.items()} == {
        50: (6.44, 6.20), 100: (6.53, 6.10), 200: (6.58, 6.03), 300: (6.82, 6.21)}
    assert galvan.TABLE_4_3["state_of_art_rnn"].test == 6.97
    assert galvan.TABLE_4_3["ours"] == galvan.TABLE_4_2[50]
    assert galvan.TABLE_4_1 == {"gradient": 1_807_466, "simplex": 2_338_500,
                                "simplex_switch": 1_630_666}
    assert [c.spectral_radius for c in galvan.FIG_3_1 if c.vanishing] == [0.8, 0.9]
    assert (galvan.FIG_4_1["gaussian"].max_solved_len,
            galvan.FIG_4_1["spectral"].max_solved_len) == (20, 150)


@pytest.mark.slow
@pytest.mark.smoke_sweep(SPEC)
def test_report_of_a_real_smoke_sweep_matches_its_run(smoke_home: Path, tmp_path: Path,
                                                      capsys) -> None:
    client = MlflowClient(tracking_uri=f"sqlite:///{smoke_home / 'mlflow.db'}")
    exp = client.get_experiment_by_name(SPEC).experiment_id
    (child,) = client.search_runs([exp], "tags.`ortho.role` = 'configuration'")
    metrics, params = child.data.metrics, child.data.params
    assert (params["dataset"], params["hidden"]) == ("jsb_chorales", "8")
    assert metrics["selected_test_nll"] == metrics["test_nll"]  # one evaluation: it is selected
    history = client.get_metric_history(child.info.run_id, "valid_nll_frame")
    assert [m.value for m in history][-1] == pytest.approx(metrics["valid_nll_frame"])

    runs = load_sweep(client, SPEC)
    row, *published = [[c.marked() for c in r] for r in pm.table_4_2(runs).rows]
    assert [r[1] for r in published] == [str(h) for h in sorted(galvan.TABLE_4_2)]
    assert all(r[0] == "MuseData" and r[-1] == "not in profile" for r in published)
    assert row == ["JSB Chorales", "8", "0.001", f"{metrics['selected_train_nll']:.2f}", "–",
                   f"{metrics['selected_test_nll']:.2f}", "–",
                   f"{metrics['selected_test_nll_frame']:.2f}", "1", "1/1"]
    out_dir = tmp_path / "report"
    assert main(["report", SPEC, "--home", str(smoke_home), "--out", str(out_dir)]) == 0
    assert "profile smoke" in capsys.readouterr().out
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "polyphonic-music-verdicts.md", "polyphonic-nll.png", "polyphonic-table-4-2.md",
        "polyphonic-table-4-3.md"]
    assert (out_dir / "polyphonic-nll.png").read_bytes()[:4] == b"\x89PNG"
