"""The most packing can gain on a whole tracked sweep of ``synthetic-max-length`` on one core:
each length's packed iteration against its members one at a time, weighted by the iterations
the sweep's configurations trained at that length (issue 13).

Run from the repository root, on a store that holds such a sweep:

    ortho sweep run synthetic-max-length --profile cpu --home H      # ~7 min on 2 cores
    python benchmarks/sweep_ceiling.py --home H                      # ~2 min
    python benchmarks/sweep_ceiling.py --home H --sweep ID --pack-size 28

``benchmarks/pack_ceiling.py`` bounds one iteration at a few lengths. A sweep of this spec
trains its members through a curriculum of lengths (10, 20, … until one fails), so where its
time goes depends on where its members stopped: each member's ``stages`` artifact records the
iterations it trained at each length, and a member gives the same iterations in any pack, so
a sweep tracked packed or one configuration per trial gives the same weights.

Per length T the script times one iteration of a pack of one, t(1), and of a pack of K, t(K)
(the SRNN at 100 hidden units, batch 20, :func:`pack_ceiling.synthetic_step`, timed
alternately on one thread unless ``--threads``), and measures the pack's time in its matrix
products alone (:func:`pack_ceiling.matmul_seconds`). Over the sweep, with n_T the
iterations trained at T:

- the pack's speed-up, Σ n_T·t(1) / Σ n_T·t(K)/K: what packing saves if every iteration ran in
  a full pack of K (the sweep's packs shrink as members leave a length, so it gains less);
- the bound, Σ n_T·t(1) / Σ n_T·m(K)/K with m(K) the products' time: the speed-up if all
  but the products (elementwise work, the update, the interpreter) cost nothing. The products
  are the FLOPs of K members, which no pack shares.

Validation, pre-training and a sweep's fixed costs are not in either figure. Validation is a
few per cent of a configuration's time at the ``cpu`` profile (``benchmarks/eval_share.py``):
a share e of it bounds the whole sweep's ratio by bound / (1 − e) even if packing made
validation free.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter

from pack_ceiling import matmul_seconds, synthetic_step
from timing import clock_of, parser, seconds_per_call

SPEC = "synthetic-max-length"


def iterations_by_length(home: str, sweep_id: str | None) -> tuple[str, str, Counter[int]]:
    """The sweep's id, its profile, and the iterations its configurations trained at each
    length (the latest run of each trial key, from its ``stages`` artifact)."""
    from analysis.load import artifact_text, child_runs, find_sweep, raw_frame, select_latest
    from analysis.store import open_store, resolve_tracking_uri

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    client = open_store(resolve_tracking_uri(None, home))
    sweep = find_sweep(client, SPEC, sweep_id)
    runs = select_latest(raw_frame(child_runs(client, sweep)))
    iters: Counter[int] = Counter()
    for run_id in runs["run_id"]:
        text = artifact_text(client, run_id, "stages.json")
        if text is None:
            raise SystemExit(f"run {run_id} of sweep {sweep.sweep_id} has no stages artifact")
        for stage in json.loads(text):
            iters[int(stage["seq_len"])] += int(stage["iters"])
    return sweep.sweep_id, sweep.profile, iters


def main() -> None:
    p = parser(__doc__ or "", repeats=3, quick="0.05 s per timing, one repeat")
    p.add_argument("--home", required=True, help="the store's home (as `ortho sweep run`)")
    p.add_argument("--sweep", default=None, help="the sweep's id (default: the latest)")
    p.add_argument("--pack-size", type=int, default=None,
                   help="K (default: the pack_size of the sweep's profile)")
    args = p.parse_args()
    args.threads = args.threads or 1
    clock = clock_of(args)
    min_time, repeats = (0.05, 1) if args.quick else (0.5, args.repeats)

    from ortho_core.errors import ConfigError
    from sweeps.spec import load_spec, resolve

    try:
        sweep_id, profile, iters = iterations_by_length(args.home, args.sweep)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from err
    k = args.pack_size or resolve(load_spec(SPEC), profile).pack_size
    if not isinstance(k, int):
        print(f"error: pack_size: profile {profile} measures K (auto); give --pack-size",
              file=sys.stderr)
        raise SystemExit(2)
    print(f"sweep {sweep_id} ({SPEC}, profile {profile}), pack of K = {k}, "
          f"{args.threads} thread(s)")
    print(f"{'T':>4} {'iterations':>11} {'t(1) ms':>8} {'pack':>7} {'bound':>7}", flush=True)
    alone = packed = products = 0.0
    for length, n in sorted(iters.items()):
        one, pack = synthetic_step(length, 1), synthetic_step(length, k)
        t1, tk = seconds_per_call([one, pack], min_time, repeats, clock)
        mk = matmul_seconds(pack, min_time)
        alone += n * t1
        packed += n * tk / k
        products += n * mk / k
        print(f"{length:>4} {n:>11} {t1 * 1e3:>8.3f} {t1 * k / tk:>6.2f}× {t1 * k / mk:>6.2f}×",
              flush=True)
    print(f"whole sweep: pack {alone / packed:.2f}×, bound {alone / products:.2f}× "
          f"({sum(iters.values())} iterations)")


if __name__ == "__main__":
    main()
