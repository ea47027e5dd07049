"""Interrupt a sweep (Ctrl-C, or SIGKILL of its driver and every process of it), resume it,
and check that MLflow holds one run per configuration and that finished configurations were
not trained again; a sweep whose driver is alive is resumed only when forced. The tests of
what an interrupt leaves in the store and how a resume mends it run against every kind of
store (``store`` of ``tests/conftest.py``, named to the driver and to this process by
``$ORTHO_TRACKING_URI``); those pinned to ``sqlite`` check the runner's decisions, which
read and write the store through the same calls the others prove on the server."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from ortho_core.errors import ConfigError
from sweeps import contract, tracking
from sweeps.lookup import sweep_status
from sweeps.runner import resume_sweep, run_sweep
from sweeps.status import format_line, from_mlflow, rate
from sweeps.testing import track
from tests.conftest import Store
from tests.servers import free_port
from tests.sweeps import toy_experiment
from tests.sweeps.helpers import TOY_MODULE, child_runs, new_home, toy_ray, write_spec
from tests.sweeps.helpers import store as tracker_of

pytestmark = pytest.mark.usefixtures(toy_ray.__name__, "tracked")


@pytest.fixture
def tracked(store: Store, monkeypatch: pytest.MonkeyPatch) -> Store:
    """Every sweep of the test tracked into ``store`` (also by the drivers it starts)."""
    monkeypatch.setenv("ORTHO_TRACKING_URI", store.uri)
    return store

ROOT = Path(__file__).resolve().parents[2]
XS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
FAILING = 0.05
"""Fails at its first attempt (``max_failures: 0``): a resume trains it again."""


def _ortho(args: list[str], home: Path, output: int = subprocess.PIPE) -> subprocess.Popen[str]:
    """``ortho ARGS`` in a subprocess that knows the toy experiment, in a process group of
    its own (with the embedded Ray it starts), writing to ``output``."""
    code = ("import sys; from ortho_core import experiments; "
            f"experiments.EXPERIMENTS['toy'] = {TOY_MODULE!r}; "
            "from sweeps.cli import main; sys.exit(main(sys.argv[1:]))")
    env = {**os.environ, "ORTHO_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT, env=env, text=True,
                            stdout=output, stderr=subprocess.STDOUT, start_new_session=True)


def _one_trial_at_a_time(spec: Path, home: Path, drivers: list) -> tuple[subprocess.Popen[str],
                                                                        Path]:
    """``ortho sweep run SPEC`` with one trial at a time, its output in ``driver.log`` beside
    ``home``; the driver and that log (the driver is recorded in ``drivers``)."""
    log = home.parent / "driver.log"
    with log.open("w") as output:
        proc = _ortho(["sweep", "run", str(spec), "--profile", "smoke", "--max-concurrent",
                       "1"], home, output)
    drivers.append((proc, home))
    return proc, log


def _statuses(home: Path) -> list[str]:
    """The statuses of the latest sweep's configuration runs."""
    record = tracker_of(home).find_sweep()
    if record is None:
        return []
    return [r.info.status for r in tracker_of(home).configurations(record.ref)]


def _finished(home: Path) -> int:
    return _statuses(home).count("FINISHED")


def _left_behind(group: int, home: Path) -> list[int]:
    """Live processes of process group ``group`` or whose environment names ``home`` (every
    process the driver started, Ray's included, inherited ``ORTHO_HOME``)."""
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            mine = (os.getpgid(proc.pid) == group
                    or proc.environ().get("ORTHO_HOME") == str(home))
            if mine and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
        except (psutil.Error, ProcessLookupError):
            continue  # ended meanwhile, or not ours to read
    return found


def _kill_all(group: int, home: Path, timeout: float = 60.0) -> None:
    """SIGKILL process group ``group`` and every process left from it until none is left."""
    deadline = time.monotonic() + timeout
    while pids := _left_behind(group, home):
        assert time.monotonic() < deadline, f"processes left behind: {pids}"
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)


def _stop_when(home: Path, drivers: list, spec: Path, signum: int,
               ready: Callable[[], bool], group: bool = False
               ) -> tuple[tracking.SweepRecord, str]:
    """Run ``spec``'s smoke sweep, send its driver (``group``: its whole process group)
    ``signum`` once ``ready()``, and check that it stopped as interrupted (exit status 130,
    the sweep KILLED, the resume command printed); the sweep's record and the driver's
    output."""
    proc = _ortho(["sweep", "run", str(spec), "--profile", "smoke"], home)
    drivers.append((proc, home))
    deadline = time.monotonic() + 240
    while not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    if group:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    record = tracker_of(home).find_sweep()
    assert record.status == "KILLED"
    assert f"resume with: ortho sweep resume {record.ref.sweep_id}" in out
    return record, out


@pytest.fixture
def drivers() -> Iterator[list[tuple[subprocess.Popen[str], Path]]]:
    """(driver, its home) of the drivers a test starts: each is killed with all it started
    when the test ends, whatever happened."""
    started: list[tuple[subprocess.Popen[str], Path]] = []
    yield started
    for proc, home in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        _kill_all(proc.pid, home)


@pytest.mark.slow
@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_interrupt_then_resume_runs_each_configuration_once(tmp_path, drivers):
    """(The embedded store only: the killed driver's test below leaves and resumes a sweep in
    each kind of store, with runs left RUNNING, which is harder than the KILLED runs a
    Ctrl-C leaves.) Ctrl-C after 2 configurations ended: the sweep and its runs in flight end
    KILLED, exit status 130; a resume trains what did not finish, and retries the failed
    configuration, once each, keeping what finished."""
    counters = tmp_path / "counters"
    counters.mkdir()
    spec = write_spec(tmp_path, fixed={"steps": 3, "sleep": 0.3, "counter_dir": str(counters)},
                      space={}, groups=[{"fixed": {"x": FAILING, "fail": 1}},
                                        {"space": {"x": XS}}])
    home = new_home(tmp_path)
    # The failing configuration is the first planned, yet on a loaded machine two others can
    # finish before its failure is recorded: wait for that too.
    record, out = _stop_when(home, drivers, spec, signal.SIGINT,
                             lambda: _finished(home) >= 2 and "FAILED" in _statuses(home))
    before = {float(r.data.params["x"]): r for r in child_runs(home, record.ref.sweep_id)}
    assert before[FAILING].info.status == "FAILED"
    finished_before = {x: r.info.run_id for x, r in before.items()
                       if r.info.status == "FINISHED"}
    assert 2 <= len(finished_before) < len(XS), out
    assert all(r.info.status in ("FINISHED", "FAILED", "KILLED") for r in before.values())
    metrics = tracker_of(home).client.get_run(record.ref.parent_run_id).data.metrics
    assert record.per_hour == pytest.approx(
        len(finished_before) / metrics[contract.RUN_SECONDS] * 3600)

    def trained(x: float) -> int:
        return toy_experiment.attempts(toy_experiment.Config(x=x, counter_dir=str(counters)))

    trained_before = {x: trained(x) for x in [FAILING, *XS]}
    out = io.StringIO()
    begun = time.monotonic()
    final = resume_sweep(home=home, stream=out)  # the latest interrupted sweep
    wall = time.monotonic() - begun
    assert (f"{len(finished_before)} of {len(XS) + 1} configurations done, "
            f"{len(XS) + 1 - len(finished_before)} to run") in out.getvalue()
    assert (final.sweep_id, final.state, final.done, final.failed) == (
        record.ref.sweep_id, "finished", len(XS) + 1, 0)
    # the resume's rate counts what it finished itself, over its own wall time
    assert final.elapsed <= wall
    assert final.per_hour == pytest.approx(
        (len(XS) + 1 - len(finished_before)) / final.elapsed * 3600)
    assert out.getvalue().splitlines()[-1].endswith(f"{rate(final.per_hour)}")
    assert tracker_of(home).find_sweep(record.ref.sweep_id).per_hour == pytest.approx(
        final.per_hour)
    after = child_runs(home, record.ref.sweep_id)
    assert sorted(float(r.data.params["x"]) for r in after) == [FAILING, *XS]  # one run each
    assert all(r.info.status == "FINISHED" for r in after)
    for r in after:
        x = float(r.data.params["x"])
        if x in finished_before:  # kept, and not trained again
            assert r.info.run_id == finished_before[x]
            assert trained(x) == trained_before[x] == 1
        else:  # failed, killed or never started: trained once by the resume
            assert trained(x) == trained_before[x] + 1
    assert trained(FAILING) == 2  # failed once, then retried
    assert tracker_of(home).find_sweep(record.ref.sweep_id).status == "FINISHED"
    assert tracker_of(home).find_sweep(unfinished=True) is None


@pytest.mark.slow
@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_sigterm_stops_a_sweep_as_a_ctrl_c_does(tmp_path, drivers):
    """``kill``, ``docker stop``, the end of a pod, here sent to the driver's whole process
    group as ``timeout`` and a batch scheduler's job step send it: SIGTERM ends the runs in
    flight KILLED and the sweep interrupted, exit status 130. (Ray's own handler exited on
    the spot, leaving them RUNNING and the sweep taken for running; and the local Ray node,
    started in the driver's group, died under it: exit status 1 after 60 s.)"""
    spec = write_spec(tmp_path, fixed={"steps": 40, "sleep": 0.5}, space={"x": XS})
    home = new_home(tmp_path)
    _stop_when(home, drivers, spec, signal.SIGTERM, lambda: "RUNNING" in _statuses(home),
               group=True)
    statuses = _statuses(home)
    assert "KILLED" in statuses and "RUNNING" not in statuses, statuses


SLOW = [0.3, 0.4]
"""Configurations still training when the driver is killed (a pack of 3 steps of 1 s, which
runs once the pack of 0.1 and 0.2, of 2 steps, has ended: ``steps`` is one of the toy's
``PACK_FIELDS``, so the two groups never share a pack)."""


def _training_began(home: Path, counters: Path) -> bool:
    """Whether every configuration whose run is RUNNING with its params has started its
    trainer (its attempt counted): a run is claimed, params and all, a moment before."""
    record = tracker_of(home).find_sweep()
    running = [float(r.data.params["x"]) for r in child_runs(home, record.ref.sweep_id)
               if r.info.status == "RUNNING" and "x" in r.data.params]
    return bool(running) and all(
        toy_experiment.attempts(toy_experiment.Config(x=x, counter_dir=str(counters))) >= 1
        for x in running)


@pytest.mark.slow
def test_a_killed_driver_leaves_a_sweep_that_resumes(tmp_path, drivers):
    """SIGKILL of the driver and its Ray (its process group) after 2 configurations ended
    leaves the sweep and the runs in flight RUNNING in MLflow; ``status`` calls it
    interrupted, and a resume trains what did not finish, once, keeping what did."""
    counters = tmp_path / "counters"
    counters.mkdir()
    spec = write_spec(tmp_path, fixed={"counter_dir": str(counters)}, space={},
                      groups=[{"fixed": {"steps": 2}, "space": {"x": [0.1, 0.2]}},
                              {"fixed": {"steps": 3, "sleep": 1.0}, "space": {"x": SLOW}}],
                      pack_size=2)
    home = new_home(tmp_path)
    proc, log = _one_trial_at_a_time(spec, home, drivers)
    deadline = time.monotonic() + 240
    while (_statuses(home).count("FINISHED") < 2
           or not _training_began(home, counters)):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    _kill_all(proc.pid, home)
    lines = log.read_text().splitlines()
    assert lines and all(line.startswith("sweep ") for line in lines), lines  # ours only

    record = tracker_of(home).find_sweep()
    assert record.status == "RUNNING" and not record.alive
    runs_before = child_runs(home, record.ref.sweep_id)
    # A run killed between its creation and its params (mid-claim) has none: not begun.
    before = {float(r.data.params["x"]): r for r in runs_before if "x" in r.data.params}
    finished_before = {x: r.info.run_id for x, r in before.items()
                       if r.info.status == "FINISHED"}
    assert len(finished_before) >= 2 and "RUNNING" in {r.info.status for r in runs_before}
    status = sweep_status(home=home)
    assert (status.state, status.running, status.done) == ("interrupted", 0,
                                                           len(finished_before))

    final = resume_sweep(home=home, stream=io.StringIO())  # the latest, now interrupted
    assert (final.sweep_id, final.state, final.done, final.failed) == (
        record.ref.sweep_id, "finished", 4, 0)
    after = child_runs(home, record.ref.sweep_id)
    assert sorted(float(r.data.params["x"]) for r in after) == [0.1, 0.2, *SLOW]  # one each
    assert all(r.info.status == "FINISHED" for r in after)
    for r in after:
        x = float(r.data.params["x"])
        trained = toy_experiment.attempts(toy_experiment.Config(x=x, counter_dir=str(counters)))
        if x in finished_before:  # kept, and not trained again
            assert (r.info.run_id, trained) == (finished_before[x], 1)
        else:
            assert trained == 1 + (x in before)  # again from its beginning if it had begun
    for run in runs_before:
        if run.info.status != "FINISHED":  # the runs in flight are gone
            stage = tracker_of(home).client.get_run(run.info.run_id).info.lifecycle_stage
            assert stage == "deleted"
    assert tracker_of(home).find_sweep(record.ref.sweep_id).status == "FINISHED"


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_resumed_optuna_sweep_continues_its_studies(tmp_path):
    """Cell 0's pack of 2 trains, cell 1's fails at its first attempt: a resume loads the
    same studies, trains cell 1's two points again (the same points: each configuration ends
    with one run) and cell 0's not at all; every member is a COMPLETE trial in the end. (The
    embedded store only: a resume on a server is the killed driver's test's, and studies in
    PostgreSQL beside a server's runs are ``test_studies``'s.)"""
    import optuna

    from sweeps.studies import storage_url

    counters = tmp_path / "counters"
    counters.mkdir()
    spec = write_spec(tmp_path, fixed={"counter_dir": str(counters)},
                      space={"x": {"low": 0.0, "high": 1.0}}, pack_size=2,
                      groups=[{"fixed": {"steps": 1}}, {"fixed": {"steps": 2, "fail": 1}}],
                      search={"kind": "optuna", "sampler": "random", "n_trials": 2, "seed": 0})
    home = new_home(tmp_path)
    first = run_sweep(str(spec), "smoke", home=home, stream=io.StringIO())
    assert first.failed == 2
    before = {r.data.tags[tracking.TRIAL_KEY]: r for r in child_runs(home, first.sweep_id)}
    assert sorted(r.info.status for r in before.values()) == ["FAILED", "FAILED", "FINISHED",
                                                              "FINISHED"]

    final = resume_sweep(first.sweep_id, home=home, stream=io.StringIO())
    assert (final.state, final.done, final.failed) == ("finished", 4, 0)
    after = child_runs(home, first.sweep_id)
    assert sorted(r.data.tags[tracking.TRIAL_KEY] for r in after) == sorted(before)
    for r in after:
        cfg = toy_experiment.Config(x=float(r.data.params["x"]), counter_dir=str(counters))
        if r.data.tags[tracking.CELL] == "0":  # kept, not trained again
            assert r.info.run_id == before[r.data.tags[tracking.TRIAL_KEY]].info.run_id
            assert toy_experiment.attempts(cfg) == 1
        else:
            assert toy_experiment.attempts(cfg) == 2
    url = storage_url(None, tracking.tracking_uri(None, home))
    states = optuna.trial.TrialState
    for cell, expected in ((0, [states.COMPLETE] * 2),
                           (1, [states.FAIL] * 2 + [states.COMPLETE] * 2)):
        study = optuna.load_study(study_name=f"{first.sweep_id}/cell-{cell}", storage=url)
        assert [t.state for t in study.trials] == expected
    assert [t.params for t in study.trials[2:]] == [t.params for t in study.trials[:2]]


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_sweep_whose_driver_is_alive_is_resumed_only_when_forced(tmp_path):
    home = new_home(tmp_path)
    first = run_sweep(str(write_spec(tmp_path, space={"x": [0.2, 0.9]})), "smoke", home=home,
                      stream=io.StringIO())
    t = tracker_of(home)
    ref = t.find_sweep(first.sweep_id).ref
    t.reopen_sweep(ref, 2)  # RUNNING again, driven by this live process
    kept = track(t, ref, "in-flight", {}, end="running")  # as a trial this driver runs
    with pytest.raises(ConfigError, match="--force") as err:
        resume_sweep(first.sweep_id, home=home, stream=io.StringIO())
    assert err.value.field == "sweep"
    assert t.client.get_run(kept).info.lifecycle_stage == "active"
    with pytest.raises(ConfigError) as err:  # refused, or nothing answers there
        resume_sweep(first.sweep_id, home=home, force=True, address="ray://127.0.0.1:1",
                     stream=io.StringIO())
    assert err.value.field == "address"
    assert t.client.get_run(kept).info.lifecycle_stage == "active"  # before any discard
    final = resume_sweep(first.sweep_id, home=home, force=True, stream=io.StringIO())
    assert (final.state, final.done) == ("finished", 2)
    assert t.client.get_run(kept).info.lifecycle_stage == "deleted"
    assert t.find_sweep(first.sweep_id).driver == tracking.driver_tag()
    at, done = t.find_sweep(first.sweep_id).resumed
    assert done == 2 and time.time() - 60 < at <= time.time()  # both had finished before


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_resume_that_finishes_nothing_records_its_own_rate_of_zero(tmp_path):
    """Every configuration had finished when the sweep was interrupted: the resume trains
    nothing, and the rate the status shows is its own, 0, not the earlier run's."""
    home = new_home(tmp_path)
    first = run_sweep(str(write_spec(tmp_path, space={"x": [0.2, 0.9]})), "smoke", home=home,
                      stream=io.StringIO())
    t = tracker_of(home)
    ref = t.find_sweep(first.sweep_id).ref
    t.end_sweep(ref, "KILLED", {contract.CONFIGS_PER_HOUR: 40.0, contract.RUN_SECONDS: 180.0})
    final = resume_sweep(first.sweep_id, home=home, stream=io.StringIO())
    assert (final.state, final.done, final.per_hour) == ("finished", 2, 0.0)
    shown = from_mlflow(t, t.find_sweep(first.sweep_id))
    assert shown.per_hour == 0.0 and shown.run_seconds == pytest.approx(final.elapsed)
    assert format_line(shown).endswith(" 0 configurations/h")


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_finished_sweep_is_left_as_it_finished(tmp_path):
    """Resuming a sweep that finished with every configuration done starts nothing and
    changes nothing MLflow holds: its parent run keeps the end time and rate of the run that
    finished it. It needs no cluster, so a cluster's address where nothing answers is not
    checked."""
    home = new_home(tmp_path)
    first = run_sweep(str(write_spec(tmp_path, space={"x": [0.2, 0.9]})), "smoke", home=home,
                      stream=io.StringIO())
    t = tracker_of(home)
    ref = t.find_sweep(first.sweep_id).ref
    before = t.client.get_run(ref.parent_run_id)
    out = io.StringIO()
    final = resume_sweep(first.sweep_id, home=home, stream=out,
                         address=f"127.0.0.1:{free_port()}")
    assert "has finished, 2 configurations done; nothing to resume" in out.getvalue()
    assert (final.state, final.done, final.failed) == ("finished", 2, 0)
    assert final.per_hour == pytest.approx(before.data.metrics[contract.CONFIGS_PER_HOUR])
    after = t.client.get_run(ref.parent_run_id)
    assert (after.info.status, after.info.end_time, after.data.metrics) == (
        before.info.status, before.info.end_time, before.data.metrics)
    assert len(t.configurations(ref)) == 2


def test_resume_without_a_sweep_says_so(tmp_path):
    from sweeps.lookup import SweepNotFound

    with pytest.raises(SweepNotFound, match=r"^no sweep in (sqlite|http)://"):
        resume_sweep(home=new_home(tmp_path), stream=io.StringIO())


@pytest.mark.slow
@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_killed_driver_of_an_optuna_sweep_in_packs_resumes_its_study(tmp_path, drivers):
    """(The embedded store only: what a SIGKILL leaves in each kind of store is
    :func:`test_a_killed_driver_leaves_a_sweep_that_resumes`'s.) SIGKILL of the driver of an
    Optuna sweep in packs of 2 (one pack at a time) once the first pack has finished and the
    second is training: a resume continues the same study (its finished trials kept as they
    were, those in flight failed), asks the points in flight again and trains them once
    more, does not train the finished ones again, and ends with one FINISHED run per
    configuration, each a COMPLETE trial of the study."""
    import optuna

    from sweeps.studies import KEY_ATTR, storage_url

    counters = tmp_path / "counters"
    counters.mkdir()
    spec = write_spec(tmp_path, fixed={"steps": 3, "sleep": 1.0, "counter_dir": str(counters)},
                      space={"x": {"low": 0.0, "high": 1.0}}, pack_size=2,
                      search={"kind": "optuna", "sampler": "random", "n_trials": 4, "seed": 0})
    home = new_home(tmp_path)
    proc, log = _one_trial_at_a_time(spec, home, drivers)
    deadline = time.monotonic() + 240
    # The second pack has begun training (its counters written) after the first finished.
    while len(list(counters.iterdir())) < 4 or _finished(home) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    _kill_all(proc.pid, home)

    record = tracker_of(home).find_sweep()
    finished_before = {r.data.tags[tracking.TRIAL_KEY]: r.info.run_id
                       for r in child_runs(home, record.ref.sweep_id)
                       if r.info.status == "FINISHED"}
    url = storage_url(None, tracking.tracking_uri(None, home))
    name = f"{record.ref.sweep_id}/cell-0"
    states = optuna.trial.TrialState
    before = optuna.load_study(study_name=name, storage=url).trials
    assert [t.state for t in before] == [states.COMPLETE] * 2 + [states.RUNNING] * 2
    assert {t.user_attrs[KEY_ATTR] for t in before[:2]} == set(finished_before)
    in_flight = [t.user_attrs[KEY_ATTR] for t in before[2:]]

    final = resume_sweep(home=home, stream=io.StringIO())
    assert (final.sweep_id, final.state, final.done, final.failed) == (
        record.ref.sweep_id, "finished", 4, 0)
    after = child_runs(home, record.ref.sweep_id)
    keys = [r.data.tags[tracking.TRIAL_KEY] for r in after]
    assert sorted(keys) == sorted([*finished_before, *in_flight])  # one run each
    assert all(r.info.status == "FINISHED" for r in after)
    for r in after:
        key = r.data.tags[tracking.TRIAL_KEY]
        cfg = toy_experiment.Config(x=float(r.data.params["x"]), counter_dir=str(counters))
        if key in finished_before:  # kept, and not trained again
            assert (r.info.run_id, toy_experiment.attempts(cfg)) == (finished_before[key], 1)
        else:  # in flight: trained again from its beginning
            assert toy_experiment.attempts(cfg) == 2

    trials = optuna.load_study(study_name=name, storage=url).trials  # the same study
    assert [t.state for t in trials] == [states.COMPLETE] * 2 + [states.FAIL] * 2 + \
        [states.COMPLETE] * 2
    assert [(t.params, t.value) for t in trials[:2]] == [(t.params, t.value) for t in before[:2]]
    assert [t.params for t in trials[4:]] == [t.params for t in before[2:]]  # asked again
    assert [t.user_attrs[KEY_ATTR] for t in trials[4:]] == in_flight
    x = {r.data.tags[tracking.TRIAL_KEY]: float(r.data.params["x"]) for r in after}
    assert [t.value for t in trials if t.state == states.COMPLETE] == pytest.approx(
        [10 * x[t.user_attrs[KEY_ATTR]] for t in trials if t.state == states.COMPLETE])


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_of_two_resumes_started_together_the_second_is_refused(tmp_path, monkeypatch):
    """Both read the sweep as interrupted; the first takes it before Ray starts (seconds), and
    the second, which reads it again under the store's lock as it takes it, finds the first
    one's driver alive: it trained the same configurations beside the first, before."""
    from sweeps.tracking.layout import Tracker

    home = new_home(tmp_path)
    first = run_sweep(str(write_spec(tmp_path, space={"x": [0.2, 0.9]})), "smoke", home=home,
                      stream=io.StringIO())
    t = tracker_of(home)
    ref = t.find_sweep(first.sweep_id).ref
    t.end_sweep(ref, "KILLED", {})
    kept = track(t, ref, "in-flight", {}, end="killed")  # what the other resume would discard
    download = Tracker.download_spec

    def taken_meanwhile(self, ref_, dest):  # after this resume's first look, as the other's
        t.reopen_sweep(ref, 2)               # driver (alive: this process) takes the sweep
        return download(self, ref_, dest)

    monkeypatch.setattr(Tracker, "download_spec", taken_meanwhile)
    with pytest.raises(ConfigError, match="is still running") as err:
        resume_sweep(first.sweep_id, home=home, stream=io.StringIO())
    assert err.value.field == "sweep"
    assert t.client.get_run(kept).info.lifecycle_stage == "active"


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_sweep_interrupted_as_it_began_leaves_no_parent_without_its_spec(tmp_path,
                                                                          monkeypatch):
    """Ctrl-C while its spec was being stored left a RUNNING parent that every later resume
    failed on (a FileNotFoundError traceback): now the parent goes, as if never started; one
    left by an older version is refused in a line, naming the sweep."""
    home = new_home(tmp_path)
    t = tracker_of(home)
    experiment = t.experiment_id("toy-spec", home)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(t.client, "log_text", interrupted)
        t.start_sweep(experiment, "20261207-020319-6ea5", {}, {"spec/toy.yaml": "name: toy"})
    assert t.find_sweep() is None
    t.start_sweep(experiment, "20261207-020320-6ea6", {contract.SPEC: "toy-spec"}, {})
    with pytest.raises(ConfigError, match="stopped as it began, before it stored its spec") \
            as err:
        resume_sweep(home=home, force=True, stream=io.StringIO())  # its driver: this one
    assert (err.value.field, err.value.value) == ("sweep", "20261207-020320-6ea6")


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_sweep_that_fails_under_ray_ends_its_runs_killed_and_says_how_to_resume(
        tmp_path, monkeypatch):
    """A disk that filled mid-sweep raised out of Tune's results with the parent and the runs
    in flight left RUNNING; they end as an interrupt ends them, and the error goes on."""
    import sweeps.runner

    home = new_home(tmp_path)
    t = tracker_of(home)

    def fails(spec, plan, ref, *args, **kwargs):
        track(t, ref, "in-flight", {}, end="running")
        raise EOFError("Ran out of input")

    monkeypatch.setattr(sweeps.runner, "execute", fails)
    out = io.StringIO()
    with pytest.raises(EOFError):
        run_sweep(str(write_spec(tmp_path, space={"x": [0.2, 0.9]})), "smoke", home=home,
                  stream=out)
    record = t.find_sweep()
    assert record is not None and record.status == "KILLED"
    assert [r.status for r in t.states(record.ref)] == ["KILLED"]
    assert f"resume with: ortho sweep resume {record.ref.sweep_id}" in out.getvalue()
