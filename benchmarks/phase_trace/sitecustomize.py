"""Every Python process of a sweep, timed: imported at start-up (Python imports
``sitecustomize`` from ``sys.path``) by every process whose ``PYTHONPATH`` holds this folder,
which Ray's workers inherit from the driver; inert unless ``ORTHO_TRACE_DIR`` is set.

It times the import of the modules in :data:`WATCH` and the calls of the functions in
:data:`TARGETS` (the first four calls of each, then every 200th), one JSON line
``[label, start, end]`` (``time.time()``) per event into ``$ORTHO_TRACE_DIR/<pid>.jsonl``,
the first line naming the process. ``benchmarks/phase_trace.py`` runs a command so and
prints the events of every process against the driver's last ``run_sweep``.
"""

from __future__ import annotations

import os
import sys
import time

TARGETS: dict[str, tuple[str, ...]] = {
    "sweeps.preflight": ("check_data",),
    "sweeps.pack_size": ("settle",),
    "sweeps.plan": ("build_plan",),
    "sweeps.tracking.layout": ("Tracker.start_sweep", "Tracker.end_sweep", "Tracker.states",
                               "Tracker.configurations", "Tracker.experiment_id"),
    "sweeps.writer": ("launch_writer", "drain_writer", "StartingWriter.ready",
                      "RemoteTracker.claim_all", "RemoteTracker.finish_all",
                      "TrackerActor.__init__", "TrackerActor.claim_all",
                      "TrackerActor.finish_all", "TrackerActor.log_metrics"),
    "sweeps.tune_run": ("execute", "end_stopped_runs", "backfill_failures", "all_ended"),
    "sweeps.status": ("from_mlflow",),
    "sweeps.runner": ("run_sweep", "_run"),
    "sweeps.trial": ("run_trial", "limit_threads"),
    "ortho_core.experiments.isolation": ("train_isolated",),
    "ortho_core.experiments.synthetic": ("train", "initial_weights", "_train_length"),
    "torch.cuda": ("_lazy_init",),
    "ray.tune.tuner": ("Tuner.fit",),
    "ray.tune.trainable.function_trainable": ("FunctionTrainable.setup",
                                              "FunctionTrainable.reset_config"),
}
"""Functions timed (``Class.method`` or a module's function), by defining module: patched
once that module is imported, before anything binds them elsewhere."""
WATCH = frozenset(TARGETS) | {"torch", "ray", "ray.tune", "mlflow", "sqlalchemy"}
"""Modules whose import is timed."""

_DIR = os.environ.get("ORTHO_TRACE_DIR")
if _DIR:
    import functools
    import importlib.abc
    import json
    from typing import Any

    _out = open(os.path.join(_DIR, f"{os.getpid()}.jsonl"), "a", buffering=1)  # noqa: SIM115
    _counts: dict[str, int] = {}

    def _record(label: str, start: float, end: float) -> None:
        _out.write(json.dumps([label, start, end]) + "\n")

    def _timed(label: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            n = _counts[label] = _counts.get(label, 0) + 1
            start = time.time()
            try:
                return fn(*args, **kwargs)
            finally:
                if n <= 4 or n % 200 == 0:
                    _record(f"{label}#{n}", start, time.time())
        return timed

    def _patch(name: str, module: Any) -> None:
        for target in TARGETS.get(name, ()):
            owner_name, _, attr = target.rpartition(".")
            owner = getattr(module, owner_name) if owner_name else module
            fn = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr,
                                                                                  None)
            if fn is None:
                _record(f"missing {name}.{target}", time.time(), time.time())
            else:
                setattr(owner, attr, _timed(f"{name}.{target}", fn))

    class _Finder(importlib.abc.MetaPathFinder):
        """Finds a watched module as the other finders do, and times its execution."""

        def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
            if name not in WATCH:
                return None
            for finder in sys.meta_path:
                if finder is not self and hasattr(finder, "find_spec"):
                    spec = finder.find_spec(name, path, target)
                    if spec is not None:
                        break
            else:
                return None
            run = spec.loader.exec_module

            def exec_module(module: Any) -> None:
                start = time.time()
                try:
                    run(module)
                finally:
                    _record(f"import {name}", start, time.time())
                _patch(name, module)

            spec.loader.exec_module = exec_module
            return spec

    _record("process " + " ".join(sys.argv)[:160], time.time(), time.time())
    sys.meta_path.insert(0, _Finder())
