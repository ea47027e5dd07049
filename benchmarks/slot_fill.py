"""Configurations finished per hour of a whole profile, its packs filling the trials that run
at once against packs cut at ``pack_size`` alone (issue 13: the figure the project optimises).

Run from the repository root, with the datasets where ``$ORTHO_DATA_DIR`` points:

    python benchmarks/slot_fill.py              # synthetic-max-length, cpu profile, ~15-20 min
    python benchmarks/slot_fill.py --quick      # its smoke profile in packs of at most 3, ~1 min
    python benchmarks/slot_fill.py --spec ff-mnist --profile cpu --pack-size 5

The plan deals a pack shape's configurations into ceil(n / ``pack_size``) packs and then into
more, smaller ones until their number is a multiple of the trials that run at once
(:func:`sweeps.plan.pack_counts`): 18 configurations with ``pack_size: 6`` (this script's
default; the profile's own is 9, two packs that fill the cores either way) on this 2-core
machine train in four packs of 5, 5, 4 and 4, not in three of 6, the last alone while the
other core idles. Both runs sweep the same spec and profile through
:func:`sweeps.runner.run_sweep` into fresh homes in this process (Ray started once, and its
workers by an untimed warm-up sweep first); the second with the plan's trial slots forced to
one, which cuts packs at ``pack_size`` alone. A run's time is ``run_sweep``'s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml
from sweep_throughput import ROOT, run
from timing import sgemm_rate


def main() -> None:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--spec", default="synthetic-max-length", help="a shipped spec")
    p.add_argument("--profile", default="cpu", help="its profile")
    p.add_argument("--pack-size", type=int, default=None,
                   help="the packs' upper bound (default 6, 3 with --quick: sizes at which "
                        "the packs cut at it leave a core idle at the end)")
    p.add_argument("--quick", action="store_true",
                   help="the smoke profile in packs of at most 3 (three packs, or four)")
    args = p.parse_args()
    if args.quick:
        args.profile = "smoke"
    if args.pack_size is None:
        args.pack_size = 3 if args.quick else 6

    from sweeps.ray_session import start_embedded_ray
    from sweeps.spec import load_spec, resolve

    spec = resolve(load_spec(args.spec), args.profile)
    doc = yaml.safe_load(Path(spec.source).read_text())
    pack_size = args.pack_size
    doc["profiles"][args.profile]["pack_size"] = pack_size  # a profile's own overrides the top
    start_embedded_ray()
    print(f"{args.spec}/{args.profile}, pack_size {pack_size}", flush=True)
    print(f"{'packs':<22} {'configs':>7} {'trials':>6} {'wall s':>8} {'configs/h':>9} "
          f"{'load':>5}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="slot-fill-") as tmp:
        warm = yaml.safe_load((ROOT / "sweeps/specs/synthetic-max-length.yaml").read_text())
        run(warm, 4, Path(tmp), "warm-up", profile="smoke")
        for fill in (True, False):
            row = run(doc, pack_size, Path(tmp), f"fill-{fill}", args.profile, fill)
            label = "filling the slots" if fill else "cut at pack_size"
            print(f"{label:<22} {row.configs:>7} {row.trials:>6} {row.seconds:>8.1f} "
                  f"{row.per_hour:>9.0f} {row.load:>5.1f}", flush=True)
            rows.append(row)
    print(f"filling / cut: {rows[0].per_hour / rows[1].per_hour:.2f}x configurations per hour")
    print(f"sgemm {sgemm_rate(3, time.perf_counter) / 1e9:.0f} GFLOP/s (2048², float32) at "
          "the end", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
