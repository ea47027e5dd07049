"""What flushing subnormal numbers saves: one training iteration of the trainers' own steps
with ``subnormals: flush`` against ``keep`` (IEEE 754), in the same process
(:mod:`ortho_core.subnormals`).

Run from the repository root:

    python benchmarks/subnormals.py            # ~1 min
    python benchmarks/subnormals.py --quick    # seconds, noisy

A vanishing gradient passes through the subnormal range on its way to zero, and many x86 CPUs
(Intel's in particular) compute on subnormal operands many times slower; which shapes meet them
depends on depth, length and initialisation. The header line names the CPU. One configuration (a
pack of one), one thread, as a sweep's trial of one CPU trains it:

- ``lcw-mlp``: K's MLP(100, 128), sigmoid, Glorot initialisation, batch 128 (``variant: plain``);
- ``ff-mnist``: M's 784-100×10-10 tanh net, W ~ N(0, 0.001²), batch 20;
- ``srnn T = …``: the SRNN of the synthetic problems (100 units, batch 20, temporal order's 6
  inputs and 4 classes) at the lengths given, Glorot (``normalised``) or N(0, 0.01²) weights;
- ``pixel-mnist``: the SRNN over 784 pixels, batch 16, N(0, 0.01²), as
  ``benchmarks/pixel_throughput.py``.

Each shape's two steps train their own copy of the same initial weights and are timed
alternately (best of ``--repeats``). Printed: iterations per second in each mode and their ratio
(flush / keep).
"""

from __future__ import annotations

import platform
from collections.abc import Callable

import torch
from ff_throughput import NETS
from ff_throughput import packed_step as ff_step
from pixel_throughput import packed_step as pixel_step
from srnn_steps import pack_step
from timing import clock_of, parser, seconds_per_call

from ortho_core.data.synthetic import get_task
from ortho_core.models.srnn import SRNNInit
from ortho_core.subnormals import Subnormals, apply_mode

HIDDEN, BATCH = 100, 20


def srnn_step(length: int, init_std: float | None) -> Callable[[], None]:
    """One iteration of an SRNN of one member on temporal-order batches of length T; Glorot
    weights when ``init_std`` is None, else N(0, init_std²)."""
    task = get_task("temporal_order")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, length, task.n_in, generator=gen)
    y = torch.randint(task.n_out, (BATCH,), generator=gen)
    init = SRNNInit(seed=0) if init_std is None else SRNNInit(seed=0, scheme="gaussian",
                                                              init_std=init_std)
    return pack_step(x, y, [init], HIDDEN, task.n_out, 0.01)


def cpu_model() -> str:
    """The CPU's model name (Linux), or the platform's processor string."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def in_mode(mode: Subnormals, step: Callable[[], None]) -> Callable[[], None]:
    """``step`` with this thread in ``mode`` (the only thread: the benchmark runs one)."""

    def call() -> None:
        apply_mode(mode)
        step()

    return call


SHAPES: dict[str, Callable[[], Callable[[], None]]] = {
    "lcw-mlp": lambda: ff_step(NETS[1], 1),
    "ff-mnist": lambda: ff_step(NETS[0], 1),
    "srnn T = 100, Glorot": lambda: srnn_step(100, None),
    "srnn T = 300, Glorot": lambda: srnn_step(300, None),
    "srnn T = 300, σ = 0.01": lambda: srnn_step(300, 0.01),
    "pixel-mnist": lambda: pixel_step(1, torch.device("cpu"), graphs=False),
}


def main() -> None:
    args = parser(__doc__ or "", repeats=3, quick="0.1 s per timing, one repeat",
                  subnormals=False).parse_args()
    args.threads = 1
    clock = clock_of(args)
    min_time, repeats = (0.1, 1) if args.quick else (1.0, args.repeats)
    print(f"iterations per second of one configuration, one thread; CPU: {cpu_model()}")
    print(f"{'shape':<24}{'keep':>10}{'flush':>10}{'flush/keep':>12}")
    for name, make in SHAPES.items():
        steps = [in_mode("keep", make()), in_mode("flush", make())]
        keep, flush = seconds_per_call(steps, min_time, repeats, clock)
        print(f"{name:<24}{1 / keep:>10.1f}{1 / flush:>10.1f}{keep / flush:>11.2f}×",
              flush=True)
    apply_mode("keep")


if __name__ == "__main__":
    main()
