"""The smoke profiles of G's synthetic specs end to end: ``ortho sweep run SPEC --profile
smoke`` into the session's embedded home (Ray, SQLite MLflow; ``smoke_home``, each spec its
own experiment), then ``ortho report SPEC``, whose tables are checked against the runs MLflow
holds."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from analysis.load import load_sweep
from analysis.reports import simplex_direction, spectral_init, temporal_gradients
from sweeps.cli import main

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def smoke_sweep(spec: str, home: Path) -> list:
    """The configuration runs MLflow holds of ``spec``'s smoke sweep in ``home``."""
    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    exp = client.get_experiment_by_name(spec).experiment_id
    parent, = client.search_runs([exp], "tags.`ortho.role` = 'sweep'")
    children = client.search_runs([exp], "tags.`ortho.role` = 'configuration'")
    assert len(children) == int(parent.data.tags["ortho.n_configs"])
    return children


def report_files(spec: str, home: Path, out: Path, capsys) -> str:
    assert main(["report", spec, "--home", str(home), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert all(p.stat().st_size > 0 for p in out.iterdir())
    return text


@pytest.mark.smoke_sweep("spectral-temporal-gradients")
def test_spectral_temporal_gradients_smoke(smoke_home: Path, tmp_path: Path, capsys) -> None:
    children = smoke_sweep("spectral-temporal-gradients", smoke_home)
    client = MlflowClient(tracking_uri=f"sqlite:///{smoke_home / 'mlflow.db'}")
    by_rho: dict[float, list[float]] = {}
    for run in children:
        by_rho.setdefault(float(run.data.params["spectral_radius"]), []).append(
            run.data.metrics["log10_ratio"])
        steps = [m.step for m in client.get_metric_history(run.info.run_id,
                                                           "temporal_grad_norm")]
        assert sorted(steps) == list(range(1, int(run.data.params["seq_len"]) + 1))
    runs = load_sweep(client, "spectral-temporal-gradients")
    cells = temporal_gradients.ratio_cells(runs).set_index("rho")
    for rho, values in by_rho.items():
        assert cells.loc[rho, "median"] == pytest.approx(statistics.median(values))
    text = report_files("spectral-temporal-gradients", smoke_home, tmp_path / "out", capsys)
    assert "profile smoke" in text and "Verdict:" in text
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"temporal-gradients.md",
                                                              "temporal-gradients.png",
                                                              "spectral-temporal-gradients-"
                                                              "verdicts.md"}
    verdicts = (tmp_path / "out" / "spectral-temporal-gradients-verdicts.md").read_text(
        ).splitlines()
    assert verdicts[0] == "### Verdicts" and verdicts[2].startswith("- G-F31 · ")
    assert all(line[2:] in text for line in verdicts[2:])  # the lines it printed


@pytest.mark.smoke_sweep("spectral-init-success")
def test_spectral_init_success_smoke(smoke_home: Path, tmp_path: Path, capsys) -> None:
    children = smoke_sweep("spectral-init-success", smoke_home)
    client = MlflowClient(tracking_uri=f"sqlite:///{smoke_home / 'mlflow.db'}")
    cells = spectral_init.success_cells(load_sweep(client, "spectral-init-success"))
    for run in children:
        rho = run.data.params["spectral_radius"]
        init = "gaussian" if rho == "None" else "spectral"
        row = cells[(cells["seq_len"] == int(run.data.params["seq_len"]))
                    & (cells["init"] == init)].iloc[0]
        mine = [c for c in children if c.data.params["seq_len"] == run.data.params["seq_len"]
                and c.data.params["spectral_radius"] == rho]
        solved = sum(c.data.tags["ortho.outcome"] == "solved" for c in mine)
        assert (row["solved"], row["n_done"]) == (solved, len(mine))
    outcomes = {c.data.tags["ortho.outcome"] for c in children}
    assert outcomes == {"solved", "unsolved"}  # the counts above are tested on both
    text = report_files("spectral-init-success", smoke_home, tmp_path / "out", capsys)
    assert "G Fig. 4.1" in text and "profile smoke" in text


@pytest.mark.smoke_sweep("simplex-direction")
def test_simplex_direction_smoke(smoke_home: Path, tmp_path: Path, capsys) -> None:
    children = smoke_sweep("simplex-direction", smoke_home)
    client = MlflowClient(tracking_uri=f"sqlite:///{smoke_home / 'mlflow.db'}")
    cells = simplex_direction.direction_cells(
        load_sweep(client, "simplex-direction")).set_index("direction")
    for direction in simplex_direction.DIRECTIONS:
        mine = [c for c in children if c.data.params["direction"] == direction]
        assert len(mine) == 2
        ok = [c.data.metrics["iters_to_solve"] for c in mine
              if c.data.tags["ortho.outcome"] == "solved"]
        # at the smoke budget no run of the adding problem converges (the hand-built
        # test_galvan_reports.py counts converged ones), so this checks the grouping
        assert cells.loc[direction, "converged"] == len(ok)
        assert cells.loc[direction, "not_converged"] == len(mine) - len(ok)
        mean = cells.loc[direction, "mean"]
        assert (mean is None or math.isnan(mean)) if not ok else mean == pytest.approx(
            sum(ok) / len(ok))
    text = report_files("simplex-direction", smoke_home, tmp_path / "out", capsys)
    assert "G Table 4.1" in text and "1,807,466" in text
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"simplex-direction.md",
                                                              "simplex-loss.png",
                                                              "simplex-direction-verdicts.md"}
