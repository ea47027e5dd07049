"""Interrupt a sweep, resume it, and check that MLflow holds one run per configuration and
that finished configurations were not trained again."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweeps.runner import resume_sweep
from tests.sweeps import toy_experiment
from tests.sweeps.helpers import TOY_MODULE, child_runs, new_home, store, toy_ray, write_spec

pytestmark = pytest.mark.usefixtures(toy_ray.__name__)

ROOT = Path(__file__).resolve().parents[2]
XS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
FAILING = 0.05
"""Fails at its first attempt (``max_failures: 0``): a resume trains it again."""


def _ortho(args: list[str], home: Path) -> subprocess.Popen[str]:
    """``ortho ARGS`` in a subprocess that knows the toy experiment."""
    code = ("import sys; from ortho_core import experiments; "
            f"experiments.EXPERIMENTS['toy'] = {TOY_MODULE!r}; "
            "from sweeps.cli import main; sys.exit(main(sys.argv[1:]))")
    env = {**os.environ, "ORTHO_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _finished(home: Path) -> int:
    record = store(home).find_sweep()
    if record is None:
        return 0
    return sum(r.info.status == "FINISHED" for r in store(home).configurations(record.ref))


def test_interrupt_then_resume_runs_each_configuration_once(tmp_path):
    counters = tmp_path / "counters"
    counters.mkdir()
    spec = write_spec(tmp_path, fixed={"steps": 3, "sleep": 0.3, "counter_dir": str(counters)},
                      space={}, groups=[{"fixed": {"x": FAILING, "fail": 1}},
                                        {"space": {"x": XS}}])
    home = new_home(tmp_path)
    proc = _ortho(["sweep", "run", str(spec), "--profile", "smoke"], home)
    deadline = time.monotonic() + 240
    while _finished(home) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    record = store(home).find_sweep()
    assert record.status == "KILLED"
    assert f"resume with: ortho sweep resume {record.ref.sweep_id}" in out
    before = {float(r.data.params["x"]): r for r in child_runs(home, record.ref.sweep_id)}
    assert before[FAILING].info.status == "FAILED"
    finished_before = {x: r.info.run_id for x, r in before.items()
                       if r.info.status == "FINISHED"}
    assert 2 <= len(finished_before) < len(XS), out
    assert all(r.info.status in ("FINISHED", "FAILED", "KILLED") for r in before.values())

    out = io.StringIO()
    final = resume_sweep(home=home, stream=out)  # the latest interrupted sweep
    assert (f"{len(finished_before)} of {len(XS) + 1} configurations done, "
            f"{len(XS) + 1 - len(finished_before)} to run") in out.getvalue()
    assert (final.sweep_id, final.state, final.done, final.failed) == (
        record.ref.sweep_id, "finished", len(XS) + 1, 0)
    after = child_runs(home, record.ref.sweep_id)
    assert sorted(float(r.data.params["x"]) for r in after) == [FAILING, *XS]  # one run each
    assert all(r.info.status == "FINISHED" for r in after)
    for r in after:
        x = float(r.data.params["x"])
        trained = toy_experiment.attempts(toy_experiment.Config(x=x, counter_dir=str(counters)))
        if x in finished_before:  # kept, and not trained again
            assert r.info.run_id == finished_before[x]
            assert trained == 1
        elif x == FAILING:  # failed, then retried by the resume
            assert trained == 2
    assert store(home).find_sweep(record.ref.sweep_id).status == "FINISHED"
    assert store(home).find_sweep(unfinished=True) is None


def test_resume_without_an_unfinished_sweep_says_so(tmp_path):
    from sweeps.runner import SweepNotFound

    with pytest.raises(SweepNotFound, match="no unfinished sweep"):
        resume_sweep(home=new_home(tmp_path), stream=io.StringIO())
