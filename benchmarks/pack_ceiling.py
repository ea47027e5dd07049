"""The most packing can gain per core: one training iteration of a pack of K members against
K iterations of a pack of one, the trainers' own steps, on one thread (issue 13).

Run from the repository root:

    python benchmarks/pack_ceiling.py            # ~1 min
    python benchmarks/pack_ceiling.py --quick    # seconds, noisy

``benchmarks/sweep_throughput.py`` compares configurations per hour packed against one
configuration per trial, where each trial (one CPU, one thread) runs the same trainer with a
pack of one. Both sweeps pay the same fixed costs (store, Ray, evaluation per configuration),
so their ratio cannot exceed what one packed iteration saves over K single ones on one thread:
this script measures that ceiling for the shapes those sweeps train, so that their ratio is
read against it.

- ``ff-mnist``: M's feedforward net (784-100×10-10, tanh, batch 20), ``ff_mnist.train_step``
  through :func:`ff_throughput.packed_step`;
- ``synthetic``: the SRNN of ``synthetic-max-length`` (100 hidden units, batch 20, temporal
  order's 6 inputs and 4 classes) at lengths T its ``cpu`` profile trains,
  :class:`~ortho_core.models.srnn.PackedSRNN` and ``sgd_step`` through
  :func:`srnn_steps.pack_step`.

Printed per shape and K: time per configuration-iteration at K relative to K = 1, as a
speed-up (K · t(1) / t(K)); the calls are timed alternately. One thread, as a sweep's
trial of one CPU has, unless ``--threads``; ``--cpu-time`` on a busy machine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from ff_throughput import NETS, packed_step
from srnn_steps import pack_step
from timing import clock_of, parser, seconds_per_call

from ortho_core.data.synthetic import get_task
from ortho_core.models.srnn import SRNNInit

PACK_SIZES = (1, 3, 6, 12)
"""K: 1 is the baseline; 3 and 6 are the ``cpu`` profiles' pack sizes of ff-mnist and
synthetic-max-length."""
LENGTHS = (10, 40, 70)
"""Sequence lengths T of the SRNN: the start of the curriculum and where, in the ``cpu``
profile, SRNN and SRNN+OINIT stop."""
HIDDEN, BATCH = 100, 20


def synthetic_step(length: int, k: int) -> Callable[[], None]:
    """One iteration of a synthetic pack of K members on temporal-order batches of length T."""
    task = get_task("temporal_order")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, length, task.n_in, generator=gen)
    y = torch.randint(task.n_out, (BATCH,), generator=gen)
    return pack_step(x, y, [SRNNInit(seed=s) for s in range(k)], HIDDEN, task.n_out, 0.01)


def speedups(steps: Sequence[Callable[[], None]], min_time: float, repeats: int,
             clock: Callable[[], float]) -> list[float]:
    """K · t(1) / t(K) for the steps of :data:`PACK_SIZES`, in that order."""
    seconds = seconds_per_call(steps, min_time, repeats, clock)
    return [k * seconds[0] / s for k, s in zip(PACK_SIZES, seconds, strict=True)]


def main() -> None:
    args = parser(__doc__ or "", repeats=3, quick="0.05 s per timing, one repeat").parse_args()
    args.threads = args.threads or 1
    clock = clock_of(args)
    min_time, repeats = (0.05, 1) if args.quick else (0.5, args.repeats)
    header = "".join(f"{f'K = {k}':>9}" for k in PACK_SIZES)
    print(f"per-configuration speed-up over a pack of one, {args.threads} thread(s)")
    print(f"{'shape':<22}{header}")
    rows: list[tuple[str, list[Callable[[], None]]]] = [
        ("ff-mnist", [packed_step(NETS[0], k) for k in PACK_SIZES])]
    rows += [(f"synthetic T = {t}", [synthetic_step(t, k) for k in PACK_SIZES]) for t in LENGTHS]
    for name, steps in rows:
        ratios = speedups(steps, min_time, repeats, clock)
        print(f"{name:<22}" + "".join(f"{r:>8.2f}×" for r in ratios), flush=True)


if __name__ == "__main__":
    main()
