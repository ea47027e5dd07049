"""MLflow layout and exactly-once bookkeeping (``sweeps.tracking``), without Ray, against
every kind of store (the ``store`` fixture of ``tests/conftest.py``)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from ortho_core.errors import ConfigError
from ortho_core.reporting import Outcome, Result
from sweeps import tracking
from sweeps.contract import LocationError, database_url, read_expected_cells
from sweeps.testing import sqlite_store
from sweeps.tracking import layout
from tests.conftest import Store


def test_tracking_uri_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ORTHO_TRACKING_URI", raising=False)
    home = tracking.home_dir(None)
    assert home == tmp_path / "ortho-runs"
    assert tracking.tracking_uri(None, home) == f"sqlite:///{tmp_path}/ortho-runs/mlflow.db"
    assert tracking.tracking_uri("sqlite:///x/m.db", home) == f"sqlite:///{tmp_path}/x/m.db"
    assert tracking.tracking_uri("sqlite:////abs/m.db", home) == "sqlite:////abs/m.db"
    assert tracking.tracking_uri("http://127.0.0.1:5000", home) == "http://127.0.0.1:5000"
    for refused in ("file:runs", "mlruns", "foo://bar", "sqlite://m.db"):
        with pytest.raises(LocationError, match="tracking_uri: expected an MLflow "
                           "store") as err:
            tracking.tracking_uri(refused, home)
        assert err.value.value == refused
    monkeypatch.setenv("ORTHO_TRACKING_URI", "http://server:5000")
    assert tracking.tracking_uri(None, home) == "http://server:5000"
    assert tracking.tracking_uri("sqlite:////abs/m.db", home) == "sqlite:////abs/m.db"


def test_home_precedence(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ORTHO_HOME", "envhome")
    assert tracking.home_dir(None) == tmp_path / "envhome"
    assert tracking.home_dir("flag") == tmp_path / "flag"


def test_artifacts_live_beside_a_sqlite_store(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert tracking.artifact_location(uri, "spec") == (tmp_path / "artifacts/spec").as_uri()
    assert tracking.artifact_location("http://h:5000", "spec") is None


def test_an_experiment_of_a_server_that_serves_its_artifacts_is_refused_in_its_database(
        tmp_path):
    """A server's database opened directly (cluster/README: MLflow's database given to a
    sweep on the head): an experiment the server created keeps its artifacts at
    ``mlflow-artifacts:`` URIs, which only the server can write, so the sweep is refused
    (exit 2, naming tracking_uri) before its parent run exists, not stopped by MLflow at its
    first artifact. One this store created itself is used."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    sqlite_store(tmp_path)
    client = MlflowClient(tracking_uri=uri)
    client.create_experiment("served", artifact_location="mlflow-artifacts:/1")
    tracker = tracking.tracker(uri)
    with pytest.raises(ConfigError) as refused:
        tracker.experiment_id("served", tmp_path)
    assert refused.value.field == "tracking_uri"
    assert "http(s):// address" in str(refused.value) and "mlflow-artifacts:/1" in str(
        refused.value)
    assert tracker.experiment_id("own", tmp_path)
    assert client.search_runs([e.experiment_id for e in client.search_experiments()]) == []


def test_metrics_csv_has_a_column_per_metric_in_first_seen_order():
    rows = [(0, {"loss": 1.0}), (100, {"loss": 0.5, "rho": 1.25}), (200, {"rho": 1.5})]
    assert tracking.metrics_csv(rows) == "step,loss,rho\n0,1.0,\n100,0.5,1.25\n200,,1.5\n"


RESOLVED = """\
name: spec
search: {kind: optuna, n_trials: 3}
fixed: {steps: 2}
space: {lr: [0.1, 0.01], width: {low: 1, high: 4}}
groups:
  - fixed: {variant: a}
  - fixed: {variant: b}
    space: {lr: [0.5]}
"""


def _sweep(store: Store) -> tuple[tracking.Tracker, tracking.SweepRef]:
    t = tracking.tracker(store.uri)
    ref = t.start_sweep(t.experiment_id("spec"), "s1", {tracking.SPEC: "spec"},
                        {tracking.RESOLVED_ARTIFACT: RESOLVED})
    return t, ref


def test_a_sweep_keeps_its_resolved_spec_and_the_cells_it_defines(store, tmp_path):
    t, ref = _sweep(store)
    parent = ref.parent_run_id
    resolved = t.client.download_artifacts(parent, tracking.RESOLVED_ARTIFACT, str(tmp_path))
    assert Path(resolved).read_text() == RESOLVED
    path = t.client.download_artifacts(parent, tracking.EXPECTED_CELLS_ARTIFACT, str(tmp_path))
    cells = read_expected_cells(Path(path).read_text())
    # Group a: lr 0.1 and 0.01; group b: lr 0.5 only; width is Optuna's: 3 trials a cell.
    assert [(c["variant"], c["lr"], c["steps"], c["trials"], c["searched"]) for c in cells] == [
        ("a", 0.1, 2, 3, ["width"]), ("a", 0.01, 2, 3, ["width"]), ("b", 0.5, 2, 3, ["width"])]
    assert all("width" not in c and c["seed"] == 0 for c in cells)


def test_expected_cells_of_a_grid_count_one_configuration_each():
    cells = tracking_cells("search: {kind: grid}\nspace: {x: [1, 2]}\nrepeats: 2\nseed: 5\n")
    assert [(c["x"], c["seed"], c["trials"], c["searched"]) for c in cells] == [
        (1, 5, 1, []), (1, 6, 1, []), (2, 5, 1, []), (2, 6, 1, [])]


def test_expected_cells_hold_the_trainer_s_default_of_a_key_another_group_sets():
    """task is fixed by group b only: group a's cells hold synthetic's default, which its runs
    log, and name it as defaulted; b's cells, which set every key, have no such list."""
    cells = tracking_cells("experiment: synthetic\nspace: {lr: [0.1]}\ngroups:\n"
                           "  - fixed: {max_iters: 50}\n"
                           "  - fixed: {max_iters: 100, task: adding}\n")
    assert [(c["max_iters"], c["task"], c.get("defaulted")) for c in cells] == [
        (50, "temporal_order", ["task"]), (100, "adding", None)]
    # without the trainer named, the text's values alone, as before
    bare = tracking_cells("space: {lr: [0.1]}\ngroups:\n  - fixed: {max_iters: 50}\n"
                          "  - fixed: {max_iters: 100, task: adding}\n")
    assert "task" not in bare[0] and "defaulted" not in bare[0]


def tracking_cells(text: str) -> list[dict]:
    from sweeps.tracking.cells import expected_cells_json

    return read_expected_cells(expected_cells_json(text))


def test_an_attempt_discarded_by_a_resume_still_counts(store):
    """A resume deletes a sweep's unfinished runs before it trains their configurations
    again; the next run of such a configuration is its second attempt, not its first."""
    t, ref = _sweep(store)
    first = t.claim(ref, "k1", {"lr": 0.1}, {})
    t.fail(first.run_id, "Traceback: boom")
    assert t.discard_unfinished(t.states(ref)) == 1
    again = t.claim(ref, "k1", {"lr": 0.1}, {})
    assert t.client.get_run(again.run_id).data.tags[tracking.ATTEMPT] == "2"
    assert [r.info.run_id for r in t.configurations(ref)] == [again.run_id]


def test_claim_skips_finished_and_replaces_failed_runs(store):
    t, ref = _sweep(store)
    first = t.claim(ref, "k1", {"lr": 0.1, "widths": (3, 4)}, {})
    assert first.stored is None
    run = t.client.get_run(first.run_id)
    assert run.data.params == {"lr": "0.1", "widths": "3,4"}
    assert run.data.tags[tracking.PARENT] == ref.parent_run_id
    assert run.data.tags[tracking.ATTEMPT] == "1"
    t.fail(first.run_id, "Traceback: boom")
    assert t.client.get_run(first.run_id).info.status == "FAILED"

    second = t.claim(ref, "k1", {"lr": 0.1}, {})  # a retry replaces the failed run
    assert second.run_id != first.run_id
    assert t.client.get_run(first.run_id).info.lifecycle_stage == "deleted"
    assert t.client.get_run(second.run_id).data.tags[tracking.ATTEMPT] == "2"
    t.finish(second.run_id, Result(Outcome.SOLVED, {"score": 3, "t": 1.5}), 7,
             [(7, {"score": 2.0})])

    third = t.claim(ref, "k1", {"lr": 0.1}, {})  # a finished run is kept and reused
    assert third.run_id == second.run_id
    assert third.stored == Result(Outcome.SOLVED, {"score": 3, "t": 1.5})
    [run] = t.configurations(ref)
    assert run.info.run_id == second.run_id
    assert run.data.tags[tracking.OUTCOME] == "solved"
    assert [(m.step, m.value) for m in t.client.get_metric_history(run.info.run_id, "score")] \
        == [(7, 3.0)]


def test_a_pack_claimed_at_once_keeps_finished_runs_and_replaces_the_rest(store):
    t, ref = _sweep(store)
    done, failed, running = (t.claim(ref, k, {"k": k}, {}) for k in ("done", "failed", "running"))
    t.finish(done.run_id, Result(Outcome.SOLVED, {"score": 1.0}), 3, [])
    t.fail(failed.run_id, "Traceback: boom")
    claims = t.claim_all(ref, [(k, {"k": k}, {tracking.CELL: "2"})
                               for k in ("new", "done", "failed", "running")])
    new, kept, retried, replaced = claims
    assert kept == tracking.records.Claim(done.run_id, Result(Outcome.SOLVED, {"score": 1.0}))
    assert new.stored is None and retried.stored is None and replaced.stored is None
    runs = {r.data.tags[tracking.TRIAL_KEY]: r for r in t.configurations(ref)}
    assert {k: (r.info.run_id, r.info.status, r.data.tags[tracking.ATTEMPT], r.data.params)
            for k, r in runs.items()} == {
        "new": (new.run_id, "RUNNING", "1", {"k": "new"}),
        "done": (done.run_id, "FINISHED", "1", {"k": "done"}),
        "failed": (retried.run_id, "RUNNING", "2", {"k": "failed"}),
        "running": (replaced.run_id, "RUNNING", "2", {"k": "running"})}
    assert runs["new"].data.tags[tracking.CELL] == "2"
    assert len(t.configurations(ref)) == 4
    assert t.client.get_run(running.run_id).info.status == "KILLED"  # retired, in the trash
    with pytest.raises(ValueError, match="twice"):
        t.claim_all(ref, [("x", {}, {}), ("x", {}, {})])


def test_states_hold_each_active_configuration_run_with_the_tags_a_sweep_reads(store,
                                                                            monkeypatch):
    """:meth:`Tracker.states` reads from the store's tables where it can, else from
    ``search_runs``: both give every active configuration run of the sweep (not the parent,
    not a retired run, not another sweep's) with its status and its tags of STATE_TAGS."""
    t, ref = _sweep(store)
    other = t.start_sweep(ref.experiment_id, "s2", {tracking.SPEC: "spec"},
                          {tracking.RESOLVED_ARTIFACT: RESOLVED})
    t.claim(other, "done", {"k": "done"}, {})
    done, failed, running = (t.claim(ref, k, {"k": k}, {tracking.CELL: "1"})
                             for k in ("done", "failed", "running"))
    t.finish(done.run_id, Result(Outcome.SOLVED, {"score": 1.0}), 3, [])
    t.fail(failed.run_id, "Traceback: boom")
    retried = t.claim(ref, "failed", {"k": "failed"}, {})  # the FAILED run is retired
    t.fail(retried.run_id, "Traceback: boom again")
    expected = {
        done.run_id: ("FINISHED", {tracking.TRIAL_KEY: "done", tracking.ATTEMPT: "1",
                                   tracking.OUTCOME: "solved",
                                   tracking.SUMMARY: '{"score": 1.0}'}),
        retried.run_id: ("FAILED", {tracking.TRIAL_KEY: "failed", tracking.ATTEMPT: "2",
                                    tracking.OUTCOME: "failed"}),
        running.run_id: ("RUNNING", {tracking.TRIAL_KEY: "running", tracking.ATTEMPT: "1"})}
    monkeypatch.setattr(tracking.tables, "IDS_PER_QUERY", 2)  # the tags read in two parts
    with monkeypatch.context() as m:
        if store.kind == "sqlite":  # a server's tables are not this process's to read
            assert t.tables is not None
            m.setattr(t, "configurations", lambda ref: pytest.fail("read by search_runs"))
        direct = [(r.run_id, r.status, r.tags) for r in t.states(ref)]
    oldest_first = [(run_id, *expected[run_id])
                    for run_id in (done.run_id, running.run_id, retried.run_id)]
    assert direct == oldest_first
    if t.tables is not None:
        t.tables.close()
    t._tables, t._tables_looked = None, True  # as through a server, or another schema
    assert [(r.run_id, r.status, r.tags) for r in t.states(ref)] == oldest_first


def test_a_pack_finished_at_once_ends_each_run_with_its_own_result(store):
    t, ref = _sweep(store)
    claims = t.claim_all(ref, [(f"k{i}", {"i": i}, {}) for i in range(3)])
    t.finish_all([(c.run_id, Result(Outcome.SOLVED if i else Outcome.UNSOLVED,
                                    {"score": float(i)}, artifacts={"curve": [i]}),
                   5, [(5, {"loss": 1.0 / (i + 1)})]) for i, c in enumerate(claims)])
    for i, c in enumerate(claims):
        run = t.client.get_run(c.run_id)
        assert run.info.status == "FINISHED"
        assert run.data.tags[tracking.OUTCOME] == ("solved" if i else "unsolved")
        assert run.data.metrics == {"score": float(i)}
        csv = Path(t.client.download_artifacts(c.run_id, tracking.METRICS_CSV)).read_text()
        assert csv.splitlines()[1].split(",") == ["5", repr(1.0 / (i + 1))]
        assert Path(t.client.download_artifacts(c.run_id, "curve.json")).read_text() == f"[{i}]"
        assert t.claim(ref, f"k{i}", {}, {}).stored.summary == {"score": float(i)}
    t.finish_all([])


def test_one_member_s_ending_mlflow_refuses_fails_that_member_alone(store):
    t, ref = _sweep(store)
    claims = t.claim_all(ref, [(f"k{i}", {"i": i}, {}) for i in range(3)])
    summaries = [{"score": 0.0}, {"acc@1": 1.0}, {"score": 2.0}]  # '@': not a metric name
    t.finish_all([(c.run_id, Result(Outcome.SOLVED, summary), 5, [(5, {"loss": 0.5})])
                  for c, summary in zip(claims, summaries, strict=True)])
    runs = [t.client.get_run(c.run_id) for c in claims]
    assert [r.info.status for r in runs] == ["FINISHED", "FAILED", "FINISHED"]
    assert [r.data.tags[tracking.OUTCOME] for r in runs] == ["solved", "failed", "solved"]
    traceback = Path(t.client.download_artifacts(claims[1].run_id, tracking.TRACEBACK))
    assert "acc@1" in traceback.read_text()
    assert t.claim(ref, "k2", {}, {}).stored == Result(Outcome.SOLVED, {"score": 2.0})


def test_a_member_s_run_deleted_meanwhile_raises_after_the_others_are_ended(store):
    from mlflow.exceptions import MlflowException

    t, ref = _sweep(store)
    claims = t.claim_all(ref, [(f"k{i}", {"i": i}, {}) for i in range(3)])
    t.client.delete_run(claims[0].run_id)  # e.g. from the UI while the pack trained
    with pytest.raises(MlflowException):
        t.finish_all([(c.run_id, Result(Outcome.SOLVED, {"score": float(i)}), 5, [])
                      for i, c in enumerate(claims)])
    assert [t.client.get_run(c.run_id).info.status for c in claims[1:]] == ["FINISHED"] * 2
    assert t.claim(ref, "k2", {}, {}).stored == Result(Outcome.SOLVED, {"score": 2.0})


def test_a_param_mlflow_refuses_raises_before_any_run_is_replaced(store):
    from mlflow.exceptions import MlflowException

    t, ref = _sweep(store)
    failed = t.claim(ref, "k1", {"lr": 0.1}, {})
    t.fail(failed.run_id, "Traceback: boom")
    with pytest.raises(MlflowException, match="Invalid value"):
        t.claim_all(ref, [("k0", {"lr": 0.1}, {}), ("k1", {"../lr": 0.1}, {})])
    assert [r.info.run_id for r in t.configurations(ref)] == [failed.run_id]


def test_failed_run_keeps_its_traceback(store, tmp_path):
    t, ref = _sweep(store)
    claim = t.claim(ref, "k", {}, {})
    t.fail(claim.run_id, "Traceback (most recent call last):\nValueError: x", [(0, {"a": 1.0})])
    path = t.client.download_artifacts(claim.run_id, tracking.TRACEBACK, str(tmp_path))
    assert Path(path).read_text().endswith("ValueError: x")
    assert t.client.get_run(claim.run_id).data.tags[tracking.OUTCOME] == "failed"


def test_marking_and_discarding_take_the_states_just_read_without_reading_again(store,
                                                                              monkeypatch):
    t, ref = _sweep(store)
    done = t.claim(ref, "done", {}, {})
    t.finish(done.run_id, Result(Outcome.UNSOLVED), 0, [])
    live = {t.claim(ref, key, {}, {}).run_id for key in ("a", "b")}
    runs = t.states(ref)
    monkeypatch.setattr(t, "states", lambda ref: pytest.fail("the states were read again"))
    assert t.mark_killed(runs) == 2
    assert {r.info.run_id: r.info.status for r in t.configurations(ref)
            if r.info.run_id in live} == dict.fromkeys(live, "KILLED")
    assert t.discard_unfinished(runs) == 2
    assert [r.data.tags[tracking.TRIAL_KEY] for r in t.configurations(ref)] == ["done"]


def test_discard_unfinished_and_find_sweep(store):
    t, ref = _sweep(store)
    done = t.claim(ref, "done", {}, {})
    t.finish(done.run_id, Result(Outcome.UNSOLVED), 0, [])
    t.claim(ref, "interrupted", {}, {})
    assert t.mark_killed(t.states(ref)) == 1
    assert t.find_sweep(unfinished=True).ref == ref
    assert t.discard_unfinished(t.states(ref)) == 1
    assert [r.data.tags[tracking.TRIAL_KEY] for r in t.configurations(ref)] == ["done"]
    t.end_sweep(ref, "FINISHED", {"configs_done": 1})
    assert t.find_sweep(unfinished=True) is None
    assert t.find_sweep("s1").status == "FINISHED"
    assert t.find_sweep("nope") is None


WRITERS, RUNS_PER_WRITER, STEPS = 3, 4, 100


def _writer(uri: str, ref: tracking.SweepRef, writer: int) -> None:
    from mlflow.entities import Metric

    t = tracking.Tracker(uri)
    for i in range(RUNS_PER_WRITER):
        claim = t.claim(ref, f"w{writer}-{i}", {"writer": writer, "i": i}, {})
        t.log_metrics(claim.run_id, [Metric("loss", s / STEPS, 0, s) for s in range(STEPS)])
        t.finish(claim.run_id, Result(Outcome.SOLVED, {"score": float(i)}), STEPS, [])


def test_concurrent_writers_lose_nothing(store):
    t, ref = _sweep(store)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(t.uri, ref, w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    runs = t.configurations(ref)
    assert sorted(r.data.tags[tracking.TRIAL_KEY] for r in runs) == sorted(
        f"w{w}-{i}" for w in range(WRITERS) for i in range(RUNS_PER_WRITER))
    for run in runs:
        assert run.info.status == "FINISHED"
        history = t.client.get_metric_history(run.info.run_id, "loss")
        assert [m.step for m in history] == list(range(STEPS))


@pytest.mark.parametrize(("summary", "value"), [
    ({"m": 2}, 2.0), ({"m": float("nan")}, None), ({"m": True}, None), ({}, None)])
def test_metric_value(summary, value):
    assert tracking.metric_value(summary, "m") == value


@pytest.mark.parametrize(("given", "opened"), [
    ("postgresql://u:pw@db:5432/mlflow", "postgresql+psycopg2://u:pw@db:5432/mlflow"),
    ("postgres://db/optuna?sslmode=require", "postgresql+psycopg2://db/optuna?sslmode=require"),
    ("postgresql+psycopg://db/mlflow", "postgresql+psycopg://db/mlflow"),
    ("sqlite:////abs/mlflow.db", "sqlite:////abs/mlflow.db"),
    ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
    ("mysql+pymysql://u:pw@h/db", "mysql+pymysql://u:pw@h/db"),
])
def test_a_bare_postgresql_url_is_opened_with_the_installed_driver(given, opened):
    assert database_url(given) == opened


@pytest.mark.parametrize(("text", "masked"), [
    ("postgresql://ortho:hunter2@db:5432/mlflow", "postgresql://ortho:***@db:5432/mlflow"),
    ("https://me:p@ss/w?rd@mlflow.example.org/x", "https://me:***@mlflow.example.org/x"),
    ("postgresql://db/mlflow?user=u&password=hunter2&sslmode=require",
     "postgresql://db/mlflow?user=u&password=***&sslmode=require"),
    ("http://h:5000/?token=abc#top", "http://h:5000/?token=***#top"),
    ("run --tracking-uri mysql+pymysql://u:pw@h/db --storage s3://bucket/ray",
     "run --tracking-uri mysql+pymysql://u:***@h/db --storage s3://bucket/ray"),
    ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
    ("sqlite:////abs/ortho-runs/mlflow.db", "sqlite:////abs/ortho-runs/mlflow.db"),
    ("https://ghp_abc123@mlflow.example.org/x", "https://***@mlflow.example.org/x"),
    ("--tracking-uri http://tok@10.0.0.5:5000 and ws://t0k@h",
     "--tracking-uri http://***@10.0.0.5:5000 and ws://***@h"),
    ("HTTPS://tok@host/x", "HTTPS://***@host/x"),
    ("https://a@b@mlflow.example.org/x?q=1", "https://***@mlflow.example.org/x?q=1"),
    ("postgresql://ortho@db/mlflow", "postgresql://ortho@db/mlflow"),
    ("mail ortho@example.org", "mail ortho@example.org"),
])
def test_redact_masks_the_credentials_of_uris(text, masked):
    assert tracking.redact(text) == masked


def test_filter_values_are_quoted_so_that_quotes_match_literally(store):
    assert tracking.quote("20261121-070102-ab12") == "'20261121-070102-ab12'"
    assert tracking.quote("a'b") == '"a\'b"'
    for bad in ("a'\"b", "a\\"):
        with pytest.raises(ValueError, match="cannot search"):
            tracking.quote(bad)
    t = tracking.tracker(store.uri)
    exp = t.experiment_id("spec")
    odd = t.start_sweep(exp, "it's", {}, {})
    plain = t.start_sweep(exp, "its", {}, {})
    assert t.find_sweep("it's").ref == odd
    assert t.find_sweep("its").ref == plain
    claim = t.claim(odd, 'k"1', {}, {})
    assert [r.info.run_id for r in t.configurations(odd)] == [claim.run_id]
    assert t.claim(odd, 'k"1', {}, {}).run_id != claim.run_id  # found and replaced
    assert t.configurations(plain) == []


def test_a_sweep_names_its_driver_and_beats(store, monkeypatch):
    t, ref = _sweep(store)
    record = t.find_sweep("s1")
    assert record.driver == tracking.driver_tag() == f"{socket.gethostname()}:{os.getpid()}"
    assert record.heartbeat == pytest.approx(time.time(), abs=60)
    assert record.alive
    with monkeypatch.context() as m:
        m.setattr(layout.time, "time", lambda: 1000.4)
        t.heartbeat(ref)
    assert t.find_sweep("s1").heartbeat == 1000
    t.heartbeat(ref)
    assert t.find_sweep("s1").heartbeat == pytest.approx(time.time(), abs=60)
    t.end_sweep(ref, "KILLED", {})
    assert not t.find_sweep("s1").alive  # ended: not running, whatever its driver


def test_list_sweeps_latest_first(store):
    t, first = _sweep(store)
    time.sleep(0.01)
    second = t.start_sweep(first.experiment_id, "s2", {}, {})
    assert [r.ref for r in t.list_sweeps(5)] == [second, first]
    assert [r.ref for r in t.list_sweeps(1)] == [second]


def test_a_driver_is_alive_while_its_process_exists_on_this_host():
    host = socket.gethostname()
    assert tracking.driver_alive(f"{host}:{os.getpid()}", None)
    ended = subprocess.Popen(["true"])
    ended.wait()
    assert not tracking.driver_alive(f"{host}:{ended.pid}", time.time())  # heartbeat ignored
    zombie = subprocess.Popen(["sleep", "30"])
    try:
        os.kill(zombie.pid, signal.SIGKILL)
        os.waitid(os.P_PID, zombie.pid, os.WEXITED | os.WNOWAIT)  # dead, not reaped yet
        assert not tracking.driver_alive(f"{host}:{zombie.pid}", None)
    finally:
        zombie.kill()
        zombie.wait()
    assert not tracking.driver_alive("", time.time())
    assert not tracking.driver_alive(f"{host}:nan", time.time())


def test_a_driver_elsewhere_is_alive_while_its_heartbeat_is_recent():
    now = 1_000_000.0
    elsewhere = "not-" + socket.gethostname() + ":1"
    assert tracking.driver_alive(elsewhere, now - 10, now)
    assert tracking.driver_alive(elsewhere, now - tracking.ALIVE_SECONDS + 1, now)
    assert not tracking.driver_alive(elsewhere, now - tracking.ALIVE_SECONDS - 1, now)
    assert not tracking.driver_alive(elsewhere, None, now)


@pytest.mark.parametrize(("uri", "folder"), [
    ("file:///srv/runs/artifacts/1/abc/artifacts", "/srv/runs/artifacts/1/abc/artifacts"),
    ("/srv/runs/artifacts", "/srv/runs/artifacts"),
    ("s3://bucket/runs", None),
    ("mlflow-artifacts:/1/abc/artifacts", None),
])
def test_an_artifact_uri_names_a_local_folder_only_for_a_path_or_file_uri(uri, folder):
    found = tracking.uri.local_folder(uri)
    assert found == (None if folder is None else Path(folder))


def test_texts_are_written_whole_into_the_run_s_folder_and_never_outside_it(tmp_path):
    layout.write_texts(tmp_path, {"metrics.csv": "step,loss\n1,0.5\n",
                                  "curves/stages.json": "[1, 2]"})
    assert (tmp_path / "metrics.csv").read_text() == "step,loss\n1,0.5\n"
    assert (tmp_path / "curves" / "stages.json").read_text() == "[1, 2]"
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "metrics.csv").stat().st_mode & 0o777 == 0o666 & ~umask  # as MLflow's
    layout.write_texts(tmp_path, {"metrics.csv": "step\n"})  # replaced, not appended
    assert (tmp_path / "metrics.csv").read_text() == "step\n"
    for bad in ("../escape.json", "/etc/escape.json", "a/../../escape.json"):
        with pytest.raises(ValueError, match="relative path"):
            layout.write_texts(tmp_path / "run", {bad: "x"})
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["curves", "metrics.csv",
                                                           "stages.json"]
