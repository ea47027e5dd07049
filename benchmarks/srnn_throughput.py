"""Throughput of the packed SRNN (ortho_core.models.srnn) against a straightforward loop.

Run from the repository root, with the package installed (``pip install -e .``):

    python benchmarks/srnn_throughput.py            # full table, about 40 s
    python benchmarks/srnn_throughput.py --quick    # about 10 s, T in {100, 200}, K in {1, 16}
    python benchmarks/srnn_throughput.py --threads 1 --repeats 5
    python benchmarks/srnn_throughput.py --threads 1 --cpu-time   # on a busy shared machine

One trial-iteration is what one configuration does per training iteration of M's synthetic
problems: forward over T steps, backward, and an SGD step, on a temporal-order-shaped batch
(I = 6 one-hot inputs, O = 4 classes, softmax cross-entropy, batch 20, 100 tanh units; the
same fixed batch every iteration, so data generation is not measured). A pack of K members
does K trial-iterations per iteration.

The baseline, measured in the same process, is the straightforward per-configuration PyTorch
program: a Python loop over time of ``h = tanh(x_t @ W_xhᵀ + h @ W_hhᵀ + b)`` under autograd,
then ``loss.backward()`` and ``p -= lr * p.grad``, one configuration (K = 1) at a time.
"ratio" is trial-iterations per second relative to it.

FLOPs are matmul FLOPs of the minimal computation (2 per multiply-add), per member:
forward 2BHI·T (input projection) + 2BH²·(T−1) (recurrence; h_0 = 0 needs none) + 2BHO
(readout); backward 2BHO (∂W_hy) + 2BHO (∂h_T) + 2BH²·(T−1) (∂h_{t-1} = ∂a_t W_hh) +
2BH²·(T−1) (∂W_hh) + 2BHI·T (∂W_xh); in all 4BHI·T + 6BH²·(T−1) + 6BHO. Elementwise work (tanh,
1 − h², the SGD update) is not counted, so the achieved rate understates the work done. The
machine's float32 matmul rate is measured in the same process by timing a 2048 × 2048 sgemm;
"peak" is the achieved rate as a fraction of it.

The cost per iteration should grow linearly in T: the script prints time(T)/time(T') for the
two longest lengths next to T/T'.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from srnn_steps import Step, flops_per_trial_iteration, loop_step, pack_step
from timing import clock_of, parser, seconds_per_call, sgemm_rate

from ortho_core.models import SRNNInit

N_IN, N_HIDDEN, N_OUT, BATCH, LR = 6, 100, 4, 20, 0.01


def batch(steps: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed temporal-order-shaped batch: one-hot inputs (B, T, 6) and labels in 0..3."""
    symbols = torch.randint(N_IN, (BATCH, steps), generator=generator)
    return F.one_hot(symbols, N_IN).float(), torch.randint(N_OUT, (BATCH,), generator=generator)


def naive_step(steps: int) -> Step:
    """One iteration of the straightforward per-configuration autograd loop."""
    x, y = batch(steps, torch.Generator().manual_seed(0))
    return loop_step(x, y, N_HIDDEN, N_OUT, LR, init_std=0.1)


def packed_step(steps: int, members: int) -> Step:
    """One iteration of a pack of ``members`` configurations (PackedSRNN + sgd_step)."""
    x, y = batch(steps, torch.Generator().manual_seed(0))
    return pack_step(x, y, [SRNNInit(seed=s) for s in range(members)], N_HIDDEN, N_OUT, LR)


def flops(steps: int) -> int:
    """Matmul FLOPs of one trial-iteration at length ``steps`` (:mod:`srnn_steps`)."""
    return flops_per_trial_iteration(BATCH, steps, N_IN, N_HIDDEN, N_OUT)


def main() -> None:
    args = parser(__doc__.splitlines()[0], repeats=3,
                  quick="T in {100, 200}, K in {1, 16}").parse_args()
    clock = clock_of(args)
    lengths = [100, 200] if args.quick else [10, 50, 100, 200]
    packs = [1, 16] if args.quick else [1, 4, 16, 64]
    min_time = 0.15 if args.quick else 0.4

    peak = sgemm_rate(args.repeats, clock)
    print(f"threads {torch.get_num_threads()}; timed by "
          f"{'process CPU time' if args.cpu_time else 'wall clock'}; "
          f"2048² sgemm {peak / 1e9:.1f} GFLOP/s")
    print(f"{'impl':>6} {'T':>4} {'K':>3} {'trial-it/s':>11} {'ratio':>6} "
          f"{'GFLOP/s':>8} {'peak':>6}")
    times: dict[tuple[str, int], dict[int, float]] = {}
    for steps in lengths:
        cells = [("loop", 1, naive_step(steps))]
        cells += [("pack", k, packed_step(steps, k)) for k in packs]
        baseline = None
        for impl, k, step in cells:
            (seconds,) = seconds_per_call([step], min_time, args.repeats, clock)
            times.setdefault((impl, k), {})[steps] = seconds
            rate = k / seconds
            baseline = baseline or rate
            gflops = rate * flops(steps) / 1e9
            print(f"{impl:>6} {steps:>4} {k:>3} {rate:>11.1f} {rate / baseline:>6.2f} "
                  f"{gflops:>8.1f} {gflops * 1e9 / peak:>6.1%}")

    short, long = lengths[-2], lengths[-1]
    print(f"linearity: time(T={long}) / time(T={short}), expected {long / short:.2f}")
    for (impl, k), by_length in times.items():
        print(f"  {impl} K={k}: {by_length[long] / by_length[short]:.2f}")


if __name__ == "__main__":
    main()
