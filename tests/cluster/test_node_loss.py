"""A worker node lost mid-sweep (issue 14, item 1): its trial is retried on the other node,
and MLflow holds each configuration exactly once, FINISHED, with its attempt count.

A two-node Ray cluster on 127.0.0.1 of its own (:func:`tests.servers.start_ray_cluster`: the
session's cluster cannot lose a node), one CPU per node, runs a toy sweep of two
configurations, one trial each, asking one CPU each: staged together, one trial runs on each
node. The driver is this process (so that the toy trainer can be registered), tracking into
SQLite on the head's disk, which the worker cannot see: its trials track through the sweep's
writer on the head (:mod:`sweeps.writer`). Once the worker's trial has claimed its run and is
training, every process of the worker node (raylet, workers, agents) is killed with SIGKILL,
as a machine lost without warning. Tune sees the trial's actor die and, with
``max_failures: 1``, starts the trial again, on the head; the retry's claim ends the lost
attempt's run KILLED and moves it to the trash (:meth:`sweeps.tracking.Tracker.retire`).

This process joins the cluster from outside (:func:`joined`), at 127.0.0.1: Ray would swap
that for the machine's outbound address (where the cluster does not listen) unless told that
clusters are local only (``ray_constants.ENABLE_RAY_CLUSTER``, as :mod:`tests.servers` starts
the head).
"""

from __future__ import annotations

import io
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from mlflow.entities import ViewType

from ortho_core import experiments
from sweeps import tracking
from sweeps.runner import run_sweep
from sweeps.testing import sqlite_store
from tests.servers import RayCluster, mount_namespaces, start_ray_cluster
from tests.sweeps.helpers import TOY_MODULE, write_spec

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TRAINING_BEFORE_KILL = 1.0
"""Seconds the worker's trial trains (of its 3) before its node is killed."""


@contextmanager
def joined(cluster: RayCluster) -> Iterator[None]:
    """Let this process's Ray connect to ``cluster`` (its token, its loopback address), and
    forget both afterwards. Ray reads the authentication settings of a process once, when
    it is first imported, and caches its token: both are read again
    (``Config.initialize``, ``reset_cache``, as Ray does when it turns authentication on),
    so that this works after other tests imported Ray, and later tests see their own."""
    from ray._private import ray_constants
    from ray._raylet import AuthenticationTokenLoader, Config

    def reread() -> None:
        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()

    with pytest.MonkeyPatch.context() as patch:
        for name, value in cluster.client_env.items():
            patch.setenv(name, value)
        patch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
        reread()
        try:
            yield
        finally:
            patch.undo()
            reread()


def kill_node_when_training(cluster: RayCluster, uri: str, node: str,
                            lost: dict[str, Any], timeout: float = 240.0) -> None:
    """Wait until a configuration's run on ``node`` is RUNNING (its trial claimed it and
    trains), then SIGKILL every process of the nodes after the head; record in ``lost`` the
    configuration's key and the processes killed."""
    tracker = tracking.tracker(uri)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sweep = tracker.find_sweep()
        runs = tracker.configurations(sweep.ref) if sweep is not None else []
        training = [r for r in runs if r.data.tags.get(tracking.NODE) == node
                    and r.info.status == "RUNNING"]
        if training:
            time.sleep(TRAINING_BEFORE_KILL)
            lost["key"] = training[0].data.tags[tracking.TRIAL_KEY]
            lost["killed"] = cluster.isolated_pids()
            for pid in lost["killed"]:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            return
        time.sleep(0.2)


def test_a_lost_worker_s_trial_is_retried_and_each_configuration_tracked_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reason = mount_namespaces()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)
    uri = sqlite_store(tmp_path / "store")
    spec = write_spec(tmp_path, fixed={"steps": 10, "sleep": 0.3}, space={"x": [0.3, 0.8]},
                      max_failures=1)
    with start_ray_cluster() as cluster, joined(cluster):
        head, worker = (cluster.node_ids()[name] for name in cluster.nodes)
        lost: dict[str, Any] = {}
        killer = threading.Thread(target=kill_node_when_training,
                                  args=(cluster, uri, worker, lost), daemon=True)
        killer.start()
        out = io.StringIO()
        final = run_sweep(str(spec), "smoke", address=cluster.gcs_address, tracking_uri=uri,
                          home=tmp_path / "home", stream=out)
        killer.join(timeout=10)
        assert lost, f"no trial ran on the worker node:\n{out.getvalue()}"
        assert lost["killed"] and cluster.isolated_pids() == set()

    assert (final.state, final.done, final.failed) == ("finished", 2, 0), out.getvalue()
    assert "resume with" not in out.getvalue()
    tracker = tracking.tracker(uri)
    record = tracker.find_sweep(final.sweep_id)
    assert record is not None and record.status == "FINISHED"

    runs = {r.data.tags[tracking.TRIAL_KEY]: r for r in tracker.configurations(record.ref)}
    assert len(runs) == 2 and lost["key"] in runs
    assert {r.info.status for r in runs.values()} == {"FINISHED"}
    assert {float(r.data.params["x"]): r.data.tags[tracking.OUTCOME]
            for r in runs.values()} == {0.3: "unsolved", 0.8: "solved"}
    retried = runs[lost["key"]]
    assert retried.data.tags[tracking.ATTEMPT] == "2"
    assert retried.data.tags[tracking.NODE] == head
    assert retried.data.metrics["value"] == pytest.approx(float(retried.data.params["x"]))
    (other,) = (r for k, r in runs.items() if k != lost["key"])
    assert other.data.tags[tracking.ATTEMPT] == "1"

    trashed = tracker.client.search_runs([record.ref.experiment_id],
                                         f"tags.`{tracking.PARENT}` = "
                                         f"'{record.ref.parent_run_id}'",
                                         run_view_type=ViewType.DELETED_ONLY)
    assert [(r.data.tags[tracking.TRIAL_KEY], r.data.tags[tracking.ATTEMPT],
             r.data.tags[tracking.NODE], r.info.status) for r in trashed] == \
        [(lost["key"], "1", worker, "KILLED")]
