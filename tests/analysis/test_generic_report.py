"""The report of a spec without a report of its own (:mod:`analysis.reports.generic`): a
user's spec, named or given by its file, gets its configurations ranked by its metric, from
the runs MLflow holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from analysis.html import provenance_items
from analysis.load import load_sweep
from analysis.reports import REPORTS
from ortho_core import experiments
from ortho_core.config import from_dict, to_dict
from ortho_core.reporting import Outcome, Result
from sweeps import contract, tracking
from sweeps.cli import main
from sweeps.spec import load_spec, resolve
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
    spec_file.parent.mkdir()
    spec_file.write_text(f"name: {SPEC}\n")  # the report reads the name only
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


def test_a_configuration_stopped_early_ranks_after_those_that_trained_to_their_end(
        uri: str, capsys) -> None:
    """ASHA stopped k5 at step 1 with a loss better than any finished one: that value is a
    step's, not a summary, so it does not lead the ranking (the sweep's status, which counts
    summaries only, named 0.1 the best), and its outcome says it was stopped."""
    t = tracking.tracker(uri)
    ref = t.find_sweep("mine-1").ref
    track(t, ref, "k5", {"lr": 0.5}, result=Result(Outcome.UNSOLVED), rows=[(1, {"loss": 0.05})],
          tags={contract.STOPPED_EARLY: "true"})
    assert main(["report", SPEC, "--tracking-uri", uri]) == 0
    _, *rows = md_rows(capsys.readouterr().out)
    assert [r[:3] for r in rows] == [["k2", "0.1", "solved"], ["k3", "0.2", "solved"],
                                     ["k1", "0.3", "solved"],
                                     ["k5", "0.05", "unsolved, stopped early"],
                                     ["k4", "–", "failed"]]


@pytest.mark.parametrize("value", ["", "two words", "a/b", "x\x00"])
def test_a_value_no_spec_could_be_named_is_refused_naming_spec(value: str, tmp_path: Path,
                                                               capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["report", value, "--home", str(tmp_path / "home")])
    assert exit_.value.code == 2
    assert "argument spec: expected a spec's name or its .yaml file" in capsys.readouterr().err
    assert not (tmp_path / "home").exists()



def _my_grid(tmp_path: Path, text: str, sweep_id: str) -> tuple[Any, str, tracking.Tracker, Any]:
    """Spec ``my-grid`` written from ``text`` and resolved with the cpu profile, a store, and
    sweep ``sweep_id`` of it started there: the resolved spec, the store's URI, its tracker
    and the sweep's ref."""
    path = tmp_path / "my-grid.yaml"
    path.write_text(text)
    resolved = resolve(load_spec(str(path)), "cpu")
    uri = sqlite_store(tmp_path)
    t = tracking.tracker(uri)
    ref = start_sweep(t, "my-grid", sweep_id, profile="cpu", resolved_text=resolved.text,
                      metric="max_seq_len_solved", mode="max")
    return resolved, uri, t, ref

USER_SPEC = """\
name: my-grid
experiment: synthetic
metric: {name: max_seq_len_solved, mode: max}
search: SEARCH
fixed: {variant: open, protocol: fixed, seq_len: 10, max_iters: 10}
space:
  lr: LR
  penalty: [1.0, 0.1]
profiles: {smoke: {}, cpu: {}, paper: {}}
"""


def _interrupted(tmp_path: Path, search: str, lr: str, held: list[tuple[dict, str]],
                 status: str = "KILLED", groups: str = "",
                 metrics: dict[str, float] | None = None) -> str:
    """A store holding a sweep of a user's spec (``search``, ``lr`` and ``groups`` filled in),
    ended ``status`` with the configurations ``held`` (params, how each ended) tracked and the
    rest never started."""
    text = USER_SPEC.replace("SEARCH", search).replace("LR", lr) + groups
    resolved, uri, t, ref = _my_grid(tmp_path, text, "mine-2")
    for i, (params, end) in enumerate(held):
        track(t, ref, f"k{i}", {**resolved.cells()[0].params, **params}, end=end,
              result=Result(Outcome.SOLVED, {"max_seq_len_solved": 10.0}))
    t.end_sweep(ref, status, metrics or {})
    return uri


def test_an_interrupted_sweep_lists_what_it_misses_and_reads_partial(tmp_path: Path,
                                                                     capsys) -> None:
    uri = _interrupted(tmp_path, "{kind: grid}", "[0.1, 0.01]",
                       [({"lr": 0.1, "penalty": 1.0}, "finished"),
                        ({"lr": 0.1, "penalty": 0.1}, "killed")])
    assert main(["report", "my-grid", "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    _, *rows = md_rows(out)
    assert rows == [["k0", "10", "solved", "1"],  # tracked runs by their names (here keys)
                    ["k1", "missing", "incomplete", "1"],
                    ["α=0.01 λ=1", "missing", "–", "0"],
                    ["α=0.01 λ=0.1", "missing", "–", "0"]]
    assert "Partial sweep: 3 table entries incomplete" in out
    assert "All cells complete" not in out
    assert main(["report", "my-grid", "--tracking-uri", uri, "--out", str(tmp_path / "o")]) == 0
    assert capsys.readouterr().out.endswith(f"wrote 1 file under {tmp_path / 'o'}:\n"
                                            "  my-grid.md\n")


def test_an_optuna_cell_s_missing_trials_are_one_row(tmp_path: Path, capsys) -> None:
    uri = _interrupted(tmp_path, "{kind: optuna, n_trials: 3}", "{low: 0.001, high: 0.1}",
                       [({"lr": 0.05, "penalty": 1.0}, "finished"),
                        ({"lr": 0.02, "penalty": 1.0}, "finished"),
                        ({"lr": 0.03, "penalty": 0.1}, "finished")])
    assert main(["report", "my-grid", "--tracking-uri", uri]) == 0
    _, *rows = md_rows(capsys.readouterr().out)
    assert [r[0] for r in rows[3:]] == ["λ=1 (1 of 3 trials)", "λ=0.1 (2 of 3 trials)"]
    assert [r[1:] for r in rows[3:]] == [["missing", "–", "0"]] * 2


def test_a_group_s_configuration_is_missing_though_another_group_sets_one_key_more(
        tmp_path: Path, capsys) -> None:
    """Two groups alike but for ``clip``, which one sets: the run of the group that sets it
    does not stand for the other group's configuration."""
    uri = _interrupted(tmp_path, "{kind: grid}", "[0.1]",
                       [({"lr": 0.1, "penalty": 1.0, "clip": 1.0}, "finished"),
                        ({"lr": 0.1, "penalty": 0.1, "clip": 1.0}, "finished")],
                       groups="groups:\n  - fixed: {}\n  - fixed: {clip: 1.0}\n")
    assert main(["report", "my-grid", "--tracking-uri", uri]) == 0
    _, *rows = md_rows(capsys.readouterr().out)
    assert [r[0] for r in rows[2:]] == ["λ=1", "λ=0.1"]  # the group without clip
    assert [r[1] for r in rows[2:]] == ["missing", "missing"]


GROUP_DEFAULT_SPEC = """\
name: my-grid
experiment: synthetic
metric: {name: max_seq_len_solved, mode: max}
search: {kind: grid}
fixed: {variant: open, protocol: fixed, seq_len: 10}
space: {lr: [0.01], penalty: [1.0, 0.1]}
groups:
  - fixed: {max_iters: 50}
  - fixed: {max_iters: 100, task: adding}
profiles: {smoke: {}, cpu: {}, paper: {}}
"""
"""task is fixed by the second group only; the first trains synthetic's default."""


@pytest.mark.parametrize("tracked", [4, 2])
def test_a_key_one_group_fixes_is_compared_by_value_where_another_leaves_it_default(
        tmp_path: Path, capsys, tracked: int) -> None:
    """Runs log their whole Config, so the first group's runs hold task temporal_order: with
    all four tracked nothing is missing; with the first group's two only, the adding ones
    are, named as their runs would be."""
    resolved, uri, t, ref = _my_grid(tmp_path, GROUP_DEFAULT_SPEC, "mine-5")
    config = experiments.get("synthetic").Config
    for i, cell in enumerate(resolved.cells()[:tracked]):
        track(t, ref, f"k{i}", to_dict(from_dict(config, cell.params)),
              result=Result(Outcome.SOLVED, {"max_seq_len_solved": 10.0}))
    t.end_sweep(ref, "FINISHED" if tracked == 4 else "KILLED", {})
    assert main(["report", "my-grid", "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    rows = md_rows(out)[1:]
    assert [r[0] for r in rows] == [f"k{i}" for i in range(tracked)] + (
        [] if tracked == 4 else ["λ=1 max_iters=100 Adding", "λ=0.1 max_iters=100 Adding"])
    assert f"{tracked} configurations of 4 expected" in out
    assert ("All cells complete." in out) == (tracked == 4)


MIXED_SPEC = """\
name: my-grid
experiment: synthetic
metric: {name: max_seq_len_solved, mode: max}
search: {kind: optuna, n_trials: 2}
fixed: {variant: open, protocol: fixed, seq_len: 10, max_iters: 10}
groups:
  - fixed: {penalty: 1.0}
    space: {lr: [0.01]}
  - fixed: {penalty: 0.1}
    space: {lr: {low: 0.001, high: 0.1}}
profiles: {smoke: {}, cpu: {}, paper: {}}
"""


def test_an_optuna_cell_s_runs_count_though_another_group_sets_the_key_it_searches(
        tmp_path: Path, capsys) -> None:
    """Group 1 searches lr, which group 0 sets: its cell leaves lr out, and its runs, whose
    lr Optuna chose, are its trials, not runs of a group that leaves lr unset."""
    resolved, uri, t, ref = _my_grid(tmp_path, MIXED_SPEC, "mine-3")
    base = resolved.cells()[1].params
    track(t, ref, "k0", resolved.cells()[0].params,
          result=Result(Outcome.SOLVED, {"max_seq_len_solved": 10.0}))
    for key, lr in (("k1", 0.05), ("k2", 0.02)):
        track(t, ref, key, {**base, "lr": lr}, tags={tracking.OPTUNA_PARAMS: f'{{"lr": {lr}}}'},
              result=Result(Outcome.SOLVED, {"max_seq_len_solved": 10.0}))
    t.end_sweep(ref, "KILLED", {})
    assert main(["report", "my-grid", "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    assert [r[0] for r in md_rows(out)[1:]] == ["k0", "k1", "k2"]
    assert "All cells complete." in out and "missing" not in out


@pytest.mark.parametrize("status", ["KILLED", "FINISHED"])
def test_an_optuna_cell_of_one_trial_is_told_from_a_grid_cell(tmp_path: Path, capsys,
                                                              status: str) -> None:
    """With ``n_trials: 1`` an Optuna cell stands for one configuration as a grid cell does:
    its ``searched`` keys tell it apart, so its run, whose lr Optuna chose, is its trial, and
    once the sweep FINISHED it misses nothing though its point had no run (repeated)."""
    text = MIXED_SPEC.replace("n_trials: 2", "n_trials: 1")
    resolved, uri, t, ref = _my_grid(tmp_path, text, "mine-4")
    track(t, ref, "k0", resolved.cells()[0].params,
          result=Result(Outcome.SOLVED, {"max_seq_len_solved": 10.0}))
    if status == "KILLED":
        track(t, ref, "k1", {**resolved.cells()[1].params, "lr": 0.05},
              tags={tracking.OPTUNA_PARAMS: '{"lr": 0.05}'},
              result=Result(Outcome.SOLVED, {"max_seq_len_solved": 10.0}))
    t.end_sweep(ref, status, {})
    assert main(["report", "my-grid", "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    assert "All cells complete." in out and "missing" not in out


def test_a_finished_optuna_sweep_misses_no_trial(tmp_path: Path, capsys) -> None:
    """A point proposed again spends a trial without a run: a FINISHED sweep with fewer runs
    than trials is complete."""
    uri = _interrupted(tmp_path, "{kind: optuna, n_trials: 2}", "{low: 0.001, high: 0.1}",
                       [({"lr": 0.05, "penalty": 1.0}, "finished"),
                        ({"lr": 0.02, "penalty": 1.0}, "finished"),
                        ({"lr": 0.03, "penalty": 0.1}, "finished")], status="FINISHED",
                       metrics={contract.OPTUNA_REPEATS: 1})
    assert main(["report", "my-grid", "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    assert len(md_rows(out)) == 1 + 3 and "All cells complete." in out
    assert "3 runs → 3 configurations of 4 expected (3 solved, 1 repeated point not trained)" \
        in out
    runs = load_sweep(MlflowClient(uri), "my-grid")
    assert provenance_items(runs)["runs"].endswith(
        "; 1 repeated Optuna point, told a known value, not trained")
