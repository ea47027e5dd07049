"""What is left of a trial that died with its Ray actor or node (issue 14, item 1), in every
kind of store: its run never stays RUNNING once nothing trains it. A retry's claim (or a
resume) ends it KILLED before moving it to the trash; after a Tune run with no retry left,
the driver ends it ``failed``, saying why. The cluster test that kills a node is
``tests/cluster/test_node_loss.py``; these are the same endings, without a cluster."""

from __future__ import annotations

from pathlib import Path

from mlflow.entities import ViewType

from ortho_core import experiments
from ortho_core.reporting import Outcome, Result
from sweeps import tracking
from sweeps.plan import build_plan
from sweeps.spec import load_spec, resolve
from sweeps.testing import start_sweep, track
from sweeps.tune_run import backfill_failures
from tests.conftest import Store
from tests.sweeps.helpers import TOY_MODULE, write_spec


def _trashed(t: tracking.Tracker, ref: tracking.SweepRef) -> list[tuple[str, str, str]]:
    """(trial key, attempt, status) of the sweep's runs in the trash, sorted."""
    runs = t.client.search_runs([ref.experiment_id],
                                f"tags.`{tracking.SWEEP_ID}` = '{ref.sweep_id}'",
                                run_view_type=ViewType.DELETED_ONLY)
    return sorted((r.data.tags[tracking.TRIAL_KEY], r.data.tags[tracking.ATTEMPT],
                   r.info.status) for r in runs)


def test_a_run_replaced_while_running_is_ended_killed_first(store: Store) -> None:
    t = tracking.tracker(store.uri)
    ref = start_sweep(t, "lost", "s1", profile="smoke")
    lost = track(t, ref, "retried", {"x": 0.1}, end="running")  # its node died
    track(t, ref, "resumed", {"x": 0.2}, end="running")  # its driver was killed
    failed = track(t, ref, "failed", {"x": 0.3}, end="failed")

    retry = t.claim(ref, "retried", {"x": 0.1}, {})
    assert retry.stored is None and retry.run_id != lost
    assert t.client.get_run(retry.run_id).data.tags[tracking.ATTEMPT] == "2"
    again = t.claim(ref, "retried", {"x": 0.1}, {})  # attempt 2 lost too
    assert t.client.get_run(again.run_id).data.tags[tracking.ATTEMPT] == "3"
    assert t.discard_unfinished(t.states(ref)) == 3  # as a resume does: none had finished
    assert t.configurations(ref) == []
    assert t.client.get_run(failed).info.status == "FAILED"  # not KILLED: it had ended
    assert _trashed(t, ref) == [("failed", "1", "FAILED"), ("resumed", "1", "KILLED"),
                                ("retried", "1", "KILLED"), ("retried", "2", "KILLED"),
                                ("retried", "3", "KILLED")]


def test_runs_left_running_after_tune_are_failed_with_the_reason(
        store: Store, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)
    plan = build_plan(resolve(load_spec(str(write_spec(tmp_path))), "smoke"))
    done, lost, never = (m for pack in plan.packs[:3] for m in pack)
    t = tracking.tracker(store.uri)
    ref = start_sweep(t, "lost", "s1", profile="smoke")
    track(t, ref, done.key, done.params, result=Result(Outcome.SOLVED, {"score": 1.0}))
    track(t, ref, lost.key, lost.params, end="failed")
    track(t, ref, lost.key, lost.params, end="running")  # attempt 2 lost with its node

    assert backfill_failures(t, ref, plan, {tracking.GIT_SHA: "abc"}, t.states(ref))
    runs = {r.data.tags[tracking.TRIAL_KEY]: r for r in t.configurations(ref)}
    assert {k: (r.info.status, r.data.tags[tracking.OUTCOME]) for k, r in runs.items()} == {
        done.key: ("FINISHED", "solved"), lost.key: ("FAILED", "failed"),
        never.key: ("FAILED", "failed"), plan.packs[3][0].key: ("FAILED", "failed")}
    trace = Path(t.client.download_artifacts(runs[lost.key].info.run_id, tracking.TRACEBACK,
                                             str(tmp_path))).read_text()
    assert "(attempt 2)" in trace and "max_failures" in trace
    assert not backfill_failures(t, ref, plan, {}, t.states(ref))  # nothing left to end
    assert "ortho sweep resume" in trace
    assert runs[never.key].data.tags[tracking.GIT_SHA] == "abc"
