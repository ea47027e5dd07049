"""The Ray Tune runner end to end on an embedded Ray: what MLflow holds afterwards, packs,
retries and failures, Optuna cells, early stopping, threads per trial, loopback-only
listening, the driver's tags and a tracking URI's credentials kept out of sight; and Tune's
storage and staging settings."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import psutil
import pytest

from ortho_core.config import from_dict
from ortho_core.errors import ConfigError
from ortho_core.experiments import synthetic
from ortho_core.reporting import Outcome
from sweeps import runner, tracking
from sweeps.cli import main
from sweeps.runner import resume_command, resume_sweep, run_sweep
from sweeps.spec import load_spec, resolve, trial_key
from sweeps.status import format_line, from_mlflow
from sweeps.trial import resolve_device, trial_threads
from sweeps.tune_run import MAX_STAGED, staged_trials, storage_path
from tests.servers import free_port, listeners
from tests.sweeps import toy_experiment
from tests.sweeps.helpers import child_runs, new_home, store, toy_ray, write_spec

pytestmark = pytest.mark.usefixtures(toy_ray.__name__)


def _descendants(pid: int) -> set[int]:
    """``pid`` and every process below it."""
    return {pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))}


def test_embedded_ray_listens_on_loopback_only():
    """The TCP sockets this process and its Ray processes listen on: loopback only."""
    ours = [s for s in listeners(_descendants(os.getpid())) if s.protocol == "tcp"]
    assert len(ours) >= 3, ours  # GCS, raylet, workers...
    assert [s for s in ours if not s.loopback] == [], ours


@pytest.mark.smoke_sweep("synthetic-max-length")
def test_synthetic_smoke_end_to_end(smoke_home, smoke_sweeps, tmp_path):
    """The session's smoke sweep of ``synthetic-max-length`` (``ortho sweep run``, as every
    analysis test of a real sweep reads it: :mod:`tests.smoke`)."""
    spec = resolve(load_spec("synthetic-max-length"), "smoke")
    cells = spec.cells()
    t = store(smoke_home)
    record = t.find_sweep(spec="synthetic-max-length")
    sweep_id = record.ref.sweep_id
    first, *lines = smoke_sweeps.output_of("synthetic-max-length").splitlines()
    assert first.startswith(f"sweep {sweep_id}: synthetic-max-length/smoke, "
                            "8 configurations in 2 trials")
    last = next(line for line in lines if line.startswith(f"sweep {sweep_id} ") and
                " done, " in line and " finished in " in line)
    assert len(cells) == 8 and "synthetic-max-length/smoke: 8/8 done, best " in last
    parent = t.client.get_run(record.ref.parent_run_id)
    assert t.client.get_experiment(parent.info.experiment_id).name == "synthetic-max-length"
    assert parent.info.status == "FINISHED"
    tags = parent.data.tags
    assert tags[tracking.SWEEP_ID] == sweep_id
    assert tags[tracking.SPEC] == "synthetic-max-length"
    assert tags[tracking.PROFILE] == "smoke"
    assert tags[tracking.SPEC_SHA256] == spec.sha256
    assert len(tags[tracking.GIT_SHA]) == 40 or tags[tracking.GIT_SHA] == "unknown"
    resolved = Path(t.client.download_artifacts(parent.info.run_id, tracking.RESOLVED_ARTIFACT,
                                                str(tmp_path)))
    assert resolved.read_text() == spec.text

    runs = child_runs(smoke_home, sweep_id)
    by_key = {r.data.tags[tracking.TRIAL_KEY]: r for r in runs}
    assert len(runs) == len(by_key) == 8
    assert set(by_key) == {trial_key("synthetic", c.params) for c in cells}
    for cell in cells:
        run = by_key[trial_key("synthetic", cell.params)]
        assert run.data.tags[tracking.PARENT] == parent.info.run_id
        assert run.data.tags[tracking.OUTCOME] in {o.value for o in Outcome}
        assert run.data.tags[tracking.NODE_IP] == "127.0.0.1"
        config = from_dict(synthetic.Config, cell.params)
        budget = json.loads(run.data.tags[tracking.BUDGET])  # what a sweep's progress reads
        assert budget == {"steps": synthetic.planned_steps(config),
                          "ends_early": synthetic.ends_early(config)}
        for key in ("variant", "lr", "penalty", "hidden", "max_iters", "seed"):
            if key in cell.params:
                assert float(run.data.params[key]) == float(cell.params[key]) if key in (
                    "lr", "penalty") else run.data.params[key] == str(cell.params[key])
        summary = json.loads(run.data.tags[tracking.SUMMARY])
        assert run.data.metrics["max_seq_len_solved"] == summary["max_seq_len_solved"]
        history = t.client.get_metric_history(run.info.run_id, "val_error")
        steps = [m.step for m in history]
        assert len(steps) >= 4 and steps == sorted(steps)  # every 50 iterations, T = 10 (+20)
        assert steps[-1] <= budget["steps"]
        csv = Path(t.client.download_artifacts(run.info.run_id, tracking.METRICS_CSV,
                                               str(tmp_path / run.info.run_id))).read_text()
        header, *rows = csv.splitlines()
        assert header.startswith("step,") and "val_error" in header.split(",")
        assert [int(r.split(",")[0]) for r in rows] == steps
    assert {r.info.status for r in runs} == {"FINISHED"}
    best = max(json.loads(r.data.tags[tracking.SUMMARY])["max_seq_len_solved"] for r in runs)
    assert f"best max_seq_len_solved {best:g}," in last


def test_credentials_of_the_tracking_uri_are_never_shown_or_tracked(tmp_path, monkeypatch):
    """The header masks the password; no tag or param holds it. (The URI's tracker is the
    embedded store's, and no server is asked whether it answers, so that the sweep runs
    without a PostgreSQL server.)"""
    uri = "postgresql://ortho:hunter2@db.example:5432/mlflow"
    home = new_home(tmp_path)
    monkeypatch.setitem(tracking._TRACKERS, uri, store(home))
    monkeypatch.setattr(runner, "check_server", lambda uri: None)
    out = io.StringIO()
    final = run_sweep(str(write_spec(tmp_path, space={"x": [0.3]})), "smoke", home=home,
                      tracking_uri=uri, stream=out)
    assert final.done == 1
    assert out.getvalue().splitlines()[0] == (
        f"sweep {final.sweep_id}: toy/smoke, 1 configuration in 1 trial; "
        "tracking postgresql://ortho:***@db.example:5432/mlflow")
    assert "hunter2" not in out.getvalue()
    record = store(home).find_sweep(final.sweep_id)
    parent = store(home).client.get_run(record.ref.parent_run_id)
    for run in [parent, *child_runs(home, final.sweep_id)]:
        values = [*run.data.tags.values(), *run.data.params.values()]
        assert not any("hunter2" in v or "db.example" in v for v in values)
    assert parent.data.tags[tracking.DRIVER] == tracking.driver_tag()
    assert float(parent.data.tags[tracking.HEARTBEAT]) == pytest.approx(time.time(), abs=120)


def test_a_trial_whose_process_dies_is_recorded_failed_in_the_sweeps_counts(tmp_path):
    home = new_home(tmp_path)
    path = write_spec(tmp_path, fixed={"steps": 2}, space={},
                      groups=[{"fixed": {"x": 0.2, "die": True}}, {"fixed": {"x": 0.9}}])
    final = run_sweep(str(path), "smoke", home=home, stream=io.StringIO())
    assert (final.state, final.done, final.failed) == ("finished", 2, 1)
    runs = {float(r.data.params["x"]): r for r in child_runs(home, final.sweep_id)}
    assert (runs[0.2].info.status, runs[0.9].info.status) == ("FAILED", "FINISHED")
    assert runs[0.2].data.tags[tracking.OUTCOME] == "failed"


def test_a_raising_trial_is_retried_then_recorded_failed(tmp_path):
    counters = tmp_path / "counters"
    counters.mkdir()
    path = write_spec(
        tmp_path, fixed={"steps": 2, "counter_dir": str(counters)}, space={},
        groups=[{"fixed": {"x": 0.2, "fail": 1}},  # fails once, then succeeds on the retry
                {"fixed": {"x": 0.3, "fail": 9}},  # fails every attempt
                {"space": {"x": [0.8, 0.9]}}],
        max_failures=1)
    home = new_home(tmp_path)
    final = run_sweep(str(path), "smoke", home=home, stream=io.StringIO())
    assert (final.state, final.done, final.failed) == ("finished", 4, 1)
    runs = {float(r.data.params["x"]): r for r in child_runs(home, final.sweep_id)}
    assert sorted(runs) == [0.2, 0.3, 0.8, 0.9]  # one run per configuration
    assert runs[0.2].info.status == "FINISHED" and runs[0.2].data.tags[tracking.ATTEMPT] == "2"
    failed = runs[0.3]
    assert failed.info.status == "FAILED"
    assert failed.data.tags[tracking.OUTCOME] == "failed"
    trace = store(home).client.download_artifacts(failed.info.run_id, tracking.TRACEBACK,
                                                  str(tmp_path))
    assert "RuntimeError: toy failure of x=0.3" in Path(trace).read_text()
    for x, n in ((0.2, 2), (0.3, 2), (0.8, 1), (0.9, 1)):  # 1 + max_failures attempts at most
        cfg = toy_experiment.Config(x=x, counter_dir=str(counters))
        assert toy_experiment.attempts(cfg) == n
    assert runs[0.9].data.tags[tracking.OUTCOME] == "solved"
    assert runs[0.8].data.metrics["score"] == pytest.approx(8.0)
    # exit status 1 says "resume retries them": a resume without an id, every sweep having
    # finished, takes the latest and trains its failed configuration alone, once more
    out = io.StringIO()
    again = resume_sweep(home=home, stream=out)
    assert (again.sweep_id, again.done, again.failed) == (final.sweep_id, 4, 1)
    assert "3 of 4 configurations done, 1 to run" in out.getvalue()
    for x, n in ((0.2, 2), (0.3, 4), (0.8, 1), (0.9, 1)):
        assert toy_experiment.attempts(toy_experiment.Config(x=x, counter_dir=str(counters))) == n
    assert len(child_runs(home, final.sweep_id)) == 4


def test_a_trainer_calling_sys_exit_fails_its_runs_with_its_traceback_and_is_retried(tmp_path):
    """``SystemExit(0)`` from a trainer (not from the scheduler, inside ``tune.report``):
    the trial fails its runs with the trainer's traceback and raises ``TrainerExit``, and
    Tune retries it. Before, the runs were left RUNNING and ended as lost, the trainer's
    traceback replaced by the message that the trial's actor or node died."""
    counters = tmp_path / "counters"
    counters.mkdir()
    path = write_spec(tmp_path, fixed={"steps": 2, "counter_dir": str(counters)}, space={},
                      groups=[{"fixed": {"x": 0.2, "exit": True}}], max_failures=1)
    home = new_home(tmp_path)
    out = io.StringIO()
    final = run_sweep(str(path), "smoke", home=home, stream=out)
    assert (final.state, final.done, final.failed) == ("finished", 1, 1)
    assert ("failed: sweeps.trial.TrainerExit: the trainer of tests.sweeps.toy_experiment raised "
            "SystemExit(0) (1 configuration(s)") in out.getvalue()
    runs = {float(r.data.params["x"]): r for r in child_runs(home, final.sweep_id)}
    failed = runs[0.2]
    assert (failed.info.status, failed.data.tags[tracking.OUTCOME]) == ("FAILED", "failed")
    assert tracking.STOPPED_EARLY not in failed.data.tags
    trace = store(home).client.download_artifacts(failed.info.run_id, tracking.TRACEBACK,
                                                  str(tmp_path))
    assert "in train\n    raise SystemExit(0)\nSystemExit: 0" in Path(trace).read_text()
    assert toy_experiment.attempts(toy_experiment.Config(x=0.2, counter_dir=str(counters))) == 2


def test_a_ray_client_address_is_refused_with_a_local_store_optuna_cells_or_a_scheduler(
        tmp_path, capsys):
    """Through Ray Client, Tune runs on the cluster from pickled copies of the searcher,
    which keep no study (an Optuna sweep there would train no Optuna point), and of the
    progress callback, which alone learns which trials a scheduler stopped."""
    grid = resolve(load_spec(str(write_spec(tmp_path))), "smoke")
    optuna = resolve(load_spec(str(write_spec(
        tmp_path, name="searched", space={"x": {"low": 0.0, "high": 1.0}},
        search={"kind": "optuna", "sampler": "random", "n_trials": 2, "seed": 0}))), "smoke")
    asha = resolve(load_spec(str(write_spec(
        tmp_path, name="stopped", scheduler={"kind": "asha", "metric_step": "loss",
                                             "mode": "min"}))), "smoke")
    server, client = "http://127.0.0.1:5000", "ray://head:10001"
    runner.refuse_ray_client(client, server, grid)
    runner.refuse_ray_client("head:6379", server, optuna)
    runner.refuse_ray_client("head:6379", server, asha)
    runner.refuse_ray_client(None, "sqlite:////tmp/mlflow.db", optuna)
    for uri, spec, says in (("sqlite:////tmp/mlflow.db", grid, "--tracking-uri of a tracking"),
                            (server, optuna, "for a sweep with Optuna cells"),
                            (server, asha, "for a sweep with a scheduler")):
        with pytest.raises(ConfigError, match=says) as err:
            runner.refuse_ray_client(client, uri, spec)
        assert err.value.field == "address"
    status = main(["sweep", "run", optuna.source, "--profile", "smoke", "--address",
                   "ray://127.0.0.1:1", "--tracking-uri", f"http://127.0.0.1:{free_port()}",
                   "--optuna-storage", f"sqlite:///{tmp_path}/optuna.db",
                   "--home", str(tmp_path / "home")])
    err_lines = capsys.readouterr().err.splitlines()
    assert status == 2 and len(err_lines) == 1
    assert err_lines[0].startswith("ortho sweep run: invalid address: expected a cluster address")
    assert not (tmp_path / "home").exists() and not (tmp_path / "optuna.db").exists()


def test_the_resume_command_names_what_is_not_the_default(tmp_path, monkeypatch):
    """The command printed after an interrupt or a failure finds the sweep again: it names
    the home, the store, the cluster and the Optuna storage that are not the defaults
    (credentials masked), and nothing that is; a store other than the home's embedded one is
    named even where the environment gave it."""
    tmp_path = tmp_path.resolve()
    monkeypatch.chdir(tmp_path)
    for name in ("ORTHO_HOME", "ORTHO_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    base = ["ortho", "sweep", "resume", "ID"]
    default, other = tmp_path / "ortho-runs", tmp_path / "elsewhere"
    assert resume_command("ID", default, f"sqlite:///{default}/mlflow.db", None, None) == base
    assert resume_command("ID", other, f"sqlite:///{other}/mlflow.db", None, None) == [
        *base, "--home", str(other)]
    assert resume_command("ID", default, "postgresql://u:pw@db/runs", "ray://head:10001",
                          "postgresql://u:pw@db/studies") == [
        *base, "--tracking-uri", "postgresql://u:***@db/runs", "--address", "ray://head:10001",
        "--optuna-storage", "postgresql://u:***@db/studies"]
    assert resume_command("ID", default, f"sqlite:///{default}/mlflow.db", "auto", None,
                          "/mnt/data") == [*base, "--address", "auto", "--data-dir", "/mnt/data"]
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("ORTHO_HOME", str(tmp_path / "file"))  # no default home: named
    assert resume_command("ID", other, f"sqlite:///{other}/mlflow.db", None, None) == [
        *base, "--home", str(other)]
    monkeypatch.setenv("ORTHO_HOME", str(other))  # named again by the environment
    monkeypatch.setenv("ORTHO_TRACKING_URI", "http://127.0.0.1:5000")
    # a store from the environment is named all the same: a submitted sweep's job prints the
    # command from an environment that is not the user's
    assert resume_command("ID", other, "http://127.0.0.1:5000", None, None) == [
        *base, "--tracking-uri", "http://127.0.0.1:5000"]
    # ... but not one with a password, whose masked form would not open the store
    monkeypatch.setenv("ORTHO_TRACKING_URI", "postgresql://u:pw@db/runs")
    assert resume_command("ID", other, "postgresql://u:pw@db/runs", None, None) == base


def test_packed_toy_sweep_trains_each_configuration_once(tmp_path):
    counters = tmp_path / "counters"
    counters.mkdir()
    path = write_spec(tmp_path, fixed={"steps": 2, "counter_dir": str(counters)},
                      repeats=2, pack_size=3)
    home = new_home(tmp_path)
    out = io.StringIO()
    final = run_sweep(str(path), "smoke", home=home, stream=out)
    # packs of 3, 3 and 2 would leave one of the embedded Ray's 2 CPUs idle in a second
    # round: four packs of 2 fill both
    assert "8 configurations in 4 trials" in out.getvalue()
    assert (final.done, final.failed, final.best) == (8, 0, 9.0)
    runs = child_runs(home, final.sweep_id)
    assert sorted((float(r.data.params["x"]), int(r.data.params["seed"])) for r in runs) == \
        sorted((x, s) for x in (0.1, 0.4, 0.7, 0.9) for s in (0, 1))
    assert sorted(p.read_text().count("\n") for p in counters.iterdir()) == [1] * 8


def test_optuna_searches_within_each_grid_cell(tmp_path):
    path = write_spec(tmp_path, fixed={}, space={"steps": [1, 2], "x": {"low": 0, "high": 1}},
                      search={"kind": "optuna", "sampler": "random", "n_trials": 3, "seed": 1})
    home = new_home(tmp_path)
    final = run_sweep(str(path), "smoke", home=home, stream=io.StringIO())
    runs = child_runs(home, final.sweep_id)
    assert final.done == len(runs) == 6
    by_cell: dict[str, list[float]] = {}
    for r in runs:
        chosen = json.loads(r.data.tags[tracking.OPTUNA_PARAMS])
        assert float(r.data.params["x"]) == chosen["x"] and 0 <= chosen["x"] <= 1
        by_cell.setdefault(r.data.tags[tracking.CELL], []).append(chosen["x"])
    assert sorted(map(len, by_cell.values())) == [3, 3]
    assert final.best == pytest.approx(10 * max(x for xs in by_cell.values() for x in xs))


def test_an_optuna_point_that_repeats_a_grid_configuration_counts_as_done_untrained(
        tmp_path):
    """Group 0 trains x = 0.25, which group 1's grid sampler proposes too: 3 points of the
    sweep's total, 2 runs, and the line, the status and the parent run say why."""
    path = write_spec(tmp_path, fixed={"steps": 1}, space={},
                      groups=[{"space": {"x": [0.25]}},
                              {"space": {"x": {"choice": [0.25, 0.5]}}}],
                      search={"kind": "optuna", "sampler": "grid", "n_trials": 2, "seed": 0})
    home = new_home(tmp_path)
    out = io.StringIO()
    final = run_sweep(str(path), "smoke", home=home, stream=out)
    assert (final.total, final.done, final.repeats) == (3, 2, 1)
    assert len(child_runs(home, final.sweep_id)) == 2
    done = "3/3 done (1 repeated point not trained), "
    assert out.getvalue().splitlines()[-1].startswith(f"sweep {final.sweep_id} toy/smoke: {done}")
    record = store(home).find_sweep(final.sweep_id)
    shown = format_line(from_mlflow(store(home), record))
    assert record.repeats == 1 and f": {done}best score 5, finished in " in shown


@pytest.mark.parametrize("metric", ["score", "loss"])
def test_asha_stops_unpromising_trials_early(tmp_path, metric):
    """Also where the spec ranks by the summary of the key the scheduler reads (``loss``):
    each step's value reached the scheduler as NaN there, so it stopped nothing."""
    path = write_spec(tmp_path, fixed={"steps": 16}, space={"x": [0.1, 0.2, 0.4, 0.6, 0.8]},
                      metric={"name": metric, "mode": "max" if metric == "score" else "min"},
                      scheduler={"kind": "asha", "metric_step": "loss", "mode": "min",
                                 "grace_period": 2, "reduction_factor": 2})
    home = new_home(tmp_path)
    final = run_sweep(str(path), "smoke", home=home, max_concurrent=1, stream=io.StringIO())
    runs = child_runs(home, final.sweep_id)
    assert final.done == len(runs) == 5
    assert all(r.info.status == "FINISHED" for r in runs)
    stopped = [r for r in runs if r.data.tags.get(tracking.STOPPED_EARLY) == "true"]
    assert stopped, "ASHA stopped no trial"
    for r in stopped:
        assert r.data.tags[tracking.OUTCOME] == "unsolved"
        assert len(store(home).client.get_metric_history(r.info.run_id, "loss")) < 16
    best = min(runs, key=lambda r: float(r.data.params["x"]))
    assert best.data.tags.get(tracking.STOPPED_EARLY) is None  # the lowest loss ran to the end


def test_auto_device_follows_the_trials_gpus():
    assert resolve_device({"device": "auto", "lr": 1})["device"] == "cpu"  # no GPU granted
    assert resolve_device({"device": "cuda:1"}) == {"device": "cuda:1"}


@pytest.mark.parametrize(("cpu", "threads"), [(2, 2), (0.5, 1)])
def test_a_trial_computes_with_the_threads_of_its_cpus(tmp_path, cpu, threads):
    """Torch's threads are the trial's CPUs, rounded down to at least one, not the
    ``OMP_NUM_THREADS`` (3) Ray's processes inherit."""
    path = write_spec(tmp_path, space={"x": [0.3]}, resources={"cpu": cpu})
    home = new_home(tmp_path)
    final = run_sweep(str(path), "smoke", home=home, stream=io.StringIO())
    [run] = child_runs(home, final.sweep_id)
    assert json.loads(run.data.tags[tracking.SUMMARY])["threads"] == threads


def test_trial_threads_round_down_to_at_least_one():
    assert [trial_threads(c) for c in (0.25, 1, 1.5, 2, 7.9)] == [1, 1, 1, 2, 7]


def test_storage_uris_pass_unchanged_and_paths_become_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    home = tmp_path / "ortho-runs"
    assert storage_path(None, home) == str(home / "ray")
    for uri in ("s3://bucket/ray", "gs://bucket/a/b", "s3://bucket/ray?region=us-west-2",
                "file:///mnt/shared/ray"):
        assert storage_path(uri, home) == uri
    assert storage_path("shared/ray", home) == str(tmp_path / "shared" / "ray")
    assert storage_path("~/ray", home) == str(tmp_path / "me" / "ray")
    assert storage_path("/mnt/efs/ray", home) == "/mnt/efs/ray"


@pytest.mark.parametrize(("max_concurrent", "staged"), [(None, 3), (2, 2)])
def test_tune_stages_every_trial_at_once(tmp_path, monkeypatch, max_concurrent, staged):
    """What Tune reads when it starts: every trial, not its default of one for a searcher
    of our own (so that a cluster starts the trials' actors together, on several nodes)."""
    from ray.tune.execution import tune_controller

    read: list[int] = []
    tune_default = tune_controller._get_max_pending_trials

    def spy(search_alg):
        read.append(tune_default(search_alg))
        return read[-1]

    monkeypatch.setattr(tune_controller, "_get_max_pending_trials", spy)
    monkeypatch.delenv("TUNE_MAX_PENDING_TRIALS_PG", raising=False)
    path = write_spec(tmp_path, fixed={"steps": 1}, space={"x": [0.1, 0.4, 0.7]})
    final = run_sweep(str(path), "smoke", home=new_home(tmp_path),
                      max_concurrent=max_concurrent, stream=io.StringIO())
    assert final.done == 3
    assert read and set(read) == {staged}
    assert "TUNE_MAX_PENDING_TRIALS_PG" not in os.environ  # only while the sweep ran


def test_every_trial_is_staged_up_to_max_concurrent():
    assert staged_trials(7, None) == 7
    assert staged_trials(7, 3) == 3
    assert staged_trials(7, 20) == 7
    assert staged_trials(0, None) == 1
    assert staged_trials(10 * MAX_STAGED, None) == MAX_STAGED
