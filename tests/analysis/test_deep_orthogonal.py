"""Report of ``deep-orthogonal``: the smoke profile end to end (``ortho sweep run`` into the
session's embedded home, ``smoke_home``, then ``ortho report``), its tables checked against
the runs MLflow holds, and the verdict rules on hand-made cells."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from analysis.load import load_sweep
from analysis.reports import deep_orthogonal_tables as report
from sweeps.cli import main


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
    assert main(["report", "deep-orthogonal", "--home", str(smoke_home), "--out",
                 str(tmp_path / "out")]) == 0
    text = capsys.readouterr().out
    assert "profile smoke" in text and text.count("Verdict:") == 3
    assert {p.name for p in (tmp_path / "out").iterdir()} == {
        "n-f1-depth.md", "n-f3-orth-relu.md", "n-f4-mnist.md", "n-data.png",
        "n-f1-act-grads.png", "n-f3-spread.png", "n-f4-mnist.png"}


def test_f1_verdict_needs_every_deep_relu_net_to_fail() -> None:
    cells = pd.DataFrame({"variant": ["relu", "relu", "relu", "orth"],
                          "layers": [4, 10, 20, 20], "best": [8.0, 50.0, 49.0, 2.0]})
    assert report.f1_verdict(cells).startswith("Verdict: as N")
    cells.loc[1, "best"] = 9.0
    assert report.f1_verdict(cells).startswith("Verdict: differs")


def test_f3_verdict_compares_trained_fractions_either_side_of_3() -> None:
    cells = pd.DataFrame({"spread": [1.0, 2.0, 5.0, 30.0], "error": [1.0, 20.0, 50.0, 4.0]})
    assert report.f3_verdict(cells).startswith("Verdict: differs")
    cells.loc[3, "error"] = 40.0
    assert report.f3_verdict(cells).startswith("Verdict: as N")
