"""``ortho sweep``: arguments, exit statuses, bad input before any work, the job a submit
sends, and run -> status -> resume through the command line."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import pytest

from ortho_core.errors import ConfigError
from sweeps.cli import build_parser, main
from sweeps.runner import PROJECT_ROOT
from sweeps.sweep_command import (
    DEFAULT_PROFILE,
    SUBMIT_EXCLUDES,
    job_request,
    job_spec_argument,
)
from tests.sweeps.helpers import new_home, toy_ray, write_spec


def test_defaults():
    args = build_parser().parse_args(["sweep", "run", "synthetic-max-length"])
    assert (args.profile, args.address, args.tracking_uri, args.home) == (
        DEFAULT_PROFILE, None, None, None)
    assert DEFAULT_PROFILE == "cpu"
    args = build_parser().parse_args(["sweep", "status"])
    assert args.sweep is None


@pytest.mark.parametrize(("argv", "message"), [
    (["sweep", "run", "no-such-spec"], "invalid spec: expected the name of a shipped spec"),
    (["sweep", "run", "synthetic-max-length", "--profile", "huge"], "profiles"),
    (["sweep", "submit", "synthetic-max-length", "--address", "http://127.0.0.1:9",
      "--profile", "huge"], "profiles"),
    (["sweep", "submit", "synthetic-max-length", "--address", "http://127.0.0.1:9",
      "--data-dir", "data"], "data_dir"),
])
def test_bad_input_exits_2_before_any_work(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no ortho-runs, nothing tracked


def test_bad_spec_file_names_field_and_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "broken.yaml"
    spec.write_text("name: broken\nexperiment: synthetic\nmetric: {name: m, mode: max}\n"
                    "fixed: {lr: -1}\nprofiles: {smoke: {}, cpu: {}, paper: {}}\n")
    assert main(["sweep", "run", str(spec), "--profile", "smoke"]) == 2
    err = capsys.readouterr().err
    assert "broken.yaml:4: fixed.lr" in err
    assert not (tmp_path / "ortho-runs").exists()


def test_status_without_sweeps(tmp_path, capsys):
    assert main(["sweep", "status", "--home", str(tmp_path / "empty")]) == 1
    assert "no sweeps yet" in capsys.readouterr().err


def _submit_args(**kw: object) -> argparse.Namespace:
    argv = ["sweep", "submit", "synthetic-max-length", "--address", "http://127.0.0.1:8265"]
    for key, value in kw.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return build_parser().parse_args(argv)


def test_submitted_job_runs_the_sweep_on_the_cluster(monkeypatch):
    monkeypatch.setenv("ORTHO_DATA_DIR", "/work/shared/data")  # this machine's: not passed on
    monkeypatch.delenv("ORTHO_TRACKING_URI", raising=False)
    args = _submit_args(profile="smoke", tracking_uri="http://127.0.0.1:5000",
                        storage="s3://bucket/ray")
    request = job_request(args, PROJECT_ROOT)
    command = shlex.split(request["entrypoint"])
    assert command == ["python", "-m", "sweeps.cli", "sweep", "run", "synthetic-max-length",
                       "--profile", "smoke", "--address", "auto", "--home", "~/ortho-runs",
                       "--tracking-uri", "http://127.0.0.1:5000", "--storage", "s3://bucket/ray"]
    env = request["runtime_env"]
    assert env["working_dir"] == str(PROJECT_ROOT)
    assert {"ortho-runs/", ".git/", "data/"} <= set(env["excludes"]) == set(SUBMIT_EXCLUDES)
    assert env["env_vars"]["ORTHO_TRACKING_URI"] == "http://127.0.0.1:5000"
    assert "ORTHO_DATA_DIR" not in env["env_vars"]
    assert env["env_vars"]["RAY_USAGE_STATS_ENABLED"] == "0"


def test_submit_passes_on_the_clusters_interpreter_and_data_dir():
    args = _submit_args(python="/home/ray/anaconda3/bin/python", data_dir="~/data")
    request = job_request(args, PROJECT_ROOT)
    assert shlex.split(request["entrypoint"])[:3] == ["/home/ray/anaconda3/bin/python", "-m",
                                                      "sweeps.cli"]
    assert request["runtime_env"]["env_vars"]["ORTHO_DATA_DIR"] == "~/data"  # the node's ~
    with pytest.raises(ConfigError, match="data_dir"):
        job_request(_submit_args(data_dir="data"), PROJECT_ROOT)  # relative to what?


def test_submitted_spec_must_ship_with_the_checkout(tmp_path):
    inside = PROJECT_ROOT / "sweeps" / "specs" / "synthetic-max-length.yaml"
    assert job_spec_argument(str(inside), PROJECT_ROOT) == "sweeps/specs/synthetic-max-length.yaml"
    assert job_spec_argument("synthetic-max-length", PROJECT_ROOT) == "synthetic-max-length"
    with pytest.raises(Exception, match="spec"):
        job_spec_argument(str(write_spec(tmp_path)), PROJECT_ROOT)


@pytest.mark.usefixtures(toy_ray.__name__)
def test_run_status_resume_from_the_command_line(tmp_path, capsys):
    spec = write_spec(tmp_path, space={"x": [0.2, 0.9]})
    home = new_home(tmp_path)
    assert main(["sweep", "run", str(spec), "--profile", "smoke", "--home", str(home)]) == 0
    out = capsys.readouterr().out.splitlines()
    sweep_id = out[0].split()[1].rstrip(":")
    assert out[0] == (f"sweep {sweep_id}: toy/smoke, 2 configurations in 2 trials; "
                      f"tracking sqlite:///{home}/mlflow.db")
    assert out[-1].startswith(f"sweep {sweep_id} toy/smoke: 2/2 done, best score 9, finished in ")

    assert main(["sweep", "status", "--home", str(home)]) == 0
    status = capsys.readouterr().out.splitlines()
    assert status[0].startswith(f"sweep {sweep_id} toy/smoke: 2/2 done, best score 9, finished")
    assert status[1] == "  outcomes: solved 1, unsolved 1"

    assert main(["sweep", "resume", sweep_id, "--home", str(home)]) == 0
    assert "2 of 2 configurations done, 0 to run in 0 trials" in capsys.readouterr().out
    assert main(["sweep", "resume", "--home", str(home)]) == 1  # nothing unfinished
    assert "no unfinished sweep" in capsys.readouterr().err
    assert Path(home / "mlflow.db").exists()
