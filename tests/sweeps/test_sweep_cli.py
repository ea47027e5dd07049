"""``ortho sweep``: arguments, exit statuses, bad input before any work (unknown or malformed
sweep ids, a sweep still running), the job a submit sends and what it prints, and run ->
status -> resume through the command line."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from ortho_core.errors import ConfigError
from sweeps import contract, lookup, runner, tracking
from sweeps.cli import build_parser, main
from sweeps.runner import PROJECT_ROOT
from sweeps.status import rate
from sweeps.sweep_command import (
    DEFAULT_PROFILE,
    SUBMIT_EXCLUDES,
    job_request,
    job_spec_argument,
)
from sweeps.testing import drive_from, start_sweep
from tests.servers import free_port
from tests.sweeps.helpers import DATA_DIR, child_runs, new_home, store, toy_ray, write_spec


def test_defaults():
    args = build_parser().parse_args(["sweep", "run", "synthetic-max-length"])
    assert (args.profile, args.address, args.tracking_uri, args.home) == (
        DEFAULT_PROFILE, None, None, None)
    assert DEFAULT_PROFILE == "cpu"
    args = build_parser().parse_args(["sweep", "status"])
    assert args.sweep is None


def test_a_job_server_where_nothing_answers_is_bad_input(tmp_path, monkeypatch, capsys):
    """Told apart from a job that failed (exit 1): nothing was submitted."""
    monkeypatch.chdir(tmp_path)
    port = free_port()
    assert main(["sweep", "submit", "synthetic-max-length", "--profile", "smoke", "--address",
                 f"http://127.0.0.1:{port}"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"ortho sweep submit: invalid address: expected a Ray cluster's job server (its dashboard, "
        f"port 8265 by default) that answers (connection refused at 127.0.0.1:{port}) (got "
        f"'http://127.0.0.1:{port}')")


def test_a_spec_with_pack_size_auto_is_checked_here_without_planning(tmp_path, monkeypatch,
                                                                       capsys):
    """Its pack size is measured on the cluster: the check here stops at the spec's errors
    (a plan at ``auto`` raised a traceback), and so comes to the next refusal."""
    doc = yaml.safe_load((PROJECT_ROOT / "sweeps/specs/synthetic-max-length.yaml").read_text())
    doc["profiles"]["smoke"]["pack_size"] = "auto"
    spec = tmp_path / "synthetic-max-length.yaml"
    spec.write_text(yaml.safe_dump(doc))
    assert main(["sweep", "submit", str(spec), "--profile", "smoke", "--address",
                 f"http://127.0.0.1:{free_port()}"]) == 2
    assert capsys.readouterr().err.startswith(
        "ortho sweep submit: invalid spec: expected a spec inside ")


@pytest.mark.parametrize(("argv", "message"), [
    (["sweep", "run", "no-such-spec"], "invalid spec: expected the name of a shipped spec"),
    (["sweep", "run", "synthetic-max-length", "--profile", "huge"],
     "invalid profile: expected one of the profiles of synthetic-max-length.yaml: smoke, "
     "cpu, paper (got 'huge')"),
    (["sweep", "submit", "synthetic-max-length", "--address", "http://127.0.0.1:9",
      "--profile", "huge"], "invalid profile: expected one of the profiles"),
    (["sweep", "submit", "synthetic-max-length", "--address", "http://127.0.0.1:9",
      "--data-dir", "data"], "data_dir"),
    (["sweep", "run", "synthetic-max-length", "--tracking-uri", "foo://bar"],
     "invalid tracking_uri: expected an MLflow store"),
    (["sweep", "status", "--tracking-uri", "mlruns"], "invalid tracking_uri"),
    (["sweep", "resume", "--tracking-uri", "file:///tmp/mlruns"], "invalid tracking_uri"),
    (["report", "synthetic-max-length", "--tracking-uri", "sqlite://m.db"],
     "invalid tracking_uri"),
])
def test_bad_input_exits_2_before_any_work(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no ortho-runs, nothing tracked


@pytest.mark.parametrize(("argv", "command", "option"), [
    (["sweep", "run", "synthetic-max-length", "--profle", "smoke"], "ortho sweep run", "--profle"),
    (["report", "synthetic-max-length", "--profle", "smoke"], "ortho report", "--profle"),
    (["sweep", "run", "synthetic-max-length", "--prof", "smoke"], "ortho sweep run", "--prof"),
    (["data", "download", "mnist", "--data", "/tmp"], "ortho data download", "--data")])
def test_an_unknown_option_is_named_with_the_command_it_was_typed_to(argv, command, option,
                                                                   capsys):
    """argparse names the top-level parser (``ortho: error: ...``) for options a
    sub-command's parser left over; an abbreviation of an option (``--prof`` for
    ``--profile``, ``--data`` for ``--data-dir``) is unknown, not taken as the option."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (f"{command}: error: unrecognized arguments: {option} "
                                       f"{argv[-1]} (see {command} --help)\n")


@pytest.mark.parametrize("argv", [
    ["sweep", "run", "synthetic-max-length", "--profile", "smoke"], ["sweep", "status"],
    ["sweep", "resume"], ["sweep", "studies"], ["report", "synthetic-max-length"]])
def test_a_home_that_is_a_file_is_bad_input(argv, tmp_path, capsys):
    home = tmp_path / "home"
    home.write_text("not a folder")
    assert main([*argv, "--home", str(home)]) == 2
    assert f"invalid home: expected a folder (or a path where one can be made), not a file " \
           f"(got '{home}')" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["home"]


@pytest.fixture
def no_ray(monkeypatch):
    """Fail the test if a sweep gets as far as opening its store beside Ray's start."""
    from sweeps import runner

    def started(*args: object) -> None:
        pytest.fail("the store was opened and Ray started")

    monkeypatch.setattr(runner, "beside_ray_start", started)
    monkeypatch.setattr(runner, "ray_session", started)


@pytest.mark.parametrize("home", ["/proc/ortho-home", "{tmp}/a-file/home"])
@pytest.mark.parametrize("argv", [["sweep", "run", "synthetic-max-length", "--profile", "smoke"],
                                  ["reproduce", "manchev", "--profile", "smoke"]])
def test_a_home_that_cannot_be_made_is_bad_input(argv, home, tmp_path, monkeypatch, capsys,
                                                 no_ray):
    """``/proc``: root may write anywhere, yet no folder can be made there. Refused before
    any work, not with ``FileNotFoundError`` from the store's lock (``reproduce``: before
    its first child, and no page written)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("")
    home = home.format(tmp=tmp_path)
    assert main([*argv, "--home", home]) == 2
    err = capsys.readouterr().err
    command = " ".join(["ortho", *argv[:2 if argv[0] == "sweep" else 1]])
    why = ("cannot make /proc/ortho-home: no such file or directory" if home.startswith("/proc")
           else f"{tmp_path / 'a-file'} is a file")
    assert err == (f"{command}: invalid home: expected a folder this user can write in, or a "
                   f"path where one can be made ({why}) (got '{home}')\n")
    assert [p.name for p in tmp_path.iterdir()] == ["a-file"]  # no reports/, no ortho-runs/


def test_a_sqlite_store_whose_folder_cannot_be_made_is_bad_input(tmp_path, capsys, no_ray):
    home = tmp_path / "home"
    assert main(["sweep", "run", "synthetic-max-length", "--profile", "smoke", "--home",
                 str(home), "--tracking-uri", "sqlite:////proc/ortho-store/mlflow.db"]) == 2
    assert capsys.readouterr().err == (
        "ortho sweep run: invalid tracking_uri: expected a SQLite file in a folder this user "
        "can write in, or where one can be made (cannot make /proc/ortho-store: no such file "
        "or directory) (got 'sqlite:////proc/ortho-store/mlflow.db')\n")
    assert not home.exists()


@pytest.mark.parametrize(("storage", "why"), [
    ("/proc/ortho-ray", "cannot make /proc/ortho-ray: no such file or directory"),
    ("{tmp}/a-file", "{tmp}/a-file is a file"),
    ("{tmp}/a-file/ray", "{tmp}/a-file is a file"),
    ("file:///proc/ortho-ray", "cannot make /proc/ortho-ray: no such file or directory"),
    ("bogus://x/ray", "unrecognized filesystem type in URI: bogus://x/ray"),
    ("file:relative/ray", None),  # a folder of that name here, made and removed again
])
def test_a_storage_tune_could_not_write_is_bad_input_before_ray(storage, why, tmp_path,
                                                                monkeypatch, capsys, no_ray):
    """Ray's FileNotFoundError or pyarrow's ArrowInvalid came once the sweep was tracked,
    leaving it interrupted; now nothing is tracked and Ray does not start."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("")
    storage = storage.format(tmp=tmp_path)
    home = tmp_path / "home"
    argv = ["sweep", "run", "synthetic-max-length", "--profile", "smoke", "--home", str(home),
            "--storage", storage]
    if why is None:
        with pytest.raises(pytest.fail.Exception, match="Ray started"):
            main(argv)
    else:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("ortho sweep run: invalid storage: expected a folder"), err
        assert err.endswith(f" ({why.format(tmp=tmp_path)}) (got '{storage}')\n"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # no home, nothing tracked


def test_an_object_store_this_machine_cannot_open_is_bad_input(tmp_path, monkeypatch, capsys,
                                                               no_ray):
    """What pyarrow says (here without the network it would ask), or that it said nothing in
    time; through Ray Client only an unknown scheme is refused here, the cluster opening the
    storage (and its local paths being the cluster's)."""
    from sweeps import tune_run

    home = tmp_path / "home"
    argv = ["sweep", "run", "synthetic-max-length", "--profile", "smoke", "--home", str(home),
            "--storage", "s3://ortho-bucket/ray"]
    answers: list[object] = [OSError("When resolving region for bucket 'ortho-bucket': AWS "
                                     "Error NETWORK_CONNECTION\nmore"), None]
    monkeypatch.setattr(tune_run, "_opened", lambda uri, timeout: answers.pop(0))
    for why in ("when resolving region for bucket 'ortho-bucket': AWS Error NETWORK_CONNECTION",
                f"no answer within {tune_run.STORAGE_TIMEOUT_S:g} s"):
        assert main(argv) == 2
        assert capsys.readouterr().err == (
            "ortho sweep run: invalid storage: expected a folder, or the URI of an object store "
            "pyarrow can open here, such as s3://bucket/ray or gs://bucket/ray "
            f"({why}) (got 's3://ortho-bucket/ray')\n")
    assert not home.exists()
    monkeypatch.setattr(tune_run, "_opened", lambda uri, timeout: OSError("unreachable"))
    tune_run.check_storage("s3://ortho-bucket/ray", home, here=False)
    tune_run.check_storage("/proc/ortho-ray", home, here=False)
    monkeypatch.undo()
    with pytest.raises(ConfigError, match="unrecognized filesystem type"):
        tune_run.check_storage("bogus://x/ray", home, here=False)
    with pytest.raises(ConfigError, match=r"^storage: expected a file URI of an absolute path"):
        tune_run.check_storage("file://relative", home, here=False)


def test_a_storage_that_can_be_made_is_accepted_and_left_as_it_was(tmp_path):
    from sweeps.tune_run import check_storage

    check_storage(str(tmp_path / "new" / "ray"), tmp_path / "home")
    check_storage(None, tmp_path / "home")  # HOME/ray
    check_storage((tmp_path / "file-uri").as_uri(), tmp_path / "home")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "ray").write_text("")
    with pytest.raises(ConfigError, match=f"is a file\\) \\(got '{tmp_path}/home/ray'\\)"):
        check_storage(None, tmp_path / "home")


def test_submit_refuses_an_unknown_storage_scheme_before_it_ships(monkeypatch, capsys):
    _fake_cluster(monkeypatch, _FakeJobClient)
    _FakeJobClient.submitted = {}
    assert main(["sweep", "submit", "synthetic-max-length", "--profile", "smoke", "--address",
                 "http://head:8265", "--storage", "bogus://x/ray", "--no-wait"]) == 2
    assert capsys.readouterr().err.startswith(
        "ortho sweep submit: invalid storage: expected a folder, or the URI of an object store "
        "pyarrow can open there")
    assert _FakeJobClient.submitted == {}
    assert main(["sweep", "submit", "synthetic-max-length", "--profile", "smoke", "--address",
                 "http://head:8265", "--storage", "/proc/the-heads-disk", "--no-wait"]) == 0


def test_bad_spec_file_names_field_and_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "broken.yaml"
    spec.write_text("name: broken\nexperiment: synthetic\nmetric: {name: val_loss, mode: min}\n"
                    "fixed: {lr: -1}\nprofiles: {smoke: {}, cpu: {}, paper: {}}\n")
    assert main(["sweep", "run", str(spec), "--profile", "smoke"]) == 2
    err = capsys.readouterr().err
    assert "broken.yaml:4: fixed.lr" in err
    assert not (tmp_path / "ortho-runs").exists()


@pytest.mark.parametrize(("command", "operands"), [
    ("sweep status", []), ("sweep status", ["20261121-070102-ab12"]), ("sweep resume", []),
    ("sweep studies", []), ("report", ["synthetic-max-length"])])
def test_a_home_without_a_store_is_bad_input_to_every_command_that_reads_sweeps(
        tmp_path, capsys, command, operands):
    """Each names the field and the file it looked for, with status 2, and creates nothing."""
    assert main([*command.split(), *operands, "--home", str(tmp_path / "empty")]) == 2
    assert capsys.readouterr().err == (
        f"ortho {command}: invalid tracking_uri: expected an MLflow store holding sweeps (none "
        "here: run `ortho sweep run SPEC` first, or pass --tracking-uri or --home) (got "
        f"'sqlite:///{tmp_path / 'empty' / 'mlflow.db'}')\n")
    assert not (tmp_path / "empty").exists()


def _tracked_sweep(home: Path, sweep_id: str, spec: str = "toy") -> tracking.SweepRef:
    """A sweep of ``spec`` (profile smoke) as its driver, this process, starts it."""
    t = store(home)
    return start_sweep(t, spec, sweep_id, profile="smoke", n_configs=2, metric="score")


def test_an_unknown_sweep_is_bad_input_that_lists_the_sweeps(tmp_path, capsys):
    home = new_home(tmp_path)
    _tracked_sweep(home, "20261120-100000-aaaa", "ff-mnist")
    done = _tracked_sweep(home, "20261121-100000-bbbb")
    store(home).end_sweep(done, "FINISHED", {})
    for action in ("status", "resume"):
        assert main(["sweep", action, "20261121-100000-cccc", "--home", str(home)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"ortho sweep {action}: invalid sweep: expected the id of a "
                              f"sweep in sqlite:///{home}/"), err
        assert ("(the latest: 20261121-100000-bbbb toy/smoke finished; "
                "20261120-100000-aaaa ff-mnist/smoke running) (got '20261121-100000-cccc')") \
            in err


@pytest.mark.parametrize("sweep_id", ["zzz", "toy.yaml.bak", "a'b", "a\\b",
                                      "x' or tags.`ortho.role` = 'sweep",
                                      '20261121-100000-bbbb"', "20261121-100000-BBBB"])
def test_a_malformed_sweep_id_is_bad_input(sweep_id, tmp_path, capsys):
    home = new_home(tmp_path)
    _tracked_sweep(home, "20261121-100000-bbbb")
    for action in ("status", "resume"):
        assert main(["sweep", action, sweep_id, "--home", str(home)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"ortho sweep {action}: invalid sweep: expected a sweep id (UTC "
                              "date-time-4 hex digits, e.g. 20261121-070102-ab12) or the name "
                              f"of a spec with sweeps in sqlite:///{home}/"), err
        assert err.endswith(f"(the latest: 20261121-100000-bbbb toy/smoke running) (got "
                            f"{sweep_id!r})\n"), err
        assert "Traceback" not in err
    assert store(home).find_sweep("20261121-100000-bbbb").status == "RUNNING"  # untouched


def test_a_spec_name_finds_that_specs_latest_sweep(tmp_path, capsys):
    home = new_home(tmp_path)
    running = _tracked_sweep(home, "20261120-100000-aaaa", "ff-mnist")  # this process drives it
    time.sleep(0.01)
    done = _tracked_sweep(home, "20261121-100000-bbbb", "ff-mnist")
    store(home).end_sweep(done, "FINISHED", {})
    time.sleep(0.01)
    toy = _tracked_sweep(home, "20261122-100000-cccc")
    store(home).end_sweep(toy, "FINISHED", {})
    for name in ("ff-mnist", "sweeps/specs/ff-mnist.yaml", str(tmp_path / "ff-mnist.yml")):
        assert main(["sweep", "status", name, "--home", str(home)]) == 0
        out = capsys.readouterr().out
        assert out.startswith("sweep 20261121-100000-bbbb ff-mnist/smoke: "), out
    # resume: the spec's latest unfinished sweep, not the store's latest (toy) nor its latest
    assert main(["sweep", "resume", "ff-mnist", "--home", str(home)]) == 2
    assert capsys.readouterr().err.startswith(
        "ortho sweep resume: invalid sweep: expected a sweep whose driver has stopped: "
        f"{running.sweep_id} (ff-mnist/smoke) is still running")
    # a spec whose sweeps all finished: its latest (its failed configurations are retried)
    assert lookup.find(store(home), "toy", unfinished=True).ref == toy
    assert main(["sweep", "status", "lcw-deep-mlp", "--home", str(home)]) == 2
    assert "invalid sweep: expected a sweep id" in capsys.readouterr().err
    time.sleep(0.01)
    _tracked_sweep(home, "20261123-100000-dddd", "λ-sweep+v2")  # any name a file can have
    assert main(["sweep", "status", "λ-sweep+v2.yaml", "--home", str(home)]) == 0
    assert capsys.readouterr().out.startswith("sweep 20261123-100000-dddd λ-sweep+v2/smoke: ")


def test_resume_refuses_a_sweep_that_is_still_running(tmp_path, capsys):
    home = new_home(tmp_path)
    ref = _tracked_sweep(home, "20261121-100000-bbbb")  # driven by this (live) process
    in_flight = store(home).claim(ref, "k", {}, {})
    for argv in (["20261121-100000-bbbb"], []):  # by id, and the latest unfinished
        assert main(["sweep", "resume", *argv, "--home", str(home)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("ortho sweep resume: invalid sweep: expected a sweep whose driver "
                              "has stopped: 20261121-100000-bbbb (toy/smoke) is still running "
                              f"(driver {socket.gethostname()}:"), err
        assert "pass --force to resume it anyway" in err
    [run] = store(home).configurations(ref)  # nothing deleted
    assert (run.info.run_id, run.info.status) == (in_flight.run_id, "RUNNING")
    assert main(["sweep", "status", "--home", str(home)]) == 0
    assert capsys.readouterr().out.startswith(
        "sweep 20261121-100000-bbbb toy/smoke: 0/2 done, 1 running, ")

    dead = subprocess.Popen(["true"])
    dead.wait()
    drive_from(store(home), ref, f"{socket.gethostname()}:{dead.pid}")
    assert main(["sweep", "status", "--home", str(home)]) == 0
    assert capsys.readouterr().out.startswith(
        "sweep 20261121-100000-bbbb toy/smoke: 0/2 done, interrupted (its driver lost) after "
        "at least ")


def _resumable_sweep(home: Path, sweep_id: str) -> tracking.SweepRef:
    """A sweep of synthetic-max-length/smoke with one configuration run in flight, whose
    driver is gone: what ``ortho sweep resume`` continues (no Ray needed to make it)."""
    from sweeps.spec import load_spec, resolve

    spec = resolve(load_spec("synthetic-max-length"), "smoke")
    t = store(home)
    tags = tracking.sweep_tags(spec=spec.name, profile="smoke", spec_sha256=spec.sha256,
                               code={tracking.GIT_SHA: "unknown"}, metric=spec.metric,
                               mode=spec.mode, n_configs=8)
    texts = {tracking.RESOLVED_ARTIFACT: spec.text,
             f"{tracking.SPEC_ARTIFACT_DIR}/{Path(spec.source).name}":
                 Path(spec.source).read_text()}
    ref = t.start_sweep(t.experiment_id(spec.name, home), sweep_id, tags, texts)
    t.claim(ref, "k", {}, {})
    dead = subprocess.Popen(["true"])
    dead.wait()
    drive_from(t, ref, f"{socket.gethostname()}:{dead.pid}")
    return ref


@pytest.mark.parametrize("storage", ["/proc/ortho-ray", "bogus://x/ray"])
def test_resume_refuses_a_storage_tune_could_not_write_before_ray(storage, tmp_path, capsys,
                                                                  no_ray):
    home = new_home(tmp_path)
    ref = _resumable_sweep(home, "20261121-100000-bbbb")
    assert main(["sweep", "resume", "--home", str(home), "--storage", storage]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ortho sweep resume: invalid storage: expected a folder"), err
    assert err.endswith(f" (got '{storage}')\n")
    [run] = store(home).configurations(ref)  # nothing deleted, the sweep not reopened
    assert run.info.status == "RUNNING"
    assert store(home).find_sweep(ref.sweep_id).status == "RUNNING"


def _submit_args(**kw: object) -> argparse.Namespace:
    argv = ["sweep", "submit", "synthetic-max-length", "--address", "http://127.0.0.1:8265"]
    for key, value in kw.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return build_parser().parse_args(argv)


def test_submitted_job_runs_the_sweep_on_the_cluster(monkeypatch):
    monkeypatch.setenv("ORTHO_DATA_DIR", DATA_DIR)  # this machine's: not passed on
    monkeypatch.delenv("ORTHO_TRACKING_URI", raising=False)
    args = _submit_args(profile="smoke", tracking_uri="http://127.0.0.1:5000",
                        storage="s3://bucket/ray")
    request = job_request(args, PROJECT_ROOT)
    command = shlex.split(request["entrypoint"])
    assert command == ["python", "-m", "sweeps.cli", "sweep", "run", "synthetic-max-length",
                       "--profile", "smoke", "--address", "auto", "--home", "~/ortho-runs",
                       "--storage", "s3://bucket/ray"]  # the tracking URI: in env_vars only
    env = request["runtime_env"]
    assert env["working_dir"] == str(PROJECT_ROOT)
    assert env["excludes"] == SUBMIT_EXCLUDES
    shipped = _shipped(env["excludes"])
    assert not any(shipped(PROJECT_ROOT / p) for p in ("data/mnist.npz", "ortho-runs/mlflow.db",
                                                         ".git/HEAD", "sweeps/__pycache__/a.pyc"))
    code = [p for package in ("ortho_core", "sweeps", "analysis")
            for p in (PROJECT_ROOT / package).rglob("*.py") if "__pycache__" not in p.parts]
    assert PROJECT_ROOT / "ortho_core" / "data" / "mnist.py" in code
    assert all(shipped(p) for p in [*code, PROJECT_ROOT / "pyproject.toml"])
    # The shipped copy has no .git: the commit and the dirty flag travel in the environment.
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
    status = subprocess.run(["git", "status", "--porcelain"], cwd=PROJECT_ROOT,
                            capture_output=True, text=True, check=True).stdout
    assert env["env_vars"]["ORTHO_GIT_SHA"] == head
    assert env["env_vars"]["ORTHO_GIT_DIRTY"] == ("true" if status.strip() else "false")
    assert env["env_vars"]["ORTHO_TRACKING_URI"] == "http://127.0.0.1:5000"
    assert "ORTHO_DATA_DIR" not in env["env_vars"]
    assert env["env_vars"]["RAY_USAGE_STATS_ENABLED"] == "0"
    # ray job stop: a Ctrl-C to the driver, and time to end its runs, before SIGKILL
    assert env["env_vars"]["RAY_JOB_STOP_SIGNAL"] == "SIGINT"
    assert int(env["env_vars"]["RAY_JOB_STOP_WAIT_TIME_S"]) >= 30


def _shipped(excludes: list[str]) -> Callable[[Path], bool]:
    """Whether Ray ships a file of the checkout, by Ray's own matcher of ``excludes``."""
    from ray._private.runtime_env.packaging import _get_excludes

    excluded = _get_excludes(PROJECT_ROOT, excludes)
    return lambda path: not any(excluded(p) for p in (path, *path.parents)
                                if p.is_relative_to(PROJECT_ROOT) and p != PROJECT_ROOT)


class _FakeJobClient:
    """Stands for Ray's ``JobSubmissionClient``: keeps what was submitted."""

    submitted: ClassVar[dict[str, Any]] = {}

    def __init__(self, address: str) -> None:
        self.address = address

    def submit_job(self, **request: Any) -> str:
        _FakeJobClient.submitted = request
        return "raysubmit_1"


def _fake_cluster(monkeypatch, client: type) -> None:
    """Jobs go to ``client``, a fake of Ray's job client, at any address (answering)."""
    from ray import job_submission

    from sweeps import ray_session

    monkeypatch.setattr(job_submission, "JobSubmissionClient", client)
    monkeypatch.setattr(ray_session, "check_job_server", lambda address: None)


def test_submit_prints_no_credentials(monkeypatch, capsys):
    _fake_cluster(monkeypatch, _FakeJobClient)
    monkeypatch.delenv("ORTHO_OPTUNA_STORAGE", raising=False)
    uri = "http://mlflow.ortho.svc:5000"
    assert main(["sweep", "submit", "synthetic-max-length", "--profile", "smoke",
                 "--address", "http://admin:s3cret@head:8265", "--tracking-uri", uri,
                 "--no-wait"]) == 0
    out = capsys.readouterr().out
    assert "submitted job raysubmit_1 to http://admin:***@head:8265: python -m sweeps.cli" in out
    assert ("stop it (as a Ctrl-C stops a sweep) with: ray job stop --address "
            "http://admin:***@head:8265 raysubmit_1") in out
    assert "s3cret" not in out
    request = _FakeJobClient.submitted
    assert uri not in request["entrypoint"]  # Ray lists entrypoints with the jobs
    assert request["runtime_env"]["env_vars"]["ORTHO_TRACKING_URI"] == uri  # the job needs it


class _BusyJobClient(_FakeJobClient):
    """A cluster whose job agent registers only after Ray's job API has refused twice."""

    refusals: ClassVar[int] = 0

    def submit_job(self, **request: Any) -> str:
        if _BusyJobClient.refusals < 2:
            _BusyJobClient.refusals += 1
            raise RuntimeError("Request failed with status code 500: No available agent to "
                               "submit job, please try again later.")  # Ray's own wording
        return super().submit_job(**request)


@pytest.mark.parametrize("waits", [True, False])
def test_submit_tries_again_while_the_clusters_job_agent_is_not_ready(monkeypatch, capsys,
                                                                       waits):
    from sweeps import sweep_command

    _fake_cluster(monkeypatch, _BusyJobClient)
    monkeypatch.setattr(sweep_command, "AGENT_RETRY_SECONDS", 0.01)
    monkeypatch.setattr(sweep_command, "AGENT_WAIT_SECONDS", 30.0 if waits else 0.0)
    _BusyJobClient.refusals, _FakeJobClient.submitted = 0, {}
    status = main(["sweep", "submit", "synthetic-max-length", "--profile", "smoke",
                   "--address", "http://127.0.0.1:8265", "--no-wait"])
    out, err = capsys.readouterr()
    if waits:
        assert status == 0 and "submitted job raysubmit_1" in out
        assert err.count("the cluster has no job agent ready yet; trying again") == 2
        assert _FakeJobClient.submitted["entrypoint"].startswith("python -m sweeps.cli")
    else:
        assert status == 1 and _FakeJobClient.submitted == {}
        assert "cannot submit to http://127.0.0.1:8265: Request failed with status code 500: " \
               "No available agent to submit job" in err


@pytest.mark.parametrize(("env", "field"), [("ORTHO_TRACKING_URI", "tracking_uri"),
                                            ("ORTHO_OPTUNA_STORAGE", "optuna_storage")])
def test_submit_refuses_a_password_for_the_jobs_environment(monkeypatch, capsys, env, field):
    """Ray's runtime-env agent logs a job's environment on the cluster: a URI with a password
    is refused (exit 2, the field named, the password never printed), nothing submitted;
    from an option (where the spec allows it) as from the environment."""
    from ray import job_submission

    monkeypatch.setattr(job_submission, "JobSubmissionClient", _FakeJobClient)
    _FakeJobClient.submitted = {}
    uri = "postgresql://ortho:hunter2@db.example:5432/mlflow"
    monkeypatch.setenv(env, uri)
    assert main(["sweep", "submit", "synthetic-max-length", "--profile", "smoke",
                 "--address", "http://127.0.0.1:8265", "--no-wait"]) == 2
    err = capsys.readouterr().err
    assert f"invalid {field}:" in err and "ortho:***@db.example" in err and "hunter2" not in err
    assert _FakeJobClient.submitted == {}
    monkeypatch.delenv(env)
    with pytest.raises(ConfigError) as refused:
        job_request(_submit_args(**{field: uri}), PROJECT_ROOT)
    assert refused.value.field == field and "hunter2" not in str(refused.value)


def test_auto_that_means_ray_client_is_refused_as_ray_client_is(monkeypatch, capsys,
                                                                  tmp_path, no_ray):
    """``$RAY_ADDRESS=ray://…`` makes ``auto`` a Ray Client connection, through which a store
    on this disk cannot be written (nor ``--data-dir`` given): refused as ``ray://`` is."""
    from ray._private import services

    monkeypatch.setattr(services, "get_ray_address_from_environment",
                        lambda addr, temp_dir: "ray://10.0.0.9:10001")
    home = tmp_path / "home"
    assert main(["sweep", "run", "synthetic-max-length", "--profile", "smoke", "--home",
                 str(home), "--address", "auto"]) == 2
    assert capsys.readouterr().err.startswith(
        "ortho sweep run: invalid address: expected a cluster address the driver runs on")
    assert not home.exists()


def test_resources_beyond_this_machine_are_refused_at_their_line_before_ray(
        monkeypatch, capsys, tmp_path, no_ray):
    """They were refused once Ray had started (10 s here), naming no line."""
    from sweeps import runner
    from sweeps.ray_session import machine_resources

    assert machine_resources() == {"CPU": float(os.cpu_count() or 1), "GPU": 0.0}
    monkeypatch.setattr(runner, "machine_resources", lambda: {"CPU": 0.5, "GPU": 0.0})
    shipped = PROJECT_ROOT / "sweeps" / "specs" / "synthetic-max-length.yaml"
    line = next(i for i, text in enumerate(shipped.read_text().splitlines(), 1)
                if text.startswith("resources:"))
    home = tmp_path / "home"
    assert main(["sweep", "run", "synthetic-max-length", "--profile", "smoke", "--home",
                 str(home)]) == 2
    assert capsys.readouterr().err == (
        f"ortho sweep run: invalid synthetic-max-length.yaml:{line}: resources.cpu: expected "
        "at most the 0.5 CPUs of this machine, where the sweep starts its Ray (or --address "
        "of a cluster that has them) (got 1.0)\n")
    assert not home.exists()


@pytest.mark.parametrize("option", ["--home", "--tracking-uri", "--storage", "--data-dir",
                                    "--optuna-storage"])
def test_an_empty_value_is_refused_not_read_as_not_given(option, tmp_path, monkeypatch, capsys,
                                                         no_ray):
    """``--home ""`` tracked into the working directory; ``--data-dir ""`` and
    ``--optuna-storage ""`` fell back to their defaults, the latter even on a grid spec."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:  # argparse's exit, as the command line's
        main(["sweep", "run", "synthetic-max-length", "--profile", "smoke", option, ""])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        f"ortho sweep run: error: argument {option}: expected a value, not an empty string "
        "(see ortho sweep run --help)\n")
    assert list(tmp_path.iterdir()) == []


def test_a_data_dir_that_is_no_folder_is_refused_naming_data_dir(tmp_path, capsys, no_ray):
    """It was refused as $ORTHO_DATA_DIR's, naming no field, by the data check."""
    missing = tmp_path / "nowhere"
    assert main(["sweep", "run", "ff-mnist", "--profile", "smoke", "--home",
                 str(tmp_path / "home"), "--data-dir", str(missing)]) == 2
    assert capsys.readouterr().err == (
        "ortho sweep run: invalid data_dir: expected an existing folder holding the datasets "
        f"(got '{missing}')\n")


def test_an_optuna_storage_is_opened_before_ray_and_one_in_memory_refused(tmp_path):
    """A storage that cannot be opened was refused after Ray's start (7.5 s); an in-memory
    one was taken, and the studies went with the driver."""
    from sweeps.spec import load_spec, resolve
    from tests.sweeps.spec.helpers import OPTUNA, write

    spec = resolve(load_spec(write(tmp_path, OPTUNA)), "smoke")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    for url, says in (("garbage", "an Optuna storage URL this driver can open"),
                      ("sqlite://", "a database that outlives this process"),
                      ("sqlite:///:memory:", "a database that outlives this process")):
        with pytest.raises(ConfigError, match=re.escape(says)) as refused:
            runner._study_url(spec, url, uri)
        assert refused.value.field == "optuna_storage"
    assert runner._study_url(spec, None, uri) == f"sqlite:///{tmp_path}/optuna.db"
    assert (tmp_path / "optuna.db").is_file()  # opened, and so made, before Ray starts


def test_optuna_storage_is_refused_for_a_grid_spec(monkeypatch, capsys, tmp_path, no_ray):
    """``--optuna-storage`` for a spec with no Optuna cells: exit 2 naming the field, before
    anything starts (run, resume) or ships (submit); nothing is created."""
    from ray import job_submission

    monkeypatch.setattr(job_submission, "JobSubmissionClient", _FakeJobClient)
    _FakeJobClient.submitted = {}
    studies = f"sqlite:///{tmp_path / 'studies.db'}"
    home = tmp_path / "home"
    for argv in (["run", "synthetic-max-length", "--home", str(home)],
                 ["submit", "synthetic-max-length", "--address", "http://127.0.0.1:8265"]):
        assert main(["sweep", *argv, "--profile", "smoke", "--optuna-storage", studies]) == 2
        assert capsys.readouterr().err == (
            f"ortho sweep {argv[0]}: invalid optuna_storage: expected no Optuna storage for "
            "synthetic-max-length (its cells search a grid only: it keeps no studies) (got "
            f"'{studies}')\n")
    assert _FakeJobClient.submitted == {} and not home.exists()
    resumable = new_home(tmp_path)
    ref = _resumable_sweep(resumable, "20261121-100000-bbbb")
    assert main(["sweep", "resume", "--home", str(resumable), "--optuna-storage", studies]) == 2
    assert "invalid optuna_storage: expected no Optuna storage for synthetic-max-length" in \
        capsys.readouterr().err
    [run] = store(resumable).configurations(ref)  # nothing deleted, the sweep not reopened
    assert run.info.status == "RUNNING"
    assert not (tmp_path / "studies.db").exists()


def test_submit_passes_on_the_clusters_interpreter_and_data_dir():
    args = _submit_args(python="/home/ray/anaconda3/bin/python", data_dir="~/data")
    request = job_request(args, PROJECT_ROOT)
    assert shlex.split(request["entrypoint"])[:3] == ["/home/ray/anaconda3/bin/python", "-m",
                                                      "sweeps.cli"]
    assert request["runtime_env"]["env_vars"]["ORTHO_DATA_DIR"] == "~/data"  # the node's ~
    command = shlex.split(request["entrypoint"])
    assert command[command.index("--data-dir") + 1] == "~/data"  # the job's hints name it
    with pytest.raises(ConfigError, match="data_dir"):
        job_request(_submit_args(data_dir="data"), PROJECT_ROOT)  # relative to what?


def test_submitted_spec_must_ship_with_the_checkout(tmp_path):
    inside = PROJECT_ROOT / "sweeps" / "specs" / "synthetic-max-length.yaml"
    assert job_spec_argument(str(inside), PROJECT_ROOT) == "sweeps/specs/synthetic-max-length.yaml"
    assert job_spec_argument("synthetic-max-length", PROJECT_ROOT) == "synthetic-max-length"
    outside = write_spec(tmp_path)
    with pytest.raises(ConfigError) as refused:
        job_spec_argument(str(outside), PROJECT_ROOT)
    assert refused.value.field == "spec" and str(outside) in str(refused.value)
    assert f"a spec inside {PROJECT_ROOT}" in str(refused.value)


@pytest.mark.usefixtures(toy_ray.__name__)
def test_run_status_resume_from_the_command_line(tmp_path, capsys):
    spec = write_spec(tmp_path, space={"x": [0.2, 0.9]})
    home = new_home(tmp_path)
    begun, begun_at = time.monotonic(), time.time()
    assert main(["sweep", "run", str(spec), "--profile", "smoke", "--home", str(home)]) == 0
    wall = time.monotonic() - begun
    out = capsys.readouterr().out.splitlines()
    sweep_id = out[0].split()[1].rstrip(":")
    assert out[0] == (f"sweep {sweep_id}: toy/smoke, 2 configurations in 2 trials; "
                      f"tracking sqlite:///{home}/mlflow.db")
    assert out[-1].startswith(f"sweep {sweep_id} toy/smoke: 2/2 done, best score 9, finished in ")
    # configurations per hour: the 2 finished over the command's wall time, as MLflow holds it
    parent = store(home).find_sweep(sweep_id)
    seconds = store(home).client.get_run(parent.ref.parent_run_id).data.metrics[
        contract.RUN_SECONDS]
    assert 0 < seconds <= wall
    assert parent.per_hour == pytest.approx(2 / seconds * 3600)
    # the parent run spans the command, from before the first trial to after the last
    children = child_runs(home, sweep_id)
    assert begun_at <= parent.start_time <= min(c.info.start_time for c in children) / 1000
    assert parent.end_time >= max(c.info.end_time for c in children) / 1000
    assert parent.end_time - parent.start_time == pytest.approx(seconds, abs=0.5)
    assert out[-1].endswith(f", {rate(parent.per_hour)}")

    assert main(["sweep", "status", "--home", str(home)]) == 0
    status = capsys.readouterr().out.splitlines()
    assert status[0].startswith(f"sweep {sweep_id} toy/smoke: 2/2 done, best score 9, finished")
    assert status[0].endswith(f", {rate(parent.per_hour)}")
    assert status[1] == "  outcomes: solved 1, unsolved 1"

    assert main(["sweep", "resume", sweep_id, "--home", str(home)]) == 0
    assert "has finished, 2 configurations done; nothing to resume" in capsys.readouterr().out
    assert main(["sweep", "resume", "--home", str(home)]) == 0  # none unfinished: the latest
    assert capsys.readouterr().out == (f"sweep {sweep_id}: toy/smoke has finished, 2 "
                                       "configurations done; nothing to resume\n")
    assert Path(home / "mlflow.db").exists()


def _chained(outer: Exception, inner: Exception) -> Exception:
    try:
        try:
            raise inner
        except Exception as err:
            raise outer from err
    except Exception as err:
        return err


@pytest.mark.parametrize(("error", "why"), [
    (OSError(28, "No space left on device"), "no space left on the device"),
    (_chained(RuntimeError("(sqlite3.OperationalError) attempt to write a readonly database\n"
                           "[SQL: DELETE FROM assessments]"), KeyError("x")),
     "a read-only file or database"),
    (_chained(EOFError("Ran out of input"), OSError(28, "No space left on device")),
     "no space left on the device"),
])
def test_a_store_that_cannot_be_written_ends_in_one_line_exit_1(error, why, monkeypatch, capsys):
    """A full disk or a read-only store, under the store or Ray's files: a traceback before."""
    def fails(args: argparse.Namespace) -> int:
        raise error

    monkeypatch.setattr("sweeps.sweep_command.cmd_status", fails)
    assert main(["sweep", "status"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"ortho sweep status: cannot write: {why} (") and err.count("\n") == 1
    assert "make room or fix the permissions" in err


def test_any_other_error_keeps_its_traceback(monkeypatch):
    def fails(args: argparse.Namespace) -> int:
        raise KeyError("a bug")

    monkeypatch.setattr("sweeps.sweep_command.cmd_status", fails)
    with pytest.raises(KeyError, match="a bug"):
        main(["sweep", "status"])
