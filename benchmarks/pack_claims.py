"""What the sweep's writer spends on a pack's claims, metric values and endings into a SQLite
store's tables (:meth:`sweeps.tracking.Tracker.claim_all`, ``StoreTables.write_metrics``,
``Tracker.finish_all``), with its three shortcuts against without them, in one process:

    python benchmarks/pack_claims.py [--pack 896] [--rounds 3]

- MLflow's check of each param, remembered per (name, value)
  (:func:`sweeps.tracking.tables.checked_param`), against checking every param of every
  member twice (once before any run is replaced, once as its rows are made); and of each
  metric value, its name's checks remembered (:func:`~sweeps.tracking.tables.check_metric`),
  against MLflow's ``_validate_metric`` of every value;
- the rows handed to SQLite's ``executemany`` under a statement compiled once
  (``StoreTables._many``), against SQLAlchemy's ``execute``, which builds each row's
  parameters anew.

Each round claims a pack of ``--pack`` configurations of the ``synthetic`` trainer (its 36
params, a trial's tags), writes their reports (20 steps of 9 metrics each, in one write; the
writer makes it in several), then ends them as a trial does (the metrics CSV, the result's
summaries and a ``stages`` artifact), once with the shortcuts and once without (the order
alternating between rounds), each into a sweep of its own in one fresh store. Printed: the
best of each, and the ratios. A writer makes these calls one at a time,
so a GPU sweep's four packs that start together wait for each other's claims.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ortho_core.config import to_dict
from ortho_core.experiments.synthetic import Config
from ortho_core.reporting import Outcome, Result
from sweeps import tracking
from sweeps.testing import sqlite_store, start_sweep
from sweeps.tracking import tables


@contextmanager
def without_shortcuts() -> Iterator[None]:
    """Every param and metric value checked by MLflow in full each time (its checks imported
    once, as the claims and writes imported them before), every row through SQLAlchemy's
    ``execute``."""
    from mlflow.utils.validation import _validate_metric, _validate_param

    memo, metric, many = tables.checked_param, tables.check_metric, tables.StoreTables._many

    def execute(self: Any, conn: Any, insert: Any, rows: Any) -> None:
        if rows:
            conn.execute(insert, rows)

    def param(key: str, value: str) -> tuple[str, str]:
        checked = _validate_param(key, value)
        return checked.key, checked.value

    tables.checked_param = tracking.layout.checked_param = param
    tables.check_metric = lambda m: _validate_metric(m.key, m.value, m.timestamp, m.step)
    tables.StoreTables._many = execute
    try:
        yield
    finally:
        tables.checked_param = tracking.layout.checked_param = memo
        tables.check_metric = metric
        tables.StoreTables._many = many


def one_pack(tracker: tracking.Tracker, sweep: str, k: int) -> tuple[float, float, float]:
    """Seconds to claim a pack of ``k`` configurations in a new sweep, to write their
    reports, and to end them."""
    from mlflow.entities import Metric

    ref = start_sweep(tracker, "pack-claims", sweep, profile="paper")
    params = to_dict(Config())
    node = tracking.node_tags()
    items = [(f"{sweep}-{i:05d}", {**params, "seed": i}, {**node, "ortho.cell": "0"})
             for i in range(k)]
    start = time.perf_counter()
    claims = tracker.claim_all(ref, items)
    claimed = time.perf_counter()
    rows = [(step, {f"metric_{j}": 0.1 * j + step for j in range(9)})
            for step in range(100, 2100, 100)]
    now = int(time.time() * 1000)
    batches = {c.run_id: [Metric(key, value, now + step, step) for step, values in rows
                          for key, value in values.items()] for c in claims}
    assert tracker.tables is not None
    reported = time.perf_counter()
    tracker.tables.write_metrics(batches)
    written = time.perf_counter()
    result = Result(Outcome.SOLVED, {"max_solved": 50.0, "iters_to_solve": 900.0},
                    {"stages": [{"seq_len": 10, "outcome": "solved", "iters": 900}]})
    ended = time.perf_counter()
    tracker.finish_all([(c.run_id, result, 2000, rows) for c in claims])
    return claimed - start, written - reported, time.perf_counter() - ended


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pack", type=int, default=896, help="configurations in a pack")
    p.add_argument("--rounds", type=int, default=3, help="packs with and without each")
    args = p.parse_args()
    tracker = tracking.tracker(sqlite_store(Path(tempfile.mkdtemp()) / "store"))
    one_pack(tracker, "warm-up", 8)
    best: dict[str, list[float]] = {"with": [1e9] * 3, "without": [1e9] * 3}
    for r in range(args.rounds):
        for name in (("with", "without") if r % 2 == 0 else ("without", "with")):
            if name == "without":
                with without_shortcuts():
                    times = one_pack(tracker, f"r{r}-{name}", args.pack)
            else:
                times = one_pack(tracker, f"r{r}-{name}", args.pack)
            best[name] = [min(a, b) for a, b in zip(best[name], times, strict=True)]
            print(f"  round {r} {name:>7}: claims {times[0]:.3f} s, values {times[1]:.3f} s, "
                  f"endings {times[2]:.3f} s", flush=True)
    for i, what in enumerate(("claims", "metric values (20 x 9 a member)", "endings")):
        print(f"a pack of {args.pack}, {what}: {best['without'][i]:.3f} s without / "
              f"{best['with'][i]:.3f} s with: {best['without'][i] / best['with'][i]:.2f}x")


if __name__ == "__main__":
    main()
