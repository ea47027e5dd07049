"""ρ(W_hh) of a pack split over the trial's threads against one ``eigvals`` call on one
thread, in the same process (:func:`ortho_core.metrics.spectral_radius`).

Run from the repository root:

    python benchmarks/spectral_radius.py                 # ~20 s
    python benchmarks/spectral_radius.py --threads 4 --packs 224 896

Every evaluation of the synthetic trainer computes ρ of each member's W_hh (100 units) on the
host, about 1.5 ms a member with LAPACK's ``geev``, which runs one matrix at a time on one
thread. On a GPU the pack trains on while a host thread computes it, but the next evaluation
waits for it (``synthetic._Outbox``), so one thread would bound a pack of any K at
``eval_every`` / 1.5 ms ≈ 67,000 configs·iterations per second, near where the ``pack_size:
auto`` curve of an H100 flattened (51,478 at K = 128, 52,385 at 256; RESULTS.md,
``sweep_throughput on a GPU (5)``; inferred, the split is not yet measured there); split over n
threads the bound is n times higher. Printed per pack size: ms a member on one
thread and split over ``--threads`` (default: torch's thread count, as a trial sets it from its
CPUs), their ratio, and whether the two give the same values bit for bit.
"""

from __future__ import annotations

import torch
from timing import clock_of, parser, seconds_per_call

from ortho_core.metrics import spectral_radius


def main() -> None:
    p = parser(__doc__.splitlines()[0], repeats=3, quick="one pack of 28, one timing",
               subnormals=False)
    p.add_argument("--packs", type=int, nargs="+", default=[28, 224, 896],
                   help="pack sizes K (members' W_hh of --hidden units)")
    p.add_argument("--hidden", type=int, default=100, help="units of each W_hh")
    args = p.parse_args()
    if args.cpu_time:
        p.error("--cpu-time: process time sums every thread's, so a split would read about 1x; "
                "this benchmark times the wall clock")
    clock = clock_of(args)
    threads = torch.get_num_threads()
    packs, repeats = ([28], 1) if args.quick else (args.packs, args.repeats)
    print(f"{threads} thread(s); W_hh of {args.hidden} units, scaled to ρ ≈ 1")
    print(f"{'K':>5} {'one thread ms/member':>21} {'split ms/member':>16} {'ratio':>6} same")
    g = torch.Generator().manual_seed(0)
    for k in packs:
        w = torch.randn(k, args.hidden, args.hidden, generator=g) / args.hidden ** 0.5
        one, split = seconds_per_call([lambda w=w: spectral_radius(w, threads=1),
                                       lambda w=w: spectral_radius(w, threads=threads)],
                                      min_time=0.5, repeats=repeats, clock=clock)
        same = torch.equal(spectral_radius(w, threads=1), spectral_radius(w, threads=threads))
        print(f"{k:>5} {one * 1e3 / k:>21.3f} {split * 1e3 / k:>16.3f} {one / split:>5.2f}x "
              f"{'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
