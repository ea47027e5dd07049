"""Report of ``deep-orthogonal``: the smoke profile end to end (``ortho sweep run`` into the
session's embedded home, ``smoke_home``, then ``ortho report``), its tables checked against
the runs MLflow holds, and the verdict rules on hand-made cells."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from analysis.claims import NOT_MEASURED, from_verdict
from analysis.groups import Group
from analysis.load import load_sweep
from analysis.reports import deep_orthogonal_tables as report
from sweeps.cli import main
from tests.analysis.conftest import frame_runs


@pytest.mark.slow
@pytest.mark.smoke_sweep("deep-orthogonal")
def test_smoke_profile_end_to_end(smoke_home: Path, tmp_path: Path, capsys) -> None:
    client = MlflowClient(tracking_uri=f"sqlite:///{smoke_home / 'mlflow.db'}")
    runs = load_sweep(client, "deep-orthogonal")
    assert len(runs.runs) == 14 and set(runs.runs["outcome"]) <= {"solved", "unsolved"}
    cells = report.f1_cells(runs).set_index(["variant", "layers"])
    frame = runs.runs
    for (variant, layers), row in cells.iterrows():
        mine = frame[(frame["params.variant"] == variant)
                     & (frame["params.dataset"] == "two_class")
                     & (frame["params.layers"].astype(str) == str(layers))]
        assert row["best"] == pytest.approx(100 * mine["metrics.best_train_error"].min())
    orth = frame[(frame["params.variant"] == "orth") & (frame["params.dataset"] == "two_class")]
    assert (orth["metrics.act_grad_spread_init"] < 1e-4).all()
    # the smoke profile's α = 0.1 against N §5's 10⁻³ (its momentum, 0.9, is N's)
    protocol = ("Protocol differs from the paper's, so each step count is not comparable one "
                "to one: lr = 0.1 (paper 0.001).")
    assert protocol in report.f1_table(runs).notes
    f3 = report.f3_table(runs)
    spiral = frame[frame["params.dataset"] == "spiral"]
    assert f3.rows and sum(int(row[-2].text().split("/")[1]) for row in f3.rows) == len(spiral)
    for row in f3.rows:
        variant = {name: v for v, name in report.NAMES.items()}[row[0].text()]
        mine = spiral[(spiral["params.variant"] == variant)
                      & (spiral["params.layers"].astype(str) == str(row[1].value))
                      & (spiral["params.hidden"].astype(str) == str(row[2].value))]
        if row[3].value is not None:
            mine = mine[mine["params.block"].astype(str) == str(row[3].value)]
        errors = mine["metrics.best_train_error"]
        assert row[6].value == pytest.approx(100 * errors.min())
        assert row[-2].text() == f"{int((errors <= report.TRAINED).sum())}/{len(mine)}"
    f4 = report.f4_rows(runs)
    assert set(f4) == {"relu", "orth"}
    for variant, values in f4.items():
        mine = frame[(frame["params.variant"] == variant) & (frame["params.dataset"] == "mnist")]
        assert values["best"] == pytest.approx(100 * mine["metrics.best_test_error"].min())
        assert values["median"] == pytest.approx(100 * mine["metrics.best_test_error"].median())
    assert main(["report", "deep-orthogonal", "--home", str(smoke_home), "--out",
                 str(tmp_path / "out")]) == 0
    text = capsys.readouterr().out
    assert "profile smoke" in text and text.count("Verdict:") == 4
    assert {p.name for p in (tmp_path / "out").iterdir()} == {
        "n-f1-depth.md", "n-f3-orth-relu.md", "n-f4-mnist.md", "n-data.png",
        "n-f1-act-grads.png", "n-f3-spread.png", "n-f4-mnist.png", "deep-orthogonal-verdicts.md"}


def _f1(best: list[float], spread: list[float]) -> pd.DataFrame:
    """Cells of :func:`report.f1_cells`: ReLU nets of depth 2, 4, 10, 20, then the
    orthogonal net of depth 20."""
    return pd.DataFrame({"variant": ["relu"] * 4 + ["orth"], "layers": [2, 4, 10, 20, 20],
                         "best": best, "spread": spread})


def test_f1_verdict_needs_the_relu_nets_of_every_depth_to_fail() -> None:
    cells = _f1([12.0, 11.0, 50.0, 49.0, 2.0], [0.2, 0.7, 30.0, 30.0, 0.0])
    assert report.f1_verdict(cells) == (
        "Verdict: as N — every ReLU net errs on more than 10 %: lowest ReLU error 11.0 % "
        "(L = 4), orthogonal net 2.0 % (L = 20; N: 1 % at L = 20).")
    cells.loc[0, "best"] = 7.0  # a shallow net N says errs on more than 10 %
    assert report.f1_verdict(cells) == (
        "Verdict: differs from N — lowest ReLU error 7.0 % (L = 2), orthogonal net 2.0 % "
        "(L = 20; N: 1 % at L = 20); ReLU nets at most 10 % at L = 2.")
    cells.loc[0, "best"] = 12.0
    cells.loc[4, "best"] = 10.0  # the orthogonal net no better than 10 %
    assert report.f1_verdict(cells).startswith("Verdict: differs from N")
    assert report.f1_verdict(cells[cells["variant"] == "relu"]).startswith("Verdict: none")


def test_f1_verdict_names_the_orthogonal_depth_and_judges_n_s_20_layers_alone() -> None:
    """An orthogonal net of another depth than N's 20 (the smoke profile's L = 6) does not
    bear out N's 1 % of the 20-layer net: not measured, its depth named; ReLU nets under
    10 % still contradict N whatever the orthogonal depth."""
    cells = _f1([12.0, 11.0, 50.0, 49.0, 2.0], [0.2, 0.7, 30.0, 30.0, 0.0])
    cells.loc[4, "layers"] = 6
    verdict = report.f1_verdict(cells)
    assert verdict == (
        "Verdict: none — no orthogonal net of N's 20 layers ran: lowest ReLU error 11.0 % "
        "(L = 4), orthogonal net 2.0 % (L = 6; N: 1 % at L = 20).")
    assert from_verdict("N-F1", "claim", verdict).status == NOT_MEASURED
    cells.loc[0, "best"] = 7.0
    assert report.f1_verdict(cells).startswith("Verdict: differs from N — lowest ReLU error "
                                               "7.0 % (L = 2), orthogonal net 2.0 % (L = 6;")
    both = pd.concat([cells, cells.iloc[[4]].assign(layers=20, best=30.0)], ignore_index=True)
    both.loc[0, "best"] = 12.0  # a 20-layer net beside: it alone is judged
    assert report.f1_verdict(both).startswith("Verdict: differs from N — lowest ReLU error "
                                              "11.0 % (L = 4), orthogonal net 30.0 % (L = 20;")


DO_SPEC = """\
name: deep-orthogonal
fixed: {dataset: mnist, hidden: 4, layers: 6}
space: {variant: [orth, relu]}
repeats: 1
seed: 0
"""


def test_f4_table_title_states_n_s_depths_and_the_measured_one() -> None:
    """N's standard net is 50 layers deep and its orthogonal net 50 + 2; the smoke profile
    measures L = 6, which the title says rather than 52."""
    frame = pd.DataFrame.from_records([
        {"run_id": f"r-{v}", "trial_key": f"r-{v}", "status": "FINISHED",
         "outcome": "unsolved", "params.dataset": "mnist", "params.hidden": 4,
         "params.layers": 6, "params.variant": v, "params.seed": 0,
         "metrics.best_test_error": e, "metrics.baseline_error": 0.89}
        for v, e in (("orth", 0.6), ("relu", 0.89))])
    table = report.f4_table(frame_runs(frame, "deep-orthogonal", DO_SPEC))
    assert table.title == ("N Fig. 4 — MNIST, 4 hidden units: N's standard net 50 layers "
                           "deep, its orthogonal net 50 + 2; measured at L = 6")
    assert [row[1].text() for row in table.rows] == ["6", "6"]


def test_f1_vanish_verdict_needs_stable_gradients_below_depth_10_and_vanished_from_it() -> None:
    cells = _f1([12.0, 11.0, 50.0, 49.0, 2.0], [0.2, 2.9, 3.1, 30.0, 0.0])
    assert report.f1_vanish_verdict(cells) == (
        "Verdict: as N — activation-gradient spread beyond 3 orders at L = 10, 20, within at "
        "L = 2, 4 (N: vanished from L = 10).")
    cells.loc[1, "spread"] = 30.0  # vanished at depth 4 already
    assert report.f1_vanish_verdict(cells).startswith("Verdict: differs from N")
    cells.loc[1, "spread"] = 0.7
    cells.loc[2, "spread"] = 2.0  # still stable at depth 10
    assert report.f1_vanish_verdict(cells).startswith("Verdict: differs from N")
    assert report.f1_vanish_verdict(cells[cells["layers"] < 10]).startswith("Verdict: none")


def _f3(*runs: tuple[str, int, int | None, float, float]) -> pd.DataFrame:
    """Cells of :func:`report.f3_cells`, one per (variant, L, B, spread, error %); H = 4."""
    variant, layers, block, spread, error = zip(*runs, strict=True)
    return pd.DataFrame({"variant": variant, "layers": layers, "hidden": 4, "block": block,
                         "spread": spread, "error": error})


def test_f3_verdict_judges_the_smallest_block_within_3_orders_per_depth() -> None:
    cells = _f3(("orth_relu", 20, 1, 1.0, 40.0), ("orth_relu", 20, 1, 1.2, 3.0),
                ("orth_relu", 20, 3, 0.5, 40.0),  # a larger B than N's choice: not judged
                ("orth_relu", 40, 1, 30.0, 50.0), ("orth_relu", 40, 1, 30.0, 2.0),
                ("orth_relu", 40, 3, 2.0, 4.0), ("orth_relu", 40, 3, 2.5, 60.0))
    chosen = report.f3_chosen(cells)
    assert chosen[["layers", "block", "trained", "runs"]].values.tolist() == [
        [20, 1, 1, 2], [40, 3, 1, 2]]
    assert report.f3_verdict(cells) == (
        "Verdict: as N — runs that train (error ≤ 5 %) at the smallest B within 3 orders: "
        "L = 20, H = 4, B = 1: 1/2; L = 40, H = 4, B = 3: 1/2; Orth/ReLU runs beyond 3 "
        "orders: 1/2 train.")
    cells.loc[5, "error"] = 6.0  # L = 40's chosen B = 3 no longer trains on any seed
    assert report.f3_verdict(cells).startswith("Verdict: differs from N")


def test_f3_verdict_leaves_out_plain_relu_nets() -> None:
    relu = [("relu", 20, None, 30.0, 50.0), ("relu", 40, None, 1.0, 1.0)]
    assert report.f3_verdict(_f3(*relu)).startswith("Verdict: none")
    cells = _f3(*relu, ("orth_relu", 20, 1, 1.0, 20.0))
    assert report.f3_verdict(cells).startswith("Verdict: differs from N")
    assert report.f3_verdict(cells).endswith("beyond 3 orders: 0/0 train.")


def _f4(relu_best: float | None, orth_best: float, baseline: float | None) -> dict:
    return {"relu": {"best": relu_best, "baseline": baseline},
            "orth": {"best": orth_best, "baseline": baseline}}


def test_f4_verdict_needs_the_relu_net_stuck_and_the_orthogonal_net_10_points_better() -> None:
    assert report.f4_verdict(_f4(88.0, 60.0, 88.65)).startswith("Verdict: as N")
    assert report.f4_verdict(_f4(80.0, 60.0, 88.65)).startswith("Verdict: differs")  # learns
    assert report.f4_verdict(_f4(88.0, 79.0, 88.65)).startswith("Verdict: differs")  # < 10
    assert report.f4_verdict(_f4(99.5, 80.0, None)).startswith("Verdict: as N")  # base 100 %
    assert report.f4_verdict(_f4(None, 60.0, 88.65)).startswith("Verdict: none")


def test_lowest_run_picks_the_finished_run_with_the_lowest_value_and_skips_nan() -> None:
    """A failed run's lower error and a finished run's NaN are never picked; a group whose
    finished runs all logged NaN has no run to show."""
    frame = pd.DataFrame({"run_id": ["nan", "low", "failed", "high"],
                          "outcome": ["solved", "unsolved", "failed", "solved"],
                          "metrics.best_train_error": [float("nan"), 0.2, 0.1, 0.4]})
    picked = report.lowest_run(Group(runs=frame, n_expected=None), "best_train_error")
    assert picked is not None and picked["run_id"] == "low"
    nan_only = frame.assign(**{"metrics.best_train_error": float("nan")})
    assert report.lowest_run(Group(runs=nan_only, n_expected=None), "best_train_error") is None
