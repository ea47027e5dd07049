"""What the progress displays show: off a terminal (CI, logs, pipes) plain lines without any
control character; on a terminal a bar, also on one that reports no size; ``ortho train``'s
bar per pack counts the members that diverged and ends with how each member ended."""

from __future__ import annotations

import io
import math
import os
import re
import select
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest

from ortho_core import experiments
from ortho_core.reporting import Outcome, Report, Result
from sweeps import train_command
from sweeps.cli import main
from sweeps.train_command import ProgressPrinter
from tests.sweeps.helpers import TOY_MODULE, new_home, toy_ray, write_spec

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
"""C0 control characters and DEL, except the line feed and the tab."""


def _plain(text: str) -> None:
    found = sorted({repr(c) for c in CONTROL.findall(text)})
    assert not found, f"control characters {found} in:\n{text}"


@pytest.mark.slow  # with its Ray's start: 21 s at a load average of 10 on 2 cores, 58 s at 15
@pytest.mark.usefixtures(toy_ray.__name__)
def test_a_sweep_off_a_terminal_prints_plain_lines(tmp_path, capfd):
    """Everything written to the process's stdout and stderr while a sweep with a failing
    configuration runs, Ray's and Tune's included."""
    home = new_home(tmp_path)
    spec = write_spec(tmp_path, fixed={"steps": 2, "counter_dir": str(tmp_path)}, space={},
                      groups=[{"fixed": {"x": 0.9}}, {"fixed": {"x": 0.3, "fail": 9}}])
    assert main(["sweep", "run", str(spec), "--profile", "smoke", "--home", str(home)]) == 1
    out, err = capfd.readouterr()
    _plain(out + err)
    lines = out.splitlines()
    assert re.fullmatch(r"sweep \S+ toy/smoke: 2/2 done \(1 failed\), best score 9, "
                        r"finished in \S+, [\d,.]+ configurations/h", lines[-2]), out
    sweep_id = lines[-2].split()[1]  # the hint finds the sweep from any folder
    assert lines[-1] == f"resume with: ortho sweep resume {sweep_id} --home {home}"
    assert [line for line in lines if line.startswith("failed: ")] == [
        "failed: RuntimeError: toy failure of x=0.3 (attempt 1) (1 configuration(s); the "
        "traceback is their runs' traceback.txt)"]
    assert "Traceback" not in out + err  # the traceback is the run's traceback.txt
    assert err == ""


def test_ortho_train_off_a_terminal_prints_plain_lines(capfd, monkeypatch):
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)
    assert main(["train", "toy", "--set", "x=0.2,0.8", "--set", "steps=3"]) == 0
    out, err = capfd.readouterr()
    _plain(out + err)
    assert err.splitlines()[0].startswith("[")  # the first report at once
    assert " step 0/2 member 0/2 loss=0.2 " in err.splitlines()[0]  # of 2 planned
    assert re.fullmatch(r"2 configuration\(s\) done in [\d.]+ s: 1 solved, 1 unsolved",
                        err.splitlines()[-1])
    assert out.startswith("ortho train toy: 2 configuration(s) in ")


def _report(member: int, step: int, loss: float) -> Report:
    return Report(member=member, step=step, metrics={"train_loss": loss})


def test_the_pack_line_counts_members_whose_latest_report_diverged():
    stream = io.StringIO()
    progress = ProgressPrinter(3, stream, interval=0.0)
    progress(_report(0, 10, 0.5))
    progress(_report(1, 10, math.nan))
    progress(_report(2, 10, math.inf))
    progress(_report(2, 20, 0.25))  # finite again: counted no more
    lines = stream.getvalue().splitlines()
    assert lines[0].endswith("step 10 member 0/3 train_loss=0.5")
    assert lines[2].endswith("step 10 2 diverged, member 2/3 train_loss=inf")
    assert lines[3].endswith("step 20 1 diverged, member 2/3 train_loss=0.25")
    progress.ended([Result(Outcome.SOLVED), Result(Outcome.DIVERGED), Result(Outcome.SOLVED)])
    assert re.search(r"^3 configuration\(s\) done in [\d.]+ s: 2 solved, 1 diverged$",
                     stream.getvalue().splitlines()[-1])


def test_a_terminal_without_a_size_still_gets_a_bar():
    """A new pseudo-terminal reports 0 columns and 0 lines (as under ``script`` without a
    terminal), on which a bar of that size would show nothing."""
    leader, follower = os.openpty()
    try:
        assert os.get_terminal_size(follower) == (0, 0)
        with open(follower, "w", closefd=False) as stream:
            progress = ProgressPrinter(2, stream)
            assert progress.bar is not None
            progress(_report(1, 40, 0.5))
            progress.bar.refresh()
            stream.flush()
            progress.close()
        shown = b""
        while select.select([leader], [], [], 0.5)[0]:
            shown += os.read(leader, 4096)
    finally:
        os.close(leader)
        os.close(follower)
    assert "pack of 2: 40step" in shown.decode()
    assert "member 1/2 train_loss=0.5" in shown.decode()


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_the_sweep_bar_does_not_count_the_trial_that_just_ended_as_running():
    """Tune still lists a trial as running when it calls back that the trial completed."""
    from sweeps.status import Progress
    from sweeps.tune_progress import ProgressCallback

    stream = Terminal()
    callback = ProgressCallback(Progress(sweep_id="s", label="toy/smoke", metric="score",
                                         mode="max", total=4), stream)
    ending = SimpleNamespace(status="RUNNING", last_result={"configs": 2, "score": 5.0},
                             config={"members": [{"key": "a"}, {"key": "b"}]}, error_file=None)
    other = SimpleNamespace(status="RUNNING", last_result={}, error_file=None,
                            config={"members": [{"key": "c"}, {"key": "d"}]})
    callback.on_trial_complete(0, [ending, other], ending)
    shown = stream.getvalue().rsplit("\r", 1)[-1]
    assert " 2/4 " in shown and "2 running, best score 5" in shown
    callback.close()


def test_a_trial_the_scheduler_stopped_offers_no_best():
    """Its last result is a step's report (the scheduler's metric, which may be the spec's
    own name): not a summary, so the live best stays that of the trials that ended, as the
    final line and ``ortho sweep status`` count it."""
    from sweeps.status import Progress
    from sweeps.tune_progress import ProgressCallback

    callback = ProgressCallback(Progress(sweep_id="s", label="toy/smoke", metric="loss",
                                         mode="min", total=2), io.StringIO())
    stopped = SimpleNamespace(status="TERMINATED", last_result={"loss": 0.05, "step": 1},
                              config={"members": [{"key": "k5"}]}, error_file=None)
    ended = SimpleNamespace(status="TERMINATED", last_result={"configs": 1, "loss": 0.1},
                            config={"members": [{"key": "k2"}]}, error_file=None)
    callback.on_trial_complete(0, [stopped, ended], stopped)
    callback.on_trial_complete(0, [ended], ended)
    assert callback.stopped_early == ["k5"] and callback.progress.best == 0.1
    assert callback.progress.done == 2
    callback.close()


def test_a_reader_that_leaves_early_ends_the_command_quietly():
    """``ortho train synthetic --keys | head -0``: the pipe is closed before the command
    writes, so every write fails; it ends with 128 + SIGPIPE and writes nothing to stderr."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command starts writing
    try:
        done = subprocess.run([sys.executable, "-m", "sweeps.cli", "train", "synthetic",
                               "--keys"], stdout=write, stderr=subprocess.PIPE, text=True,
                              timeout=60)
    finally:
        os.close(write)
    assert done.returncode == 128 + signal.SIGPIPE, done.stderr
    assert done.stderr == ""


def test_a_pipe_that_breaks_elsewhere_is_not_hidden(monkeypatch, capfd):
    """A broken pipe that is not stdout's (a child's, a socket's) is an error to see, not a
    reader that left: it propagates."""
    def broken(args: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(train_command, "run", broken)
    with pytest.raises(BrokenPipeError):
        main(["train", "synthetic", "--keys"])
