"""Throughput of the packed SRNN at pixel-MNIST size (T = 784) against a straightforward loop,
and the projected wall time of the ``pixel-mnist`` spec's ``paper`` profile (M-T2).

Run from the repository root, with the package installed (``pip install -e .``):

    python benchmarks/pixel_throughput.py --threads 2             # K in {1, 16, 64, 256}, ~3 min
    python benchmarks/pixel_throughput.py --quick --threads 2     # K in {1, 16}, under a minute
    python benchmarks/pixel_throughput.py --device cuda           # also the CUDA-graph path

One trial-iteration is what one configuration does per training iteration of M's pixel MNIST:
forward over T = 784 steps of one pixel each (I = 1), 100 tanh units, a 10-class softmax
cross-entropy on the last step, batch 16, backward, and an SGD step (the same fixed batch every
iteration, so data loading is not measured; RMSprop's update costs about as little as SGD's
next to the 784-step loop). A pack of K members does K trial-iterations per iteration.

The baseline, measured in the same process, is the straightforward per-configuration PyTorch
program: a Python loop over time of ``h = tanh(x_t @ W_xhᵀ + h @ W_hhᵀ + b)`` under autograd,
then ``loss.backward()`` and ``p -= lr * p.grad``, one configuration (K = 1) at a time, with one
intra-op thread, as a sweep runs such trials (one per core): with several threads its
16 × 100 × 100 matmuls spend far more time synchronising threads than computing (about 30 s an
iteration instead of 0.05 s on a 2-core machine). "ratio" is trial-iterations per second
relative to it. On CUDA the pack runs twice: with its time
loops as CUDA graphs (``graph``, the default) and without (``pack``). On CPU ``pack`` runs the
time loops in C++ (:mod:`ortho_core.models.srnn_native`) when they are built, and ``py`` is the
same pack on the Python loops, timed alternately with ``pack`` in the same calls (so that on a
shared machine both see the same load).

FLOPs are counted as in ``benchmarks/srnn_throughput.py``: matmul FLOPs of the minimal
computation, per member 4BHI·T + 6BH²·(T−1) + 6BHO (elementwise work is not counted). "peak" is
the achieved rate as a fraction of a 2048 × 2048 float32 matmul ("sgemm", GFLOP/s) timed in
the same process on the same device just before the rows of each K (on a shared machine the
rate drifts).

"paper" is the projected wall time of the ``paper`` profile on this machine: PAPER_CONFIGS
configurations × 10⁶ iterations ÷ the measured trial-iterations per second (one process doing
nothing else; data loading and evaluation not included).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from srnn_steps import Step, flops_per_trial_iteration, loop_step, pack_step, synchronised
from timing import clock_of, parser, seconds_per_call

from ortho_core.models import SRNNInit, srnn_native

STEPS, N_IN, N_HIDDEN, N_OUT, BATCH, LR = 784, 1, 100, 10, 16, 1e-3
PAPER_ALPHAS, PAPER_SIGMAS, PAPER_VARIANTS = 5, 3, 1 + 1 + 3
PAPER_CONFIGS = PAPER_ALPHAS * PAPER_SIGMAS * PAPER_VARIANTS
"""M-T2's grid: α ∈ {10⁻³ … 10⁻⁷} (5) × σ ∈ {0.001, 0.01, 0.1} (3) × (SRNN, OINIT, OPEN with
λ ∈ {1, 0.1, 0.01}) (5) = 75 configurations."""
PAPER_ITERATIONS = 10**6


def batch(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed pixel-MNIST-shaped batch: inputs (B, 784, 1) in [0, 1] and labels in 0..9."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(BATCH, STEPS, N_IN, generator=g)
    return x.to(device), torch.randint(N_OUT, (BATCH,), generator=g).to(device)


def naive_step(device: torch.device) -> Step:
    """One iteration of the straightforward per-configuration autograd loop, one thread."""
    x, y = batch(device)
    return loop_step(x, y, N_HIDDEN, N_OUT, LR, init_std=0.01, single_thread=True)


def packed_step(members: int, device: torch.device, graphs: bool) -> Step:
    """One iteration of a pack of ``members`` configurations (PackedSRNN + sgd_step)."""
    x, y = batch(device)
    inits = [SRNNInit(seed=s, scheme="gaussian", init_std=0.01) for s in range(members)]
    return pack_step(x, y, inits, N_HIDDEN, N_OUT, LR, graphs)


def python_loops(step: Step) -> Step:
    """``step`` on the Python time loops (:func:`ortho_core.models.srnn_native.python_loops`)."""

    def call() -> None:
        with srnn_native.python_loops():
            step()

    return call


FLOPS = flops_per_trial_iteration(BATCH, STEPS, N_IN, N_HIDDEN, N_OUT)
"""Matmul FLOPs of one trial-iteration (:mod:`srnn_steps`)."""


def matmul_rate(device: torch.device, repeats: int, clock: Callable[[], float]) -> float:
    """The float32 matmul rate (FLOP/s) of a 2048 × 2048 matmul on ``device``."""
    n = 2048
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    seconds = seconds_per_call([synchronised(lambda: a @ b, device)], 0.3, repeats, clock)[0]
    return 2 * n**3 / seconds


def wall(seconds: float) -> str:
    """A duration in the largest unit that keeps it above 1 (hours or days)."""
    hours = seconds / 3600
    return f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.1f} d"


def row(k: int, device: torch.device, native: bool) -> dict[str, Step]:
    """The steps timed together for a pack of ``k``: ``pack``; with ``native``, ``py`` (the
    same pack on the Python loops); on CUDA, ``graph``."""
    step = packed_step(k, device, graphs=False)
    steps = {"pack": step}
    if native:
        steps["py"] = python_loops(step)
    if device.type == "cuda":
        steps["graph"] = packed_step(k, device, graphs=True)
    return steps


def main() -> None:
    p = parser(__doc__.splitlines()[0], repeats=3, quick="K in {1, 16}, one repeat")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    args = p.parse_args()
    clock = clock_of(args)
    device = torch.device(args.device)
    if args.quick:
        args.repeats = 1
    packs = [1, 16] if args.quick else [1, 16, 64, 256]
    min_time = 0.05 if args.quick else 0.5

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device {name}; threads {torch.get_num_threads()}; timed by "
          f"{'process CPU time' if args.cpu_time else 'wall clock'}; "
          f"sgemm: the 2048² float32 matmul rate, measured again before each K")
    print(f"T = {STEPS}, B = {BATCH}, H = {N_HIDDEN}, I = {N_IN}, O = {N_OUT}; "
          f"{FLOPS / 1e6:.1f} MFLOP per trial-iteration")
    print(f"paper profile: {PAPER_ALPHAS} α × {PAPER_SIGMAS} σ × {PAPER_VARIANTS} variants "
          f"(SRNN, OINIT, OPEN × 3 λ) = {PAPER_CONFIGS} configurations × "
          f"{PAPER_ITERATIONS:.0e} iterations")
    native = device.type == "cpu" and srnn_native.applies(torch.empty(0))
    print(f"pack: time loops in {'C++' if native else 'Python'}"
          + ("; py: the same pack on the Python loops, timed alternately with it" if native
             else ""))
    print(f"{'impl':>6} {'K':>4} {'s/iter':>8} {'trial-it/s':>11} {'ratio':>7} "
          f"{'GFLOP/s':>8} {'sgemm':>6} {'peak':>6} {'paper':>9}")
    cells = [(1, lambda: {"loop": naive_step(device)})]
    cells += [(k, lambda k=k: row(k, device, native)) for k in packs]
    baseline = None
    for k, make in cells:
        steps = make()
        peak = matmul_rate(device, args.repeats, clock)
        times = seconds_per_call(list(steps.values()), min_time, args.repeats, clock)
        for impl, seconds in zip(steps, times, strict=True):
            rate = k / seconds
            baseline = baseline or rate
            gflops = rate * FLOPS / 1e9
            paper = PAPER_CONFIGS * PAPER_ITERATIONS / rate
            print(f"{impl:>6} {k:>4} {seconds:>8.3f} {rate:>11.1f} {rate / baseline:>7.1f} "
                  f"{gflops:>8.1f} {peak / 1e9:>6.0f} {gflops * 1e9 / peak:>6.1%} "
                  f"{wall(paper):>9}", flush=True)
        del steps


if __name__ == "__main__":
    main()
