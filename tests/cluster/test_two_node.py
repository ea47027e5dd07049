"""The proof of the cluster path (issue 3, item 8b): the smoke sweep of
``synthetic-max-length``, submitted with ``ortho sweep submit`` as a Ray job to a two-node
Ray cluster on 127.0.0.1, tracked by an MLflow server backed by PostgreSQL.

Each node has one CPU and each Tune trial asks for one, so the smoke profile's two trials
(packs) run at once only by taking one node each; the runner stages both at once
(:func:`sweeps.tune_run.staged_trials`), so the Ray node id every child run records
(``ortho.node``) must name both nodes. The job runs this interpreter (``--python``), as it
would the cluster image's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from sweeps import tracking
from sweeps.plan import build_plan
from sweeps.spec import load_spec, resolve
from tests.servers import Listener, MLflowServer, RayCluster, listeners

ROOT = Path(__file__).resolve().parents[2]
SPEC = "synthetic-max-length"

pytestmark = pytest.mark.cluster


def test_smoke_sweep_as_job_runs_on_both_nodes(ray_cluster: RayCluster,
                                                mlflow_server: MLflowServer,
                                                tmp_path: Path) -> None:
    plan = build_plan(resolve(load_spec(SPEC), "smoke"))
    assert plan.n_tune_trials >= len(ray_cluster.nodes)
    log_file = tmp_path / "submit.log"
    with log_file.open("w") as out:
        submit = subprocess.Popen(
            [sys.executable, "-m", "sweeps.cli", "sweep", "submit", SPEC, "--profile", "smoke",
             "--address", ray_cluster.dashboard_url, "--tracking-uri", mlflow_server.uri,
             "--home", str(tmp_path / "home"), "--python", sys.executable],
            cwd=ROOT, env={**os.environ, **ray_cluster.client_env}, stdout=out,
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

    client = MlflowClient(mlflow_server.uri)
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
