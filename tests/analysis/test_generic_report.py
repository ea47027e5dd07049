"""The report of a spec without a report of its own (:mod:`analysis.reports.generic`): a
user's spec, named or given by its file, gets its configurations ranked by its metric, from
the runs MLflow holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.reports import REPORTS
from ortho_core.reporting import Outcome, Result
from sweeps import tracking
from sweeps.cli import main
from sweeps.testing import sqlite_store, start_sweep, track
from tests.analysis.test_report_cli import md_rows

SPEC = "my-runs"


@pytest.fixture
def uri(tmp_path: Path) -> str:
    """A store holding one finished sweep of ``my-runs`` (metric ``loss``, smaller better):
    three configurations finished with losses 0.3, 0.1, 0.2 and one failed."""
    uri = sqlite_store(tmp_path)
    t = tracking.tracker(uri)
    ref = start_sweep(t, SPEC, "mine-1", profile="cpu", metric="loss", mode="min",
                      n_configs=4)
    for key, lr, loss in (("k1", 0.3, 0.3), ("k2", 0.1, 0.1), ("k3", 0.2, 0.2)):
        track(t, ref, key, {"lr": lr}, result=Result(Outcome.SOLVED, {"loss": loss}),
              rows=[(10, {"loss": loss})])
    track(t, ref, "k4", {"lr": 0.9}, end="failed")
    t.end_sweep(ref, "FINISHED", {})
    return uri


def test_a_users_spec_is_ranked_by_its_metric_best_first(uri: str, tmp_path: Path,
                                                         capsys) -> None:
    assert SPEC not in REPORTS
    spec_file = tmp_path / "specs" / f"{SPEC}.yaml"  # named by its file, as sweep run takes it
    assert main(["report", str(spec_file), "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    header, *rows = md_rows(out)
    assert header == ["configuration", "loss", "outcome", "attempts"]
    assert [r[1:] for r in rows] == [["0.1", "solved", "1"], ["0.2", "solved", "1"],
                                     ["0.3", "solved", "1"], ["–", "failed", "1"]]
    assert [r[0] for r in rows] == ["k2", "k3", "k1", "k4"]  # each run's name (here its key)
    assert "configurations by loss, smallest first; no published claim is judged" in out
    assert "spec my-runs · profile cpu · sweep mine-1" in out
    assert "Verdicts" not in out


@pytest.mark.parametrize("value", ["", "two words", "a/b", "x\x00"])
def test_a_value_no_spec_could_be_named_is_refused_naming_spec(value: str, tmp_path: Path,
                                                               capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["report", value, "--home", str(tmp_path / "home")])
    assert exit_.value.code == 2
    assert "argument spec: expected a spec's name or its .yaml file" in capsys.readouterr().err
    assert not (tmp_path / "home").exists()
