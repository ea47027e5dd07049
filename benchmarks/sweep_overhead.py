"""Per-trial overhead of the sweep runner: trivial trials on the embedded Ray, tracked in
MLflow, with actor reuse.

    python benchmarks/sweep_overhead.py [--trials 20] [--concurrent 1]

Runs a grid of ``--trials`` configurations of a trainer that does nothing (one report,
pack size 1) and prints the sweep's Tune time (``fit()`` and the bookkeeping around it) per
trial: with one trial at a time, (Tune time − trainer time) / trials is the cost the runner
adds to every trial (claim the MLflow run, log params, metrics, CSV and outcome, Tune's
scheduling, actor reset). Ray's start and MLflow's database creation are excluded and
printed apart.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from ortho_core.reporting import Outcome, Report, Reporter, Result

PACK_FIELDS = ("device",)


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


def train(configs: Sequence[Config], reporter: Reporter) -> list[Result]:
    """Report once per member and return."""
    for i, cfg in enumerate(configs):
        reporter(Report(member=i, step=0, metrics={"loss": cfg.x}))
    return [Result(Outcome.UNSOLVED, {"score": c.x}) for c in configs]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--concurrent", type=int, default=1)
    args = parser.parse_args(argv)

    from ortho_core import experiments
    from sweeps import tracking
    from sweeps.ray_session import start_embedded_ray
    from sweeps.runner import run_sweep

    experiments.EXPERIMENTS["noop"] = "benchmarks.sweep_overhead"
    spec = {"name": "noop", "experiment": "noop", "metric": {"name": "score", "mode": "max"},
            "space": {"x": [i / args.trials for i in range(args.trials)]},
            "resources": {"cpu": 1}, "pack_size": 1,
            "profiles": {"smoke": {}, "cpu": {}, "paper": {}}}
    with tempfile.TemporaryDirectory(prefix="sweep-overhead-") as tmp:
        (Path(tmp) / "noop.yaml").write_text(yaml.safe_dump(spec))
        t0 = time.perf_counter()
        start_embedded_ray(num_cpus=args.concurrent)
        t1 = time.perf_counter()
        tracking.tracker(tracking.tracking_uri(None, Path(tmp) / "home"))
        t2 = time.perf_counter()
        final = run_sweep(str(Path(tmp) / "noop.yaml"), "smoke", home=Path(tmp) / "home",
                          stream=io.StringIO())
        t3 = time.perf_counter()
    assert final.done == args.trials and final.failed == 0, final
    print(f"ray.init {t1 - t0:.1f} s; MLflow database {t2 - t1:.1f} s; run_sweep "
          f"{t3 - t2:.1f} s of which Tune {final.elapsed:.1f} s for {args.trials} trials, "
          f"{args.concurrent} at a time")
    print(f"per-trial overhead: {final.elapsed * args.concurrent / args.trials:.2f} s "
          "(trainer time ~0; includes each actor's first start and imports)")

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
