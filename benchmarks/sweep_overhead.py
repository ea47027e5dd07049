"""Fixed costs of the sweep runner: the start of a sweep and the overhead of every trial, on
the embedded Ray, tracked in MLflow, with actor reuse.

    python benchmarks/sweep_overhead.py [--trials 20] [--concurrent 1] [--cold-cache]
                                        [--no-baseline]

Runs a grid of ``--trials`` configurations of a trainer that does nothing (one report,
pack size 1) through :func:`sweeps.runner.run_sweep` in this process and prints where the
time goes:

- the start, from ``run_sweep`` to Tune's ``fit()``: Ray's start and the store's creation
  (which run side by side), the parent run and Tune's set-up; and when the sweep's writer,
  launched just before Tune's set-up, was up (Tune starts the trials meanwhile, whose claims
  wait for it: :class:`sweeps.tune_progress.WriterStarted`);
- Tune's ``fit()``: with one trial at a time and a trainer that takes no time,
  ``fit`` / trials is what the runner adds to every trial (claim the MLflow run, log params,
  metrics, CSV and outcome, Tune's scheduling, actor reset), the first actor's start
  included.

Unless ``--no-baseline``, the old start is measured first in a fresh process for
comparison: Ray, then a store built by MLflow's migrations, then a writer waited for, one
after the other. ``--cold-cache`` keeps the store template (:mod:`sweeps.tracking.bootstrap`)
in a new folder, so that this run pays for building it, as the first sweep on a machine does.
The float32 matmul rate is printed beside, since timings here move with the machine's load.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ortho_core.reporting import Outcome, Report, Reporter, Result

PACK_FIELDS = ("device",)
SUMMARY: dict[str, str] = {"score": "the configuration's x"}
"""The summary keys :func:`train` returns (a spec's ``metric.name`` must be one of them)."""
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Config:
    """A configuration that trains nothing."""

    x: float = 0.0
    """Distinguishes the configurations."""
    seed: int = 0
    """Seed (unused)."""
    data_seed: int = 0
    """Data seed (unused)."""
    device: str = "cpu"
    """Device (unused)."""


def planned_steps(config: Config) -> int:
    """The step of a member's one report."""
    return 0


def train(configs: Sequence[Config], reporter: Reporter) -> list[Result]:
    """Report once per member and return."""
    for i, cfg in enumerate(configs):
        reporter(Report(member=i, step=0, metrics={"loss": cfg.x}))
    return [Result(Outcome.UNSOLVED, {"score": c.x}) for c in configs]


OLD_START = """
import json, sys, tempfile, time
t0 = time.perf_counter()
from sweeps.ray_session import start_embedded_ray
start_embedded_ray()
t1 = time.perf_counter()
from mlflow import MlflowClient
uri = f"sqlite:///{tempfile.mkdtemp()}/mlflow.db"
MlflowClient(tracking_uri=uri)
t2 = time.perf_counter()
from sweeps.writer import start_writer
start_writer(uri, "ortho-writer-old-start")
t3 = time.perf_counter()
print(json.dumps({"ray": t1 - t0, "store": t2 - t1, "writer": t3 - t2}))
"""
"""The start before issue 13: Ray, MLflow's own new store, a writer, one after the other."""


def old_start() -> dict[str, float]:
    """:data:`OLD_START` in a fresh process (imports paid as in a sweep); seconds per part."""
    out = subprocess.run([sys.executable, "-c", OLD_START], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


class Clock:
    """Times the runner's parts by wrapping them where the runner looks them up."""

    def __init__(self) -> None:
        self.marks: dict[str, float] = {}
        self.spans: dict[str, float] = {}
        self._undo: list[Callable[[], None]] = []

    def wrap(self, owner: Any, name: str, label: str) -> None:
        """Record how long ``owner.name``'s first call takes."""
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                if label not in self.spans:
                    self.spans[label] = time.perf_counter() - t
                    self.marks[label] = t

        setattr(owner, name, timed)
        self._undo.append(lambda: setattr(owner, name, original))

    def watch_writer(self, owner: Any) -> None:
        """Mark when the first writer ``owner`` (:class:`sweeps.writer.StartingWriter`)
        hands out is up, from a thread waiting on its start (the driver no longer waits)."""
        import ray

        original = owner.__init__

        def watched(starting: Any, *args: Any, **kwargs: Any) -> None:
            original(starting, *args, **kwargs)
            if "writer up" not in self.marks:
                def wait() -> None:
                    ray.wait([starting._placed], timeout=None)
                    self.marks.setdefault("writer up", time.perf_counter())
                threading.Thread(target=wait, daemon=True).start()

        owner.__init__ = watched
        self._undo.append(lambda: setattr(owner, "__init__", original))

    def restore(self) -> None:
        """Unwrap everything."""
        for undo in reversed(self._undo):
            undo()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--concurrent", type=int, default=1)
    parser.add_argument("--cold-cache", action="store_true",
                        help="build the store template anew (the first sweep on a machine)")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip measuring the old start")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="sweep-overhead-") as tmp:
        if args.cold_cache:
            os.environ["ORTHO_CACHE_DIR"] = str(Path(tmp) / "cache")
        old = None if args.no_baseline else old_start()
        final, clock, total = run(Path(tmp), args.trials, args.concurrent)
    assert final.done == args.trials and final.failed == 0, final
    report(clock, total, final.elapsed, args, old)


EXPERIMENT = "noop"
"""The name this module's trainer is registered under while the benchmark runs."""


def noop_spec(trials: int) -> dict[str, Any]:
    """The sweep the benchmark times: ``trials`` configurations of :func:`train`, one per
    trial."""
    return {"name": "noop", "experiment": EXPERIMENT,
            "metric": {"name": "score", "mode": "max"},
            "space": {"x": [i / trials for i in range(trials)]},
            "resources": {"cpu": 1}, "pack_size": 1,
            "profiles": {"smoke": {}, "cpu": {}, "paper": {}}}


def run(tmp: Path, trials: int, concurrent: int) -> tuple[Any, Clock, float]:
    """One sweep of ``trials`` no-op configurations, timed; its final progress, the clock and
    the seconds ``run_sweep`` took."""
    import ray

    from ortho_core import experiments
    from sweeps import ray_session, runner, tracking, tune_run, writer
    from sweeps.tracking import bootstrap

    experiments.EXPERIMENTS[EXPERIMENT] = "benchmarks.sweep_overhead"
    (tmp / "noop.yaml").write_text(yaml.safe_dump(noop_spec(trials)))
    clock = Clock()
    clock.wrap(runner, "beside_ray_start", "store thread")
    clock.wrap(ray_session, "start_embedded_ray", "ray")
    clock.wrap(tracking.Tracker, "__init__", "store")
    clock.wrap(bootstrap, "_build", "template")
    clock.wrap(runner.tracking.Tracker, "start_sweep", "parent run")
    clock.wrap(tune_run, "launch_writer", "writer launch")
    clock.watch_writer(writer.StartingWriter)
    clock.wrap(tune_run, "_staging", "fit")  # entered just before Tuner.fit
    clock.wrap(tune_run, "end_stopped_runs", "after fit")  # called just after it
    clock.wrap(ray, "shutdown", "shutdown")
    t0 = time.perf_counter()
    try:
        final = runner.run_sweep(str(tmp / "noop.yaml"), "smoke", home=tmp / "home",
                                 max_concurrent=concurrent, stream=io.StringIO())
    finally:
        clock.restore()
    clock.marks["begin"] = t0
    return final, clock, time.perf_counter() - t0


def report(clock: Clock, total: float, tune_elapsed: float, args: argparse.Namespace,
           old: dict[str, float] | None) -> None:
    """Print the breakdown, and the old start beside it."""
    s, m = clock.spans, clock.marks
    start = m["fit"] - m["begin"]
    fit = m["after fit"] - m["fit"]
    ray_store = max(m["ray"] + s["ray"], m["store"] + s["store"]) - m["store thread"]
    writer_up = m["writer up"] - m["writer launch"]
    template = (f"template built in {s['template']:.2f} s" if "template" in s
                else "template cached")
    print(f"start {start:.2f} s (run_sweep until Tune's fit):")
    print(f"  Ray plus store {ray_store:.2f} s: imports both need "
          f"{s['store thread']:.2f} s, then side by side ray.init {s['ray']:.2f} s | "
          f"store {s['store']:.2f} s ({template})")
    print(f"  parent run {s['parent run']:.2f} s; writer up {writer_up:.2f} s after its "
          f"launch, {m['writer up'] - m['fit']:+.2f} s from Tune's fit (not waited for)")
    per_trial = fit * args.concurrent / args.trials
    print(f"fit {fit:.2f} s for {args.trials} trials, {args.concurrent} at a time: "
          f"per-trial overhead {per_trial:.3f} s (trainer time ~0; includes the first "
          "actor's start and imports)")
    print(f"run_sweep {total:.2f} s (Tune's part {tune_elapsed:.2f} s, ray.shutdown "
          f"{s.get('shutdown', 0.0):.2f} s)")
    if old is not None:
        old_ray_store = old["ray"] + old["store"]
        print(f"old start, one after the other (fresh process): ray.init {old['ray']:.2f} s + "
              f"MLflow's migrations {old['store']:.2f} s = {old_ray_store:.2f} s, then writer "
              f"{old['writer']:.2f} s")
        print(f"Ray plus store: {old_ray_store:.2f} s -> {ray_store:.2f} s "
              f"({old_ray_store / ray_store:.1f}x); store alone {old['store']:.2f} s -> "
              f"{s['store']:.2f} s; driver's wait for the writer {old['writer']:.2f} s -> "
              "none")
    from timing import sgemm_rate  # torch, imported only now

    print(f"sgemm {sgemm_rate(3, time.perf_counter) / 1e9:.0f} GFLOP/s (2048², float32) at "
          "the end")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    # the trials' Ray workers import this module's trainer (benchmarks.sweep_overhead) too,
    # from whatever folder the script was started in
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    main()
