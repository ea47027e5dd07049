"""The proof of the cluster path (issues 3 and 11): the smoke sweep of
``synthetic-max-length``, submitted with ``ortho sweep submit`` as a Ray job to a two-node
Ray cluster on 127.0.0.1 whose second node has a disk of its own (``unshare --mount``:
:mod:`tests.servers`), tracked once in the default store (SQLite under ``~/ortho-runs`` on the
head, which the second node cannot see) and once by an MLflow server backed by PostgreSQL.

Each node has one CPU and each Tune trial asks for one, so the smoke profile's two trials
(packs) run at once only by taking one node each; the runner stages both at once
(:func:`sweeps.tune_run.staged_trials`), so the Ray node id every child run records
(``ortho.node``) must name both nodes. Runs of the second node reach the store only through
the sweep's writer on the head (:mod:`sweeps.writer`); had they opened the store themselves,
the default store's runs would be in a database on the second node's disk, and the test
looks there too. The job runs this interpreter (``--python``), as it would the cluster
image's, from this checkout shipped without ``.git``: the commit and dirty flag every run
records are this checkout's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from sweeps import tracking
from sweeps.plan import build_plan
from sweeps.spec import load_spec, resolve
from tests.servers import ISOLATED_HOME, Listener, RayCluster, listeners

ROOT = Path(__file__).resolve().parents[2]
SPEC = "synthetic-max-length"

pytestmark = pytest.mark.cluster


def _git(*args: str) -> str | None:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else None


def checkout_tags() -> dict[str, str]:
    """What every run must record of this checkout (read with git here, not by the code
    under test)."""
    sha, status = _git("rev-parse", "HEAD"), _git("status", "--porcelain")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    if sha is None or status is None:
        return {tracking.GIT_SHA: "unknown", tracking.GIT_DIRTY: "unknown",
                tracking.VERSION: version}
    return {tracking.GIT_SHA: sha.strip(), tracking.GIT_DIRTY: str(bool(status.strip())).lower(),
            tracking.VERSION: version}


@pytest.fixture(params=["default-store", "postgresql-server"])
def cluster_store(request: pytest.FixtureRequest,
                  ray_cluster: RayCluster) -> tuple[list[str], str]:
    """The store a submitted sweep tracks into: the arguments ``ortho sweep submit`` gets for
    it, and its URI as the test reads it."""
    if request.param == "default-store":
        return [], f"sqlite:///{ray_cluster.home / 'ortho-runs' / 'mlflow.db'}"
    server = request.getfixturevalue("mlflow_server")
    return ["--tracking-uri", server.uri], server.uri


def test_smoke_sweep_as_job_tracks_every_configuration_once(
        ray_cluster: RayCluster, cluster_store: tuple[list[str], str], tmp_path: Path) -> None:
    submit_args, uri = cluster_store
    plan = build_plan(resolve(load_spec(SPEC), "smoke"))
    assert plan.n_tune_trials >= len(ray_cluster.nodes)
    expected_code = checkout_tags()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORTHO_")}
    log_file = tmp_path / "submit.log"
    with log_file.open("w") as out:
        submit = subprocess.Popen(
            [sys.executable, "-m", "sweeps.cli", "sweep", "submit", SPEC, "--profile", "smoke",
             "--address", ray_cluster.dashboard_url, *submit_args, "--python", sys.executable],
            cwd=ROOT, env={**env, **ray_cluster.client_env}, stdout=out,
            stderr=subprocess.STDOUT)
        # While the job runs, its driver and the trials' workers listen too: on 127.0.0.1.
        seen: set[Listener] = set()
        deadline = time.monotonic() + 900
        while submit.poll() is None and time.monotonic() < deadline:
            seen.update(listeners(ray_cluster.processes.pids()))
            time.sleep(0.5)
        submit.kill()
        returncode = submit.wait()
    log = log_file.read_text()
    assert returncode == 0, log
    assert [s for s in seen if not s.loopback] == []
    assert {s.process for s in seen} >= {"gcs_server", "raylet"}
    assert "SUCCEEDED" in log
    sweep_id = re.search(r"^sweep (\S+): ", log, re.MULTILINE)
    assert sweep_id is not None, log

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(SPEC)
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id],
                              f"tags.`{tracking.SWEEP_ID}` = '{sweep_id.group(1)}'",
                              max_results=1000)
    parents = [r for r in runs if tracking.PARENT not in r.data.tags]
    children = [r for r in runs if tracking.PARENT in r.data.tags]
    assert len(parents) == 1
    parent = parents[0]
    assert parent.data.tags[tracking.PROFILE] == "smoke"
    assert parent.info.status == "FINISHED"
    assert len(children) == plan.n_configs
    assert {r.data.tags[tracking.PARENT] for r in children} == {parent.info.run_id}
    assert len({r.data.tags[tracking.TRIAL_KEY] for r in children}) == plan.n_configs
    assert {r.info.status for r in children} == {"FINISHED"}
    assert {r.data.tags[tracking.OUTCOME] for r in children} <= {"solved", "unsolved",
                                                                 "diverged"}
    assert {r.data.tags[tracking.NODE_IP] for r in children} == {"127.0.0.1"}
    assert {r.data.tags[tracking.NODE] for r in children} == \
        set(ray_cluster.node_ids().values())
    for run in (parent, *children):
        assert {k: run.data.tags.get(k) for k in expected_code} == expected_code

    # The second node really had a disk of its own, and nothing of the sweep is on it.
    isolated = ray_cluster.isolated_pids()
    assert isolated, "the second node's processes share this process's mount namespace"
    view = Path(f"/proc/{min(isolated)}/root")
    assert not (view / str(ray_cluster.home).lstrip("/")).exists()
    assert not (view / str(tmp_path).lstrip("/")).exists()
    assert (view / ISOLATED_HOME.lstrip("/")).is_dir()
    assert list((view / "tmp").rglob("mlflow.db")) == []
