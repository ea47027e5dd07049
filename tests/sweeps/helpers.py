"""Shared pieces of the sweep tests: toy specs, a fresh tracking home, one Ray per module.

Creating an MLflow SQLite database runs its migrations (seconds on a busy machine), so
:func:`new_home` copies a template made once per test process
(:func:`sweeps.testing.sqlite_store`). :func:`toy_ray` starts one
embedded Ray (2 CPUs) per test module and registers the toy trainer
(``tests.sweeps.toy_experiment``) as experiment ``toy``; the runner reuses that Ray. Its
processes inherit ``OMP_NUM_THREADS`` = :data:`INHERITED_THREADS`, as on a machine that sets
it for every process: Ray then leaves it as it is, so a trial computes with the threads of
its CPUs only if it sizes its thread pool itself.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ortho_core import experiments
from sweeps import tracking
from sweeps.testing import sqlite_store

TOY_MODULE = "tests.sweeps.toy_experiment"

INHERITED_THREADS = 3
"""``OMP_NUM_THREADS`` of the processes of :func:`toy_ray`'s Ray (more than its CPUs)."""

DATA_DIR = os.environ.get("ORTHO_DATA_DIR") or str(
    Path(__file__).resolve().parents[2].parent / "shared" / "data")
"""The datasets: ``$ORTHO_DATA_DIR`` when set, else ``shared/data`` beside the checkout."""


def write_spec(directory: Path, name: str = "toy", **fields: Any) -> Path:
    """A toy spec ``<directory>/<name>.yaml``: 4 values of x, profiles empty; ``fields``
    replace top-level keys."""
    doc: dict[str, Any] = {
        "name": name, "experiment": "toy", "description": "toy sweep",
        "metric": {"name": "score", "mode": "max"},
        "fixed": {"steps": 3}, "space": {"x": [0.1, 0.4, 0.7, 0.9]},
        "resources": {"cpu": 1}, "pack_size": 1,
        "profiles": {"smoke": {}, "cpu": {}, "paper": {}},
    }
    doc.update(fields)
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def new_home(tmp_path: Path) -> Path:
    """An empty sweeps home under ``tmp_path`` with a ready MLflow database."""
    home = tmp_path / "ortho-runs"
    home.mkdir()
    sqlite_store(home)
    return home


def store(home: Path) -> tracking.Tracker:
    """The tracker of the store ``home`` resolves to (``$ORTHO_TRACKING_URI`` if set, else
    its embedded store), as the ``ortho`` commands resolve it."""
    return tracking.tracker(tracking.tracking_uri(None, home))


def child_runs(home: Path, sweep_id: str) -> list[Any]:
    """Active configuration runs of ``sweep_id``."""
    tracker = store(home)
    record = tracker.find_sweep(sweep_id)
    assert record is not None
    return tracker.configurations(record.ref)


@pytest.fixture(scope="module")
def toy_ray() -> Iterator[None]:
    """Experiment ``toy`` registered and an embedded Ray running, for one test module."""
    import ray

    from sweeps.ray_session import start_embedded_ray

    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(experiments.EXPERIMENTS, "toy", TOY_MODULE)
        started = not ray.is_initialized()
        if started:
            with pytest.MonkeyPatch.context() as env:
                env.setenv("OMP_NUM_THREADS", str(INHERITED_THREADS))
                start_embedded_ray(num_cpus=2)
        yield
        if started:
            ray.shutdown()
