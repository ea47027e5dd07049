"""``ortho sweep studies``: a real packed Optuna sweep's studies summarised as Optuna and
MLflow hold them, and optuna-dashboard serving them on 127.0.0.1, read through its API and
in a browser; a grid sweep, a storage that is not the sweep's and an address in use are
refused with exit status 2."""

from __future__ import annotations

import io
import json
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import optuna
import psutil
import pytest

from sweeps import tracking
from sweeps.cli import main
from sweeps.plan import build_plan
from sweeps.runner import run_sweep
from sweeps.spec import load_spec, resolve
from sweeps.studies import CELL_ATTR, INTERRUPTED_ATTR, KEY_ATTR, REPEAT_ATTR, create_studies
from sweeps.studies_command import load_summaries, summary_line
from tests.browser import WAIT_MS
from tests.servers import START_TIMEOUT, _wait_until
from tests.sweeps.helpers import child_runs, new_home, toy_ray, write_spec

ROOT = Path(__file__).resolve().parents[2]


class Sweeps:
    """A home holding a packed Optuna sweep (cells steps = 1 and 2, x by TPE, 4 trials
    each in packs of 2) and, after it, a grid sweep."""

    def __init__(self, home: Path, optuna_id: str, grid_id: str):
        self.home, self.optuna_id, self.grid_id = home, optuna_id, grid_id
        self.url = f"sqlite:///{home}/optuna.db"

    def runs_of(self, cell: int) -> dict[str, Any]:
        """The Optuna sweep's FINISHED configuration runs of ``cell``, by trial key."""
        return {r.data.tags[tracking.TRIAL_KEY]: r for r in child_runs(self.home, self.optuna_id)
                if r.data.tags[tracking.CELL] == str(cell)}


@pytest.fixture(scope="module")
def sweeps(request, tmp_path_factory) -> Iterator[Sweeps]:
    request.getfixturevalue(toy_ray.__name__)
    tmp = tmp_path_factory.mktemp("studies")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("ORTHO_TRACKING_URI", raising=False)
        mp.delenv("ORTHO_OPTUNA_STORAGE", raising=False)
        home = new_home(tmp)
        path = write_spec(tmp, name="searched", fixed={},
                          space={"steps": [1, 2], "x": {"low": 0, "high": 1}}, pack_size=2,
                          search={"kind": "optuna", "sampler": "tpe", "n_trials": 4, "seed": 3})
        searched = run_sweep(str(path), "smoke", home=home, stream=io.StringIO())
        grid = run_sweep(str(write_spec(tmp)), "smoke", home=home, stream=io.StringIO())
        assert searched.done == 8 and grid.done == 4
        yield Sweeps(home, searched.sweep_id, grid.sweep_id)


def _ortho(*args: str) -> tuple[int, str, str]:
    """``ortho ARGS`` in this process: exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "stderr", err)
        status = main(list(args))
    return status, out.getvalue(), err.getvalue()


def test_the_summary_gives_each_cells_trials_and_best_point(sweeps):
    """One line per cell, named by the key that tells the cells apart; its trials as the
    study holds them; its best value and point those of the cell's best MLflow run. Without
    an id, the latest sweep that has studies is shown."""
    status, out, _ = _ortho("sweep", "studies", sweeps.optuna_id, "--home", str(sweeps.home))
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == (f"sweep {sweeps.optuna_id} searched/smoke: 2 Optuna studies in "
                        f"{sweeps.url}, named {sweeps.optuna_id}/cell-<cell>")
    for cell, steps in ((0, 1), (1, 2)):
        study = optuna.load_study(study_name=f"{sweeps.optuna_id}/cell-{cell}",
                                  storage=sweeps.url)
        assert len(study.trials) == 4
        runs = sweeps.runs_of(cell)
        scores = {key: tracking.stored_result(r.data.tags).summary["score"]
                  for key, r in runs.items()}
        best = runs[max(scores, key=scores.__getitem__)]
        score = max(scores.values())
        number = next(t.number for t in study.trials
                      if t.user_attrs[KEY_ATTR] == best.data.tags[tracking.TRIAL_KEY])
        assert lines[1 + cell] == (
            f"  cell-{cell} steps={steps}: 4 trials (4 complete); best score {score:.4g} at "
            f"x={float(best.data.params['x']):.4g} (trial {number})")
    # the command names the store it was given, to be run as it is
    assert lines[3] == (f"browse them with: ortho sweep studies {sweeps.optuna_id} --home "
                        f"{sweeps.home} --dashboard")
    latest = _ortho("sweep", "studies", "--home", str(sweeps.home))
    assert latest == (0, out, ""), "the latest sweep with studies, not the later grid sweep"


def test_a_tie_for_the_best_value_is_told(tmp_path):
    """Optuna names the first trial with the best value; the line says how many others tie,
    since a report may rank those otherwise (by fewer iterations)."""
    url = f"sqlite:///{tmp_path}/optuna.db"
    study = optuna.create_study(storage=url, study_name="20261127-000000-abcd/cell-0",
                                direction="maximize")
    x = optuna.distributions.FloatDistribution(0, 1)
    for value, point in ((9.0, 0.1), (7.0, 0.2), (9.0, 0.3), (9.0, 0.4)):
        study.add_trial(optuna.trial.create_trial(params={"x": point}, distributions={"x": x},
                                                  value=value))
    [summary] = load_summaries(url, "20261127-000000-abcd")
    assert summary_line(summary, "score") == (
        "  cell-0: 4 trials (4 complete); best score 9 at x=0.1 (trial 0; 2 more points tie)")
    study.add_trial(optuna.trial.create_trial(  # x=0.3 proposed again: told, not a tie
        params={"x": 0.3}, distributions={"x": x}, value=9.0, user_attrs={REPEAT_ATTR: True}))
    [summary] = load_summaries(url, "20261127-000000-abcd")
    assert summary_line(summary, "score") == ("  cell-0: 5 trials (4 complete, 1 repeated); "
                                              "best score 9 at x=0.1 (trial 0; 2 more points "
                                              "tie)")
    study.add_trial(optuna.trial.create_trial(params={"x": 0.5}, distributions={"x": x},
                                              value=10.0))
    [summary] = load_summaries(url, "20261127-000000-abcd")
    assert summary_line(summary, "score") == (
        "  cell-0: 6 trials (5 complete, 1 repeated); best score 10 at x=0.5 (trial 5)")
    study.add_trial(optuna.trial.create_trial(params={"x": 0.6}, distributions={"x": x},
                                              value=10.0))
    [summary] = load_summaries(url, "20261127-000000-abcd")
    assert summary_line(summary, "score").endswith("(trial 5; 1 more point ties)")
    for interrupted in (True, False):  # cut short by a Ctrl-C / failed
        study.add_trial(optuna.trial.create_trial(
            params={"x": 0.7}, distributions={"x": x}, state=optuna.trial.TrialState.FAIL,
            user_attrs={INTERRUPTED_ATTR: True} if interrupted else {}))
    [summary] = load_summaries(url, "20261127-000000-abcd")
    assert summary_line(summary, "score").startswith(
        "  cell-0: 9 trials (6 complete, 1 failed, 1 interrupted, 1 repeated); ")


def test_a_key_one_cell_leaves_to_the_trainer_shows_the_trainer_s_default(tmp_path):
    """Groups ``{task: adding}`` and ``{}``: the second cell's study records the task its
    runs train (synthetic's default, temporal order), not None; a study that recorded only
    its own cell's keys (before 2026-12-06) shows such a key as ``(default)``."""
    path = write_spec(tmp_path, name="grouped", experiment="synthetic",
                      metric={"name": "val_error", "mode": "min"}, fixed={"max_iters": 10},
                      space={"lr": {"low": 1e-4, "high": 1e-2, "log": True}},
                      groups=[{"fixed": {"task": "adding"}}, {}],
                      search={"kind": "optuna", "sampler": "tpe", "n_trials": 2, "seed": 0})
    spec = resolve(load_spec(str(path)), "smoke")
    url, sweep_id = f"sqlite:///{tmp_path}/optuna.db", "20261206-000000-abcd"
    studies = create_studies(url, sweep_id, build_plan(spec), spec.optuna, spec.mode)
    assert [s.cell for s in load_summaries(url, sweep_id)] == [
        {"task": "adding"}, {"task": "temporal_order"}]
    studies.by_cell[1].set_user_attr(CELL_ATTR, {"max_iters": 10, "data_seed": 0, "seed": 0})
    line = summary_line(load_summaries(url, sweep_id)[1], "val_error")
    assert line == "  cell-1 task=(default): 0 trials; none complete yet"


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


@pytest.mark.slow
def test_the_dashboard_serves_the_studies_on_loopback_until_ctrl_c(sweeps, browser, tmp_path):
    """optuna-dashboard, started by the command on a free port, lists the sweep's two
    studies; each holds its cell's 4 trials with the trial keys and values of the cell's
    MLflow runs; it listens on 127.0.0.1 only; a browser shows the studies and a trial's
    key; Ctrl-C stops it with exit status 130 and one line, as it stops `ortho ui`."""
    from playwright.sync_api import expect

    log = tmp_path / "dashboard.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "sweeps.cli", "sweep", "studies", sweeps.optuna_id,
             "--home", str(sweeps.home), "--dashboard", "--port", "0"],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        serving = re.compile(r"Optuna dashboard on http://127\.0\.0\.1:(\d+) ")
        _wait_until(lambda: serving.search(log.read_text()) is not None, "the dashboard",
                    lambda: server.poll() is None, log, START_TIMEOUT)
        match = serving.search(log.read_text())
        assert match is not None
        url = f"http://127.0.0.1:{match[1]}"
        listening = [c.laddr for c in psutil.Process(server.pid).net_connections("inet")
                     if c.status == psutil.CONN_LISTEN]
        assert [a.ip for a in listening] == ["127.0.0.1"]
        studies = {s["study_name"]: s["study_id"] for s in _get(f"{url}/api/studies")[
            "study_summaries"]}
        assert set(studies) == {f"{sweeps.optuna_id}/cell-0", f"{sweeps.optuna_id}/cell-1"}
        for cell in (0, 1):
            trials = _get(f"{url}/api/studies/{studies[f'{sweeps.optuna_id}/cell-{cell}']}"
                          "?after=0")["trials"]
            told = {next(a["value"] for a in t["user_attrs"] if a["key"] == KEY_ATTR):
                    t["values"][0] for t in trials}
            stored = {key: tracking.stored_result(run.data.tags).summary["score"]
                      for key, run in sweeps.runs_of(cell).items()}
            assert told == {key: pytest.approx(score) for key, score in stored.items()}

        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(f"{url}/dashboard/")
        for name in studies:
            expect(page.get_by_role("heading", name=f"{studies[name]}. {name}",
                                    exact=True)).to_be_visible(timeout=WAIT_MS)
        page.goto(f"{url}/dashboard/studies/{studies[f'{sweeps.optuna_id}/cell-0']}/trials")
        expect(page.get_by_text("4 Trials")).to_be_visible(timeout=WAIT_MS)
        study = optuna.load_study(study_name=f"{sweeps.optuna_id}/cell-0", storage=sweeps.url)
        first = study.trials[0].user_attrs[KEY_ATTR]  # the trial the page opens on
        assert first in sweeps.runs_of(0)
        expect(page.get_by_text(f"{KEY_ATTR} {first}", exact=True)).to_be_visible(
            timeout=WAIT_MS)
        page.close()
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=30) == 130  # interrupted, as ortho ui and every command
    assert log.read_text().splitlines()[-1] == "ortho sweep studies: interrupted"


def test_bad_input_is_refused_naming_the_field(sweeps, tmp_path, capsys):
    home = str(sweeps.home)
    grid_only = new_home(tmp_path)
    status, _, err = _ortho("sweep", "studies", "--home", str(grid_only))
    assert status == 1 and err.startswith("ortho sweep studies: no sweep with Optuna studies in ")
    status, out, err = _ortho("sweep", "studies", sweeps.grid_id, "--home", home)
    assert status == 2 and out == ""
    assert err.startswith(f"ortho sweep studies: invalid sweep: expected a sweep with Optuna cells "
                          f"({sweeps.grid_id} searches a grid only")
    elsewhere = tmp_path / "other.db"
    optuna.create_study(storage=f"sqlite:///{elsewhere}", study_name="unrelated")
    status, _, err = _ortho("sweep", "studies", sweeps.optuna_id, "--home", home,
                            "--optuna-storage", f"sqlite:///{elsewhere}")
    assert status == 2 and "invalid optuna_storage" in err and "cell-<cell>" in err
    status, _, err = _ortho("sweep", "studies", sweeps.optuna_id, "--home", home,
                            "--optuna-storage", f"sqlite:///{tmp_path}/missing.db")
    assert status == 2 and "invalid optuna_storage" in err and "does not exist" in err
    assert not (tmp_path / "missing.db").exists()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        status, _, err = _ortho("sweep", "studies", sweeps.optuna_id, "--home", home,
                                "--dashboard", "--port", port)
    assert status == 2 and "invalid port" in err and f"127.0.0.1:{port}" in err
    assert "--port picks another, --port 0 a free one" in err
    for port in ("70000", "-1", "abc"):  # the socket's OverflowError was a traceback, exit 1
        with pytest.raises(SystemExit) as exit_:
            main(["sweep", "studies", sweeps.optuna_id, "--home", home, "--dashboard",
                  f"--port={port}"])
        assert exit_.value.code == 2
        assert (f"argument --port: expected a port from 0 (any free one) to 65535 (got "
                f"'{port}')") in capsys.readouterr().err
