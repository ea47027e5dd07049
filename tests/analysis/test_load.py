"""Loading sweeps from MLflow: selection, de-duplication, counts, parsing and the cache,
against the store of ``conftest.py``, built through the Tracker into every kind of store."""

from __future__ import annotations

import math
import socket
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from analysis import load
from analysis.cache import RunCache
from analysis.expected import expected_configurations
from analysis.load import (
    Histories,
    find_sweep,
    list_sweeps,
    load_sweep,
    metric_history,
    outcome_of,
    parse_param,
    read,
    select_latest,
)
from ortho_core.errors import ConfigError
from ortho_core.reporting import Outcome, Result
from sweeps import tracking
from sweeps.spec import load_spec, resolve
from sweeps.testing import sqlite_store, start_sweep, track
from tests.analysis.conftest import SPEC, SW1, Store, stage_history


def test_parse_param_restores_numbers_bools_and_none() -> None:
    assert parse_param("10") == 10 and isinstance(parse_param("10"), int)
    assert parse_param("1e-05") == 1e-05
    assert parse_param("0.1") == 0.1
    assert parse_param("True") is True and parse_param("False") is False
    assert parse_param("None") is None and parse_param(None) is None
    assert parse_param("temporal_order") == "temporal_order"
    assert parse_param("100,100") == "100,100"


def test_outcome_prefers_the_tag_then_the_status() -> None:
    assert outcome_of("FINISHED", "diverged") == "diverged"
    assert outcome_of("FAILED", None) == "failed"
    assert outcome_of("KILLED", None) == "incomplete"
    assert outcome_of("RUNNING", None) == "incomplete"


def test_sweeps_are_listed_newest_first_and_the_latest_is_the_default(built_store: Store) -> None:
    client = built_store.client()
    sweeps = list_sweeps(client, SPEC)
    assert [s.sweep_id for s in sweeps] == ["sw-1", "sw-0"]
    latest = find_sweep(client, SPEC)
    assert (latest.sweep_id, latest.profile, latest.n_configs) == ("sw-1", "cpu", 16)
    assert latest.parent_run_id == built_store.parents["sw-1"]
    assert find_sweep(client, SPEC, "sw-0").profile == "smoke"


def test_unknown_sweep_or_spec_names_what_exists(built_store: Store) -> None:
    client = built_store.client()
    with pytest.raises(ConfigError) as err:
        find_sweep(client, SPEC, "nope")
    assert err.value.field == "sweep" and "sw-1 (cpu)" in str(err.value)
    assert "sw-0 (smoke)" in str(err.value)
    with pytest.raises(ConfigError) as err:
        find_sweep(client, "ff-mnist")
    assert err.value.field == "spec"
    assert f"orth-pretrain-convergence, {SPEC}" in str(err.value)


def winners() -> dict[str, tuple[int, int]]:
    """Trial key -> (index in SW1 of the run that must stand for it, runs of the key),
    recomputed from the store's recipe: the latest FINISHED run, else the latest run."""
    by_key: dict[str, list[int]] = {}
    for i, trial in enumerate(SW1):
        by_key.setdefault(trial.key(), []).append(i)
    out = {}
    for key, indices in by_key.items():
        finished = [i for i in indices if SW1[i].status == "FINISHED"]
        pool = finished or indices
        out[key] = (max(pool, key=lambda i: SW1[i].start), len(indices))
    return out


def test_one_row_per_configuration_latest_finished_run_wins(built_store: Store) -> None:
    runs = load_sweep(built_store.client(), SPEC)
    frame = runs.runs.set_index("trial_key")
    ids = [run_id for _, run_id in built_store.runs["sw-1"]]
    assert runs.n_runs == len(SW1) == 16
    assert len(frame) == 14 and set(frame.index) == set(winners())
    for key, (index, n) in winners().items():
        assert frame.loc[key, "run_id"] == ids[index], key
        assert frame.loc[key, "attempts"] == n
    # The duplicated key: an older FAILED run claiming T = 90, a newer FINISHED one with 60.
    dup = SW1[5].key()
    assert SW1[4].key() == dup and frame.loc[dup, "metrics.max_seq_len_solved"] == 60
    assert frame.loc[dup, "status"] == "FINISHED"
    # A FINISHED run beats a newer KILLED one of the same key.
    assert frame.loc[SW1[12].key(), "run_id"] == ids[12]
    assert sum(c["trials"] for c in runs.expected_cells) == 16  # what SPEC_TEXT defines


def test_the_expected_cells_are_those_the_tracker_kept(built_store: Store) -> None:
    runs = load_sweep(built_store.client(), SPEC)
    assert runs.expected_cells is not None
    frame = expected_configurations(runs.expected_cells)
    assert len(frame) == 16 and (frame["trials"] == 1).all()
    tracked = runs.runs[["params.task", "params.variant", "params.lr", "params.penalty"]]
    keys = {(t, v, lr, p if v == "open" else None) for t, v, lr, p in tracked.itertuples(
        index=False)}
    expected = {(t, v, lr, p if v == "open" else None) for t, v, lr, p in frame[
        ["task", "variant", "lr", "penalty"]].itertuples(index=False)}
    assert keys < expected and expected - keys == {("adding", "oinit", 0.1, None),
                                                   ("adding", "oinit", 0.01, None)}
    assert load_sweep(built_store.client(), SPEC, "sw-0").expected_cells is None


def test_failed_and_diverged_configurations_are_kept_and_counted(built_store: Store) -> None:
    runs = load_sweep(built_store.client(), SPEC)
    expected = Counter(SW1[i].outcome for i, _ in winners().values())
    assert runs.outcomes == {"solved": expected["solved"], "unsolved": 1, "diverged": 1,
                             "failed": 1, "incomplete": 0}
    assert sum(runs.outcomes.values()) == 14
    failed = runs.runs[runs.runs["outcome"] == "failed"]
    assert list(failed["params.task"]) == ["adding"] and list(failed["status"]) == ["FAILED"]


def test_params_are_parsed_and_metrics_are_latest_values(built_store: Store) -> None:
    frame = load_sweep(built_store.client(), SPEC).runs
    assert frame["params.lr"].dtype == "float64"
    assert frame["params.hidden"].dtype == "int64"
    assert set(frame["params.lr"]) == {0.1, 0.01}
    assert frame["params.spectral_radius"].isna().all()
    assert set(frame["params.warm_start"]) == {False}
    first = frame.set_index("trial_key").loc[SW1[0].key()]
    assert first["metrics.val_error"] == 0.25  # the summary logged at the last step
    assert first["node"] == socket.gethostname()  # a claim outside Ray: the host
    assert first["parent_run_id"] == built_store.parents["sw-1"]


def test_metric_history_is_sorted_by_step_and_keeps_the_last_value(built_store: Store) -> None:
    run_id = built_store.runs["sw-1"][0][1]
    logged = [(s, v) for k, s, v in stage_history(SW1[0], 0) if k == "val_error"]
    history = metric_history(built_store.client(), run_id, "val_error")
    assert list(history["step"]) == [s for s, _ in logged]
    assert list(history["value"]) == [v for _, v in logged[:-1]] + [0.25]
    assert metric_history(built_store.client(), run_id, "no_such_metric").empty


def test_the_cache_reads_a_finished_sweep_once(fresh_store: Store, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    client = fresh_store.client()
    cache = RunCache(tmp_path / "cache")
    first = load_sweep(client, SPEC, cache=cache)
    assert (tmp_path / "cache" / SPEC / "sw-1.parquet").is_file()

    def no_mlflow(*args: object) -> None:
        raise AssertionError("read MLflow although the cache is current")

    monkeypatch.setattr(load, "child_runs", no_mlflow)
    again = load_sweep(client, SPEC, cache=cache)
    pd.testing.assert_frame_equal(first.runs, again.runs)
    assert again.n_runs == first.n_runs
    assert again.expected_cells == first.expected_cells and len(first.expected_cells) == 16

    # A new run changes the fingerprint: the sweep is read again, and nothing is cached
    # while that run is still RUNNING.
    monkeypatch.undo()
    sweep = first.sweep
    t = tracking.Tracker(fresh_store.uri)
    ref = tracking.SweepRef(sweep.experiment_id, sweep.sweep_id, sweep.parent_run_id)
    new = track(t, ref, "new-key", {}, end="running")
    assert load.fingerprint(client, sweep) is None
    live = load_sweep(client, SPEC, cache=cache)
    assert live.n_runs == 17 and live.outcomes["incomplete"] == 1
    t.kill(new)
    info = client.get_run(new).info
    assert load.fingerprint(client, sweep) == (
        f"{sweep.parent_run_id}:{info.start_time}:{info.end_time}")
    assert load_sweep(client, SPEC, cache=cache).n_runs == 17
    monkeypatch.setattr(load, "child_runs", no_mlflow)
    assert load_sweep(client, SPEC, cache=cache).n_runs == 17


@pytest.mark.parametrize("column", ["hostname", "optuna_params"])
def test_a_cache_entry_written_before_a_column_was_kept_is_read_again(
        fresh_store: Store, tmp_path: Path, column: str) -> None:
    """An entry of the current fingerprint without one of :data:`load.RAW_COLUMNS` (cached
    by an older version) is replaced by a fresh read, not served without the column."""
    client = fresh_store.client()
    cache = RunCache(tmp_path / "cache")
    first = load_sweep(client, SPEC, cache=cache)
    key = load.fingerprint(client, first.sweep)
    raw, meta = cache.get_runs(SPEC, first.sweep.sweep_id, key)
    cache.put_runs(SPEC, first.sweep.sweep_id, key, raw.drop(columns=[column]), meta)
    again = load_sweep(client, SPEC, cache=cache)
    pd.testing.assert_frame_equal(first.runs, again.runs)
    pd.testing.assert_frame_equal(cache.get_runs(SPEC, first.sweep.sweep_id, key)[0], raw)


def test_histories_are_cached_for_ended_runs(built_store: Store, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    client = built_store.client()
    cache = RunCache(tmp_path / "cache")
    runs = load_sweep(client, SPEC, cache=cache)
    run_id = built_store.runs["sw-1"][1][1]
    fresh = Histories(client, runs, cache).get(run_id, "spectral_radius")
    empty = Histories(client, runs, cache).get(run_id, "no_such_metric")

    def no_mlflow(*args: object) -> None:
        raise AssertionError("read MLflow although the history is cached")

    monkeypatch.setattr(load, "metric_history", no_mlflow)
    cached = Histories(client, runs, cache).get(run_id, "spectral_radius")
    pd.testing.assert_frame_equal(fresh, cached)
    assert Histories(client, runs, cache).get(run_id, "no_such_metric").empty and empty.empty
    logged = [(s, v) for k, s, v in stage_history(SW1[1], 1) if k == "spectral_radius"]
    assert list(zip(cached["step"], cached["value"], strict=True)) == logged


def test_a_sweep_without_configuration_runs_loads_empty(fresh_store: Store) -> None:
    t = tracking.Tracker(fresh_store.uri)
    start_sweep(t, SPEC, "sw-2", profile="cpu")  # no artifacts, as an older tracker's
    runs = load_sweep(fresh_store.client(), SPEC)
    assert runs.sweep.sweep_id == "sw-2" and runs.sweep.n_configs is None
    assert runs.n_runs == 0 and runs.runs.empty and sum(runs.outcomes.values()) == 0
    assert runs.expected_cells is None


def test_read_is_the_one_call_from_a_home(tmp_path: Path, monkeypatch, capfd) -> None:
    """``read(spec, home=…)``: the same store ``ortho`` uses with ``--home``, the runs and
    their histories, and no progress bar of MLflow's on stderr while reading artifacts."""
    monkeypatch.delenv("ORTHO_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", raising=False)
    home = tmp_path / "runs"
    uri = sqlite_store(home)
    assert uri == load.resolve_tracking_uri(None, home)  # what a sweep with --home tracks into
    t = tracking.tracker(uri)
    resolved = resolve(load_spec("orth-pretrain-convergence"), "smoke")  # one configuration
    ref = start_sweep(t, "mine", "m-1", profile="cpu", metric="loss", mode="min",
                      resolved_text=resolved.text)  # read back as an artifact
    track(t, ref, "k1", {"lr": 0.1}, result=Result(Outcome.SOLVED, {"loss": 0.25}),
          rows=[(1, {"loss": 0.5}), (2, {"loss": 0.25})])
    t.end_sweep(ref, "FINISHED", {})
    capfd.readouterr()
    runs, histories = read("mine", home=home)
    assert list(runs.runs["metrics.loss"]) == [0.25] and len(runs.expected_cells) == 1
    assert list(histories.get(runs.runs.run_id[0], "loss")["value"]) == [0.5, 0.25]
    assert "Downloading artifacts" not in capfd.readouterr().err
    by_file, _ = read(str(tmp_path / "specs" / "mine.yaml"), home=home)  # as `ortho report`
    assert list(by_file.runs["run_id"]) == list(runs.runs["run_id"])


def test_an_infinite_metric_reads_back_infinite(tmp_path: Path) -> None:
    """A diverged run's loss is logged as inf; MLflow stores it as the largest float, which
    the runs' frame and the histories turn back into inf (a table then prints inf, not
    1.79769e+308), and leave finite values as they are."""
    home = tmp_path / "runs"
    t = tracking.tracker(sqlite_store(home))
    ref = start_sweep(t, "mine", "m-1", profile="cpu", metric="loss", mode="min")
    track(t, ref, "k1", {"lr": 0.1}, result=Result(Outcome.DIVERGED, {"loss": math.inf}),
          rows=[(1, {"loss": 0.5}), (2, {"loss": -math.inf})])
    t.end_sweep(ref, "FINISHED", {})
    runs, histories = read("mine", home=home)
    assert t.client.get_run(runs.runs.run_id[0]).data.metrics["loss"] == sys.float_info.max
    assert list(runs.runs["metrics.loss"]) == [math.inf]
    assert list(histories.get(runs.runs.run_id[0], "loss")["value"]) == [0.5, math.inf]


def test_attempts_count_the_tries_a_resume_deleted_the_runs_of():
    """A resume deletes the run it replaces, so a configuration's active runs undercount
    its tries; its run's ``ortho.attempt`` says how many there were. A frame cached before
    these columns existed loads as untagged and not stopped."""
    raw = pd.DataFrame({"run_id": ["a", "b1", "b2"], "trial_key": ["ka", "kb", "kb"],
                        "status": ["FINISHED", "FAILED", "FINISHED"],
                        "outcome_tag": ["solved", None, "solved"],
                        "start_time": [1.0, 2.0, 3.0], "end_time": [4.0, 5.0, 6.0],
                        "attempt": ["3", None, None], "stopped_early": [False, False, True]})
    latest = select_latest(raw).set_index("trial_key")
    assert latest["attempts"].to_dict() == {"ka": 3, "kb": 2}
    assert latest["stopped_early"].to_dict() == {"ka": False, "kb": True}
    cached = select_latest(raw.drop(columns=["attempt", "stopped_early"]))
    assert cached["attempts"].tolist() == [1, 2] and not cached["stopped_early"].any()
