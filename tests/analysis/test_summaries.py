"""Every summary a trainer tracked holds only keys its experiment declares in ``SUMMARY``
(what a spec's ``metric`` is checked against): read from the real smoke sweeps of the shipped
specs, so that a key a trainer adds or renames without declaring it fails here, not in a
user's sweep."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ortho_core import experiments
from sweeps import contract
from sweeps.spec import load_spec

pytestmark = pytest.mark.slow

SPECS = ("synthetic-max-length", "ff-mnist", "lcw-deep-mlp", "pixel-mnist", "polyphonic-music",
         "spectral-temporal-gradients", "spectral-init-success", "simplex-direction",
         "deep-orthogonal")
"""The shipped specs whose smoke sweeps the session runs for other tests too (the remaining
one, orth-pretrain-convergence, is checked by its trainer's test)."""


@pytest.mark.parametrize("spec", [pytest.param(s, marks=pytest.mark.smoke_sweep(s))
                                  for s in SPECS])
def test_a_tracked_summary_holds_only_declared_keys(spec: str, smoke_home: Path) -> None:
    client = MlflowClient(tracking_uri=f"sqlite:///{smoke_home / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(spec).experiment_id
    runs = client.search_runs([experiment], f"tags.`{contract.ROLE}` = 'configuration'")
    summaries = [json.loads(run.data.tags[contract.SUMMARY]) for run in runs]
    declared = experiments.get(load_spec(spec).experiment).SUMMARY
    assert load_spec(spec).metric.name in declared
    assert summaries and all(set(summary) <= set(declared) for summary in summaries), (
        sorted({key for summary in summaries for key in summary} - set(declared)))
