"""The sweep that ``benchmarks/sweep_overhead.py`` times passes the spec checks that every
sweep passes (issue 13's fixed costs are measured with it): its stand-in trainer declares the
summary key its metric names, as :func:`sweeps.spec.resolve` requires of every experiment.
The benchmark itself starts Ray and is not run here."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from benchmarks import sweep_overhead
from ortho_core import experiments
from sweeps.plan import build_plan
from sweeps.spec import load_spec, resolve


def test_the_overhead_benchmarks_sweep_resolves(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.setitem(experiments.EXPERIMENTS, sweep_overhead.EXPERIMENT,
                        "benchmarks.sweep_overhead")
    path = tmp_path / "noop.yaml"
    path.write_text(yaml.safe_dump(sweep_overhead.noop_spec(3)))
    spec = resolve(load_spec(str(path)), "smoke")
    assert spec.metric == "score"
    plan = build_plan(spec)
    assert [[m.params["x"] for m in pack] for pack in plan.packs] == [[0.0], [1 / 3], [2 / 3]]
