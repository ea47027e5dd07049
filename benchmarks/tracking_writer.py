"""What the sweep's one writer costs a trial (cluster/README.md): trial-like Ray tasks track
configurations straight into the store (the old way: each trial opens it) and through the
writer actor on the driver's node (:mod:`sweeps.writer`), in the same process, same store.

    python benchmarks/tracking_writer.py [--configs 20] [--flushes 10] [--batch 200]
                                         [--tracking-uri URI]

Each task tracks ``--configs`` configurations one after the other: claim a run (params
included), ``--flushes`` metric batches of ``--batch`` values, finish (summaries, CSV,
outcome). Printed, with the ratio writer / direct:

- opening the store: the direct task's first tracker (MLflow's import and the store's
  schema check, once per trial process); through the writer, nothing in the trial (the
  writer opened the store once, when the sweep started: printed apart);
- per configuration: the wall time a trial spends tracking one configuration;
- metric latency: from handing a batch over to its being in the store (``log_metrics`` and,
  through the writer, waiting for it).

The default store is a fresh SQLite database; ``--tracking-uri`` names another (a server).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


class Direct:
    """A :class:`~sweeps.tracking.Tracker` behind the :class:`~sweeps.writer.RemoteTracker`
    calls a trial makes."""

    def __init__(self, uri: str) -> None:
        from sweeps import tracking

        self.tracker = tracking.tracker(uri)
        self.claim, self.finish = self.tracker.claim, self.tracker.finish

    def log_metrics(self, batches: Mapping[str, Sequence[tuple[str, float, int, int]]]) -> None:
        from mlflow.entities import Metric

        for run_id, rows in batches.items():
            self.tracker.log_metrics(run_id, [Metric(*r) for r in rows])

    def sync(self) -> None:
        """Every call above has returned once written."""


def track(make: Any, ref: Any, configs: int, flushes: int, batch: int,
          label: str) -> dict[str, float]:
    """Track ``configs`` configurations with the tracker ``make()`` builds; timings (s)."""
    from ortho_core.reporting import Outcome, Result

    start = time.perf_counter()
    tracker = make()
    opened = time.perf_counter() - start
    latencies, per_config = [], []
    for c in range(configs):
        began = time.perf_counter()
        claim = tracker.claim(ref, f"{label}-{c}", {"lr": 0.01, "seed": c}, {})
        rows = []
        for f in range(flushes):
            step = (f + 1) * batch
            values = [("loss", 1.0 / (step + i), int(time.time() * 1000), step + i)
                      for i in range(batch)]
            rows.append((step, {"loss": values[-1][1]}))
            sent = time.perf_counter()
            tracker.log_metrics({claim.run_id: values})
            tracker.sync()
            latencies.append(time.perf_counter() - sent)
        tracker.finish(claim.run_id, Result(Outcome.SOLVED, {"score": float(c)}),
                       rows[-1][0], rows)
        per_config.append(time.perf_counter() - began)
    return {"open": opened, "config": sorted(per_config)[len(per_config) // 2],
            "latency": sorted(latencies)[len(latencies) // 2]}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=20)
    parser.add_argument("--flushes", type=int, default=10)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--tracking-uri", default=None)
    args = parser.parse_args(argv)

    import ray

    from sweeps import tracking
    from sweeps.ray_session import start_embedded_ray
    from sweeps.testing import sqlite_store, start_sweep
    from sweeps.writer import RemoteTracker, start_writer

    with tempfile.TemporaryDirectory(prefix="tracking-writer-") as tmp:
        uri = args.tracking_uri or sqlite_store(Path(tmp) / "home")
        ref = start_sweep(tracking.tracker(uri), "writer-benchmark", f"bench-{time.time():.0f}",
                          profile="smoke")
        start_embedded_ray(num_cpus=1)
        began = time.perf_counter()
        writer = start_writer(uri, "ortho-writer-benchmark")
        writer_start = time.perf_counter() - began
        work = (ref, args.configs, args.flushes, args.batch)
        task = ray.remote(num_cpus=1)(track)
        direct = ray.get(task.remote(lambda: Direct(uri), *work, "direct"))
        through = ray.get(task.remote(lambda: RemoteTracker(writer), *work, "writer"))
        ray.shutdown()
    print(f"store {tracking.redact(uri) if args.tracking_uri else 'SQLite (fresh)'}; "
          f"{args.configs} configurations x {args.flushes} batches x {args.batch} values, "
          "one trial process each way")
    print(f"{'':34}{'direct':>10}{'writer':>10}{'ratio':>8}")
    print(f"{'opening the store, per trial (s)':34}{direct['open']:>10.3f}"
          f"{through['open']:>10.3f}{through['open'] / direct['open']:>8.2f}")
    for key, name in (("config", "tracking one configuration (ms)"),
                      ("latency", "metric latency, median (ms)")):
        print(f"{name:34}{direct[key] * 1e3:>10.1f}{through[key] * 1e3:>10.1f}"
              f"{through[key] / direct[key]:>8.2f}")
    print(f"the writer's own start, once per sweep: {writer_start:.2f} s")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
