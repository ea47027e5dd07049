"""Ctrl-C in the moment between the end of a sweep's last trial and the end of the command:
every configuration has its FINISHED run, so nothing is left to resume and the sweep ends as
finished (parent run FINISHED, the usual last line, exit status 0), not interrupted."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from sweeps.cli import main
from sweeps.tune_progress import ProgressCallback
from tests.sweeps.helpers import new_home, store, toy_ray, write_spec

pytestmark = pytest.mark.usefixtures(toy_ray.__name__)

XS = [0.1, 0.4, 0.7]
"""One configuration per trial (``pack_size: 1``): three trials."""


def test_ctrl_c_after_the_last_trial_ended_finishes_the_sweep(tmp_path, monkeypatch, capsys):
    """SIGINT reaches Tune after the last trial has ended its runs but before Tune counted
    that trial's end (its ``on_trial_complete`` never comes): Tune stops as interrupted."""
    home = new_home(tmp_path)
    spec = write_spec(tmp_path, space={"x": XS})
    counted = ProgressCallback.on_trial_complete

    def ctrl_c_at_the_last(self: ProgressCallback, iteration: int, trials: list[Any],
                           trial: Any, **info: Any) -> None:
        if self.trials_ended < len(XS) - 1:
            counted(self, iteration, trials, trial, **info)
        else:
            os.kill(os.getpid(), signal.SIGINT)  # Tune's handler: stop, as Ctrl-C does

    monkeypatch.setattr(ProgressCallback, "on_trial_complete", ctrl_c_at_the_last)
    assert main(["sweep", "run", str(spec), "--profile", "smoke", "--home", str(home)]) == 0
    out, err = capsys.readouterr()
    last = out.splitlines()[-1]
    assert f": {len(XS)}/{len(XS)} done, best score 7, finished in " in last, out
    assert "interrupted" not in out + err and "resume with" not in out
    tracker = store(home)
    record = tracker.find_sweep()
    assert record is not None and record.status == "FINISHED"
    assert [r.info.status for r in tracker.configurations(record.ref)] == ["FINISHED"] * 3


def test_ctrl_c_while_the_sweep_starts_ends_it_interrupted_and_resumable(tmp_path, monkeypatch,
                                                                           capsys):
    """SIGINT before Tune's handler is in place (while the writer and Tune start, where
    Python raises ``KeyboardInterrupt``): the sweep ends as a Ctrl-C in its trials ends it,
    KILLED with the command that resumes it, not left for a dead driver's; the resume then
    trains every configuration once."""
    from sweeps import runner

    home = new_home(tmp_path)
    spec = write_spec(tmp_path, space={"x": XS})

    def ctrl_c(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(runner, "execute", ctrl_c)
        assert main(["sweep", "run", str(spec), "--profile", "smoke", "--home",
                     str(home)]) == 130
    out, _ = capsys.readouterr()
    *_, last, again = out.splitlines()
    assert ": 0/3 done, interrupted after " in last
    tracker = store(home)
    record = tracker.find_sweep()
    assert record is not None and record.status == "KILLED"
    assert again == f"resume with: ortho sweep resume {record.ref.sweep_id} --home {home}"
    assert main(again.removeprefix("resume with: ortho ").split()) == 0
    runs = tracker.configurations(record.ref)
    assert sorted(float(r.data.params["x"]) for r in runs) == XS
    assert {r.info.status for r in runs} == {"FINISHED"}
