"""Progress of a sweep: the progress callback's heartbeat, bar and lines
(``sweeps.tune_progress``), and what MLflow says of a sweep whose driver runs, was killed, or
ended (``sweeps.status``, without Ray)."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest

from ortho_core.reporting import Outcome, Result
from sweeps import contract, tracking, tune_progress
from sweeps.lookup import sweep_status
from sweeps.status import (
    InFlight,
    Progress,
    duration,
    estimate,
    format_line,
    format_status,
    from_mlflow,
    in_flight,
    rate,
    state_of,
    time_left,
)
from sweeps.testing import drive_from, start_sweep
from sweeps.tune_progress import ProgressCallback
from tests.sweeps.helpers import new_home


def _progress(total: int = 3) -> Progress:
    return Progress(sweep_id="s", label="toy/smoke", metric="score", mode="max", total=total)


def test_the_progress_callback_beats_every_interval(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(tune_progress.time, "monotonic", lambda: now[0])
    beats: list[float] = []
    callback = ProgressCallback(_progress(), io.StringIO(), beat=lambda: beats.append(1),
                                beat_interval=0.2)
    now[0] += 0.19
    callback.on_step_end(0, [])
    assert beats == []  # not before an interval has passed
    now[0] += 0.02
    callback.on_step_end(1, [])
    callback.on_step_end(2, [])
    assert beats == [1]
    assert callback.__getstate__()["beat"] is None  # Tune pickles callbacks: no tracker


def test_a_ctrl_c_is_answered_at_once_then_left_to_tune(monkeypatch):
    """Tune installs its SIGINT handler before the callbacks' setup: the callback puts its
    line in front of it, hands the trials of Tune's last step to the reaper after it, and
    does neither once Tune's fit has ended."""
    tune_calls: list[int] = []
    monkeypatch.setattr(signal, "getsignal", lambda sig: lambda s, f: tune_calls.append(s))
    installed: dict[int, object] = {}
    monkeypatch.setattr(signal, "signal", lambda sig, handler: installed.setdefault(sig, handler))
    reaped: list[tuple[list[object], int, threading.Event]] = []
    monkeypatch.setattr(tune_progress, "end_when_stopped",
                        lambda trials, done: reaped.append((trials, len(tune_calls), done)))
    out = io.StringIO()
    callback = ProgressCallback(_progress(), out)
    callback.setup(stop=None, num_samples=1, total_num_samples=1)
    trials = [SimpleNamespace(status="RUNNING", config={})]
    callback.on_step_end(0, trials)
    assert callback.__getstate__()["_trials"] == []  # Tune pickles callbacks: no trials
    installed[signal.SIGINT](signal.SIGINT, None)
    assert out.getvalue() == tune_progress.STOPPING + "\n" and tune_calls == [signal.SIGINT]
    [(handed, calls, fit_ended)] = reaped
    assert (handed, calls) == (trials, 1)  # after Tune's handler had stopped the sweep
    assert not fit_ended.is_set()
    callback.on_experiment_end([])
    assert fit_ended.is_set()  # the reaper stops looking
    installed[signal.SIGINT](signal.SIGINT, None)
    assert out.getvalue().count("stopping") == 1 and len(tune_calls) == 2
    assert len(reaped) == 1


def test_a_failed_heartbeat_is_logged_and_the_sweep_goes_on(caplog):
    def unreachable() -> None:
        raise ConnectionError("http://user:secret@tracking:5000 refused")

    callback = ProgressCallback(_progress(), io.StringIO(), beat=unreachable, beat_interval=0.0)
    callback.on_step_end(0, [])  # raises nothing
    assert "heartbeat not recorded" in caplog.text
    assert "secret" not in caplog.text and "refused" in caplog.text


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _trial(status: str, configs: int, score: float | None = None) -> SimpleNamespace:
    """A Tune trial of a pack of ``configs`` configurations; ended with a final report when
    ``score`` is given."""
    result = {"configs": configs, "score": score} if score is not None else {}
    return SimpleNamespace(status=status, last_result=result, error_file=None,
                           config={"members": [{"key": f"k{i}"} for i in range(configs)]})


def test_on_a_terminal_the_callback_draws_a_bar_of_configurations():
    stream = Terminal()
    callback = ProgressCallback(_progress(), stream)
    assert callback.bar is not None
    running = _trial("RUNNING", 1)
    callback.on_trial_complete(0, [running], _trial("TERMINATED", 2, score=5.0))
    shown = stream.getvalue().rsplit("\r", 1)[-1]
    assert shown.startswith("toy/smoke:") and " 2/3 " in shown
    assert "1 running, best score 5" in shown
    callback.on_trial_error(1, [], running)
    assert "failed: unknown error (1 configuration(s)" in stream.getvalue()
    assert " 3/3 " in stream.getvalue().rsplit("\r", 1)[-1]
    assert callback.progress.failed == 1
    assert callback.__getstate__()["bar"] is None
    callback.on_experiment_end([])
    assert callback.bar.disable  # closed


def test_a_resumed_sweep_s_bar_starts_at_what_is_done_repeats_included():
    progress = _progress()
    progress.done, progress.repeats = 1, 1
    callback = ProgressCallback(progress, Terminal())
    assert callback.bar is not None and callback.bar.n == 2
    callback.close()


def test_elsewhere_the_callback_prints_a_line_when_trials_end():
    stream = io.StringIO()
    callback = ProgressCallback(_progress(), stream, min_interval=0.0)
    assert callback.bar is None
    callback.on_trial_complete(0, [], _trial("TERMINATED", 2, score=5.0))
    assert stream.getvalue() == ""  # lines are printed between Tune's steps
    callback.on_step_end(1, [_trial("RUNNING", 1)])
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and "\r" not in stream.getvalue()
    assert lines[0].startswith("sweep s toy/smoke: 2/3 done, 1 running, best score 5, ")
    callback.on_step_end(2, [])
    assert len(stream.getvalue().splitlines()) == 1  # nothing new: no line until print_every


def test_a_line_waits_until_tune_has_refilled_the_slot_a_trial_freed(monkeypatch):
    """Tune starts the next trial on the ended one's actor milliseconds after the end: a line
    printed at once said "12/18 done, 1 running" while both slots trained. It waits
    :data:`SETTLE` after the last end, or ``min_interval`` after the first one it shows where
    trials end in quick succession."""
    now = [100.0]
    monkeypatch.setattr(tune_progress.time, "monotonic", lambda: now[0])
    stream = io.StringIO()
    callback = ProgressCallback(_progress(total=20), stream, min_interval=2.0)

    def lines() -> list[str]:
        return stream.getvalue().splitlines()

    now[0] += 20.0  # long after the last line, as between the ends of minute-long trials
    callback.on_trial_complete(0, [], _trial("TERMINATED", 1, score=5.0))
    now[0] += 0.01
    callback.on_step_end(1, [_trial("RUNNING", 1)])  # the freed slot not yet refilled
    assert lines() == []
    now[0] += tune_progress.SETTLE
    callback.on_step_end(2, [_trial("RUNNING", 1), _trial("RUNNING", 1)])
    assert len(lines()) == 1 and "1/20 done, 2 running, " in lines()[0]
    now[0] += 20.0
    for k in range(8):  # an end every 0.3 s: never SETTLE seconds without one
        callback.on_trial_complete(k, [], _trial("TERMINATED", 1, score=5.0))
        callback.on_step_end(k, [_trial("RUNNING", 1)])
        assert len(lines()) == (2 if k == 7 else 1)  # 2.1 s after the first of them
        now[0] += 0.3
    assert "9/20 done, " in lines()[1]
    callback.close()


class FixedGauge:
    """A gauge that reads ``share`` until a trial ends, then nothing until told again."""

    def __init__(self, share: float) -> None:
        self.share: float | None = share

    def __call__(self) -> InFlight | None:
        return None if self.share is None else InFlight(self.share, False)

    def invalidate(self) -> None:
        self.share = None


def test_the_callback_s_line_says_how_far_its_running_trials_are_before_any_ends():
    """One pack of 3 configurations running, a third through its steps after 30 s, as the
    gauge read it at Tune's step: the line says so, and the time left is a minute."""
    stream = io.StringIO()
    callback = ProgressCallback(_progress(), stream, min_interval=0.0, print_every=0.0,
                                gauge=FixedGauge(1 / 3), start=time.monotonic() - 30)
    callback.on_step_end(0, [_trial("RUNNING", 3)])
    line = stream.getvalue().splitlines()[-1]
    assert "0/3 done, 3 running (33 % through), 30s elapsed, about 1m00s left" in line
    assert callback.__getstate__()["gauge"] is None  # Tune pickles callbacks: no writer


def test_a_trial_s_end_drops_the_share_measured_of_the_trials_before_it():
    """Two packs of one a third through when one ends: the share was of the configurations
    running then, not of the one Tune starts next, so the line that follows shows none and
    estimates from what ended (it showed "(76 % through)" and "about 7s left" for a trial
    that had just started, 38 s before the sweep ended)."""
    stream = io.StringIO()
    gauge = FixedGauge(1 / 3)
    progress = _progress(total=4)
    callback = ProgressCallback(progress, stream, min_interval=0.0, print_every=0.0,
                                gauge=gauge, start=time.monotonic() - 30)
    callback.on_step_end(0, [_trial("RUNNING", 1), _trial("RUNNING", 1)])
    assert "0/4 done, 2 running (33 % through)" in stream.getvalue()
    callback.on_trial_complete(1, [], _trial("TERMINATED", 1, score=5.0))
    assert progress.in_flight is None
    callback.on_step_end(2, [_trial("RUNNING", 1), _trial("RUNNING", 1)])
    line = stream.getvalue().splitlines()[-1]
    assert "1/4 done, 2 running, best score 5, 30s elapsed, about 1m30s left" in line


def test_the_time_elapsed_counts_from_the_command_s_start():
    """The progress lines and the bar count Ray's start, as the final line and ``ortho sweep
    status`` (from the parent run's start) do: "16s elapsed" was followed by "finished in
    24s" a second later."""
    stream = io.StringIO()
    callback = ProgressCallback(_progress(), stream, min_interval=0.0,
                                start=time.monotonic() - 30)
    callback.on_trial_complete(0, [], _trial("TERMINATED", 1, score=5.0))
    callback.on_step_end(1, [])
    assert ", 30s elapsed, " in stream.getvalue()
    bar = ProgressCallback(_progress(), Terminal(), start=time.monotonic() - 30).bar
    assert bar is not None and 30 <= bar.format_dict["elapsed"] < 40
    bar.close()


def test_the_callback_counts_repeated_optuna_points_as_done_untrained():
    stream = io.StringIO()
    repeats = [0]
    callback = ProgressCallback(_progress(), stream, min_interval=0.0,
                                repeats=lambda: repeats[0])
    callback.on_trial_complete(0, [], _trial("TERMINATED", 1, score=5.0))
    repeats[0] = 1
    callback.on_step_end(1, [])
    assert stream.getvalue().startswith(
        "sweep s toy/smoke: 2/3 done (1 repeated point not trained), best score 5, ")
    assert callback.progress.eta is not None  # one configuration left, at the rate so far
    assert callback.__getstate__()["repeats"] is None


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture
def sweep(tmp_path):
    """A sweep of 3 configurations: one finished, one failed, one running."""
    t = tracking.tracker(tracking.tracking_uri(None, new_home(tmp_path)))
    ref = start_sweep(t, "toy", "s", profile="smoke", n_configs=3, metric="score")
    done = t.claim(ref, "a", {}, {})
    t.finish(done.run_id, Result(Outcome.SOLVED, {"score": 4.0}), 0, [])
    t.fail(t.claim(ref, "b", {}, {}).run_id, "boom")
    t.claim(ref, "c", {}, {})
    return t, ref


def test_a_sweep_with_a_live_driver_is_running(sweep):
    t, _ = sweep
    record = t.find_sweep("s")
    p = from_mlflow(t, record)
    assert state_of(record) == p.state == "running"
    assert (p.done, p.failed, p.running, p.best) == (2, 1, 1, 4.0)
    assert format_line(p).startswith("sweep s toy/smoke: 2/3 done (1 failed), 1 running, "
                                     "best score 4, ")


def test_a_resumed_sweep_s_time_left_is_at_the_resumed_run_s_rate(sweep):
    """Resumed 10 s ago with one configuration done, it has ended one more since: the one
    left is due in about 10 s, not at the rate over the whole span since its first start."""
    t, ref = sweep
    t.reopen_sweep(ref, 1)
    resumed_at = time.time() - 10.0
    t.client.set_tag(ref.parent_run_id, contract.RESUMED,
                     json.dumps({"at": resumed_at, "done": 1}))
    record = t.find_sweep("s")
    assert record.resumed == (pytest.approx(resumed_at), 1)
    p = from_mlflow(t, record)
    assert p.state == "running" and p.done == 2
    assert p.eta == pytest.approx(10.0, abs=0.5)


def test_a_sweep_whose_driver_died_is_interrupted(sweep):
    t, ref = sweep
    record = t.find_sweep("s")
    heartbeat = round(record.start_time + 95)  # a tag of whole seconds
    drive_from(t, ref, f"{socket.gethostname()}:{_dead_pid()}", heartbeat)
    record = t.find_sweep("s")
    assert record.status == "RUNNING"  # as the killed driver left it
    p = from_mlflow(t, record)
    assert state_of(record) == p.state == "interrupted"
    assert (p.done, p.running) == (2, 0)
    assert p.elapsed == pytest.approx(heartbeat - record.start_time)  # up to its last heartbeat
    assert 94.4 < p.elapsed < 95.6
    # 1m35s, or 1m34s / 1m36s where the start's milliseconds round the other way
    assert (f"interrupted (its driver lost) after at least {duration(p.elapsed)}"
            in format_line(p))


def test_a_dead_driver_s_time_runs_to_its_last_run_s_end_when_that_came_after_its_heartbeat(
        sweep):
    t, ref = sweep
    record = t.find_sweep("s")
    drive_from(t, ref, f"{socket.gethostname()}:{_dead_pid()}", round(record.start_time + 4))
    finished = next(r for r in t.states(ref) if r.status == "FINISHED")
    ended = record.start_time + 23.0  # killed 26 s after its heartbeat, 3 s after this end
    t.client.set_terminated(finished.run_id, "FINISHED", end_time=int(ended * 1000))
    assert next(r for r in t.states(ref) if r.run_id == finished.run_id).end_time == ended
    p = from_mlflow(t, t.find_sweep("s"))
    assert p.state == "interrupted"
    assert p.elapsed == pytest.approx(23.0, abs=1e-3)  # not the heartbeat's 4 s


@pytest.mark.parametrize(("seconds", "text"), [
    (4.2, "4s"), (83, "1m23s"), (95.4, "1m35s"), (94.6, "1m35s"), (3725, "1h02m05s")])
def test_durations_read_in_whole_seconds(seconds, text):
    assert duration(seconds) == text


def test_a_sweep_elsewhere_is_running_while_its_heartbeat_is_recent(sweep):
    t, ref = sweep
    drive_from(t, ref, f"not-{socket.gethostname()}:1")
    assert state_of(t.find_sweep("s")) == "running"
    drive_from(t, ref, f"not-{socket.gethostname()}:1", time.time() - tracking.ALIVE_SECONDS - 5)
    assert state_of(t.find_sweep("s")) == "interrupted"


def test_an_ended_sweep_is_finished_or_interrupted(sweep):
    t, ref = sweep
    assert from_mlflow(t, t.find_sweep("s")).per_hour is None  # running: no rate yet
    t.end_sweep(ref, "KILLED", {contract.CONFIGS_PER_HOUR: 40.0})
    assert state_of(t.find_sweep("s")) == "interrupted"  # even with its driver (us) alive
    p = from_mlflow(t, t.find_sweep("s"))
    assert p.per_hour == 40.0 and format_line(p).endswith(", 40 configurations/h")
    t.end_sweep(ref, "FINISHED", {contract.CONFIGS_PER_HOUR: 2057.4})  # a resume's, later
    assert state_of(t.find_sweep("s")) == "finished"
    assert format_line(from_mlflow(t, t.find_sweep("s"))).endswith(", 2,057 configurations/h")
    t.end_sweep(ref, "FINISHED", {contract.CONFIGS_PER_HOUR: 7.0})  # a third
    assert format_line(from_mlflow(t, t.find_sweep("s"))).endswith(", 7 configurations/h")
    history = t.client.get_metric_history(ref.parent_run_id, contract.CONFIGS_PER_HOUR)
    assert sorted((m.step, m.value) for m in history) == [(0, 40.0), (1, 2057.4), (2, 7.0)]
    assert os.getpid() == int(t.find_sweep("s").driver.rpartition(":")[2])


def test_status_without_an_id_names_the_other_sweeps_of_the_store(tmp_path):
    """The latest sweep is shown, then the store's other latest sweeps, newest first, so
    that a user sees what else a reproduction ran, and whether older ones are left out; a
    sweep named by its id is shown alone."""
    home = new_home(tmp_path)
    t = tracking.tracker(tracking.tracking_uri(None, home))
    ids = [f"20261127-00000{i}-abcd" for i in range(7)]
    for i, sweep_id in enumerate(ids):
        ref = start_sweep(t, f"spec{i}", sweep_id, profile="smoke", n_configs=1)
        if i < 5:
            t.end_sweep(ref, "FINISHED", {})
        time.sleep(0.002)  # distinct start times
    text = format_status(sweep_status(home=home)).splitlines()
    assert text[0].startswith(f"sweep {ids[6]} spec6/smoke: ")
    assert text[-1] == ("  other sweeps here: " + "; ".join(
        [f"{ids[5]} spec5/smoke running"]
        + [f"{ids[i]} spec{i}/smoke finished" for i in (4, 3, 2, 1)])
        + " (ortho sweep status ID shows one; older ones too, which ortho ui lists)")
    t.client.delete_run(t.find_sweep(ids[0]).ref.parent_run_id)  # now the five are all
    assert format_status(sweep_status(home=home)).splitlines()[-1].endswith(
        "(ortho sweep status ID shows one)")
    named = format_status(sweep_status(ids[2], home=home))
    assert named.startswith(f"sweep {ids[2]} spec2/smoke: ") and "other sweeps" not in named


def test_a_resumed_sweep_names_the_run_its_rate_is_over():
    """The rate is that of the run that ended the sweep, over its own wall time: where that is
    shorter than the sweep's span (a resume), both are named; otherwise the line is as
    before."""
    def line(elapsed: float, run_seconds: float | None) -> str:
        return format_line(Progress(sweep_id="s", label="toy/smoke", metric="score", mode="max",
                                    total=6, done=6, elapsed=elapsed, state="finished",
                                    per_hour=950.0, run_seconds=run_seconds))

    assert line(32.0, 11.4).endswith(", finished in 32s, the last run's 11s: "
                                     "950 configurations/h")
    assert line(32.0, 31.8).endswith(", finished in 32s, 950 configurations/h")
    assert line(11.52, 11.47).endswith(", finished in 12s, 950 configurations/h")  # MLflow's end
    assert line(32.0, None).endswith(", finished in 32s, 950 configurations/h")


def test_mlflow_gives_the_last_runs_wall_time(sweep):
    t, ref = sweep
    t.end_sweep(ref, "FINISHED", {contract.CONFIGS_PER_HOUR: 950.0, contract.RUN_SECONDS: 11.4})
    p = from_mlflow(t, t.find_sweep("s"))
    assert (p.per_hour, p.run_seconds) == (950.0, 11.4)


@pytest.mark.parametrize(("per_hour", "text"), [
    (2057.4, "2,057 configurations/h"), (10.0, "10 configurations/h"),
    (3.42, "3.4 configurations/h"), (0.25, "0.25 configurations/h")])
def test_configurations_per_hour_read_at_a_glance(per_hour, text):
    assert rate(per_hour) == text


def test_the_time_left_follows_the_rate_so_far_and_vanishes_once_nothing_is_left():
    assert estimate(2, 60.0, 4) == 120.0  # 30 s a configuration
    assert estimate(0, 60.0, 4) is None  # no rate yet
    assert estimate(4, 60.0, 0) is None  # all done: the sweep is only ending
    p = Progress(sweep_id="s", label="toy/smoke", metric="score", mode="max", total=1, done=1,
                 elapsed=5.0, eta=estimate(1, 5.0, 0))
    assert format_line(p) == "sweep s toy/smoke: 1/1 done, 5s elapsed"


def _budget(steps: int, ends_early: bool = False) -> str:
    return json.dumps({"steps": steps, "ends_early": ends_early})


def test_how_far_the_running_configurations_are_is_the_mean_share_of_their_steps():
    rows = [("a", _budget(100), 50), ("b", _budget(100), None),  # nothing logged yet: 0
            ("c", _budget(10), 30),  # past its planned steps: counted done, not more
            ("d", None, 7)]  # claimed before the tag existed: left out
    assert in_flight(rows) == InFlight(pytest.approx((0.5 + 0 + 1) / 3), False)
    assert in_flight([*rows, ("e", _budget(100, ends_early=True), 25)]).ends_early
    assert in_flight([("d", None, 7)]) is None and in_flight([]) is None
    assert in_flight([("f", _budget(0), 0)]) == InFlight(1.0, False)  # one report, at step 0


def test_the_line_says_how_far_the_running_configurations_are():
    p = Progress(sweep_id="s", label="toy/smoke", metric="score", mode="max", total=8,
                 running=4, elapsed=60.0, in_flight=InFlight(0.379, False))
    assert "4 running (37 % through), 1m00s elapsed" in format_line(p)
    p.in_flight = InFlight(0.379, True)
    assert "4 running (at least 37 % through)" in format_line(p)


def test_the_time_left_counts_the_running_configurations_share_of_their_steps():
    """8 configurations, 4 running a quarter through after 60 s: one configuration's worth
    trained a minute, 7 left, 7 minutes; no estimate from steps where a member may end before
    its planned steps (only from configurations ended)."""
    p = Progress(sweep_id="s", label="toy/smoke", metric="score", mode="max", total=8,
                 running=4, in_flight=InFlight(0.25, False))
    assert time_left(p, 0, 60.0) == pytest.approx(420.0)
    p.done, p.running = 2, 2  # 2 ended and 2 a quarter through: 2.5 in 60 s, 5.5 left
    assert time_left(p, 2, 60.0) == pytest.approx(132.0)
    p.in_flight = InFlight(0.25, True)
    assert time_left(p, 2, 60.0) == estimate(2, 60.0, 6) == 180.0
    p.in_flight = None
    assert time_left(p, 0, 60.0) is None


@pytest.mark.parametrize("direct", [True, False], ids=["tables", "client"])
def test_status_reads_how_far_the_running_configurations_are(tmp_path, direct):
    """Two running configurations, of 400 planned steps each, have logged up to steps 100
    and 300 (one of them in two batches): 50 % through, read from the store's tables and
    through MLflow's client alike; the finished one is not counted."""
    from mlflow.entities import Metric

    t = tracking.tracker(tracking.tracking_uri(None, new_home(tmp_path)))
    t.direct = direct
    ref = start_sweep(t, "toy", "s", profile="smoke", n_configs=3, metric="score")
    done = t.claim(ref, "a", {}, {contract.BUDGET: _budget(400)})
    t.finish(done.run_id, Result(Outcome.SOLVED, {"score": 4.0}), 400, [])
    first = t.claim(ref, "b", {}, {contract.BUDGET: _budget(400)}).run_id
    second = t.claim(ref, "c", {}, {contract.BUDGET: _budget(400)}).run_id
    t.client.log_batch(first, metrics=[Metric("loss", 1.0, 0, s) for s in (0, 100)])
    t.client.log_batch(second, metrics=[Metric("loss", 1.0, 0, 200)])
    t.client.log_batch(second, metrics=[Metric("loss", 0.5, 1, 300),
                                        Metric("value", 0.5, 1, 250)])
    assert sorted(t.running_steps(ref)) == sorted([(first, _budget(400), 100),
                                                   (second, _budget(400), 300)])
    p = from_mlflow(t, t.find_sweep("s"))
    assert (p.done, p.running, p.in_flight) == (1, 2, InFlight(0.5, False))
    assert "2 running (50 % through)" in format_line(p)
