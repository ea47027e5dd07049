"""A trial whose pack has one failing member (:func:`sweeps.trial.run_trial`): that member's
run ends FAILED with its traceback, the others FINISHED with their results, and the trial
ends normally. In-process: the trial's writer is the tracker itself, and Tune's report is
caught (the path through Ray is that of every other trial)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from sweeps import tracking
from sweeps.testing import start_sweep
from sweeps.trial import TrialContext, run_trial
from sweeps.writer import TrackerActor
from tests.sweeps.helpers import child_runs, new_home, store


class DirectTracker(TrackerActor):
    """What a trial tracks with, without Ray: the writer's methods called in this process."""

    def sync(self) -> None:
        """Nothing is in flight."""


def test_a_failing_member_fails_its_own_run_and_the_others_finish(tmp_path, monkeypatch):
    """The issue's pack (``variant=plain,oinit``, ``pretrain_max_steps=2``), small."""
    from ray import tune

    home = new_home(tmp_path)
    uri = tracking.tracking_uri(None, home)
    ref = start_sweep(store(home), "synthetic", "20260101-000000-aaaa", profile="smoke",
                      n_configs=3, metric="max_seq_len_solved")
    small = {"protocol": "fixed", "seq_len": 10, "hidden": 16, "max_iters": 20,
             "eval_every": 10, "val_size": 50, "pretrain_max_steps": 2}
    members = [{"key": variant, "cell": i, "params": {**small, "variant": variant}}
               for i, variant in enumerate(("plain", "oinit", "open"))]
    members[2]["params"]["penalty"] = 0.01
    reports: list[dict[str, Any]] = []
    monkeypatch.setattr("sweeps.trial.RemoteTracker", DirectTracker)
    monkeypatch.setattr(tune, "report", reports.append)
    run_trial({"members": members}, TrialContext(
        writer=uri, sweep=ref, module="ortho_core.experiments.synthetic",
        metric="max_seq_len_solved", mode="max"))
    (final,) = reports
    assert (final["configs"], final["trained"], final["configs_failed"]) == (3, 3, 1)
    assert math.isnan(final["member_values"]["oinit"])  # Optuna is told FAIL
    assert final["member_values"]["plain"] in (0.0, 10.0)
    runs = {r.data.params["variant"]: r for r in child_runs(home, ref.sweep_id)}
    failed = runs["oinit"]
    assert (failed.info.status, failed.data.tags[tracking.OUTCOME]) == ("FAILED", "failed")
    trace = store(home).client.download_artifacts(failed.info.run_id, tracking.TRACEBACK,
                                                  str(tmp_path))
    text = Path(trace).read_text()
    assert "pretrain_tol: orthogonal pre-training did not reach" in text
    assert "member 1: 2 steps" in text
    for variant in ("plain", "open"):
        run = runs[variant]
        assert run.info.status == "FINISHED"
        assert run.data.tags[tracking.OUTCOME] in ("solved", "unsolved")
        assert run.data.metrics["total_iters"] == 20
        history = store(home).client.get_metric_history(run.info.run_id, "train_loss")
        assert [m.step for m in history] == [10, 20]
