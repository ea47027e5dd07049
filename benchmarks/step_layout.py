"""What the forward steps of the packed SRNN gain by multiplying by a contiguous copy of W_hhᵀ
rather than by a transposed view of W_hh (:func:`ortho_core.models.srnn_kernels.step_weights`).

Run from the repository root:

    python benchmarks/step_layout.py            # ~1 min
    python benchmarks/step_layout.py --quick    # seconds, noisy

Step t of the forward pass is the batched product h_{t−1}W_hhᵀ, (K, B, H) by (K, H, H), at
every one of T steps. Both ways are timed alternately in this process, one thread (as a
sweep's trial of one CPU has) unless ``--threads``, for the shapes the trainers run:
synthetic-max-length's SRNN (B = 20, H = 100) and pixel MNIST's (B = 16, H = 100), packs of
K = 1, 6 and 12:

- ``product``: the step's ``bmm`` alone, into a preallocated output, the copy not timed (it is
  made once per pass of T steps);
- ``forward``: the whole forward time loop of
  :func:`~ortho_core.models.srnn_kernels.forward_states` at T = 70 (synthetic) and T = 784
  (pixels) on the Python loops (:func:`~ortho_core.models.srnn_native.python_loops`, whose
  steps the C++ loops make with the same ATen product), the copy timed with it.

Printed per row and K: the time per call each way and their ratio (view / copy).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from timing import clock_of, parser, seconds_per_call

from ortho_core.models import srnn_kernels, srnn_native

PACK_SIZES = (1, 6, 12)
SHAPES = {"synthetic": (20, 100, 6, 70), "pixels": (16, 100, 1, 784)}
"""Batch B, hidden units H, inputs I and the forward's length T of each trainer's SRNN."""


def product_calls(k: int, batch: int, hidden: int) -> tuple[Callable[[], None], ...]:
    """One forward step's product through the transposed view and through the copy."""
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(k, batch, hidden, generator=gen)
    w_hh = torch.randn(k, hidden, hidden, generator=gen) / hidden**0.5
    view, copy = w_hh.transpose(1, 2), srnn_kernels.step_weights(w_hh)
    out = torch.empty(k, batch, hidden)
    return (lambda: torch.bmm(h, view, out=out)), (lambda: torch.bmm(h, copy, out=out))


def forward_calls(k: int, batch: int, hidden: int, n_in: int,
                  steps: int) -> tuple[Callable[[], None], ...]:
    """The forward time loop with W_hhᵀ as a transposed view and as the copy."""
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(batch, steps, n_in, generator=gen)
    w_xh = torch.randn(k, hidden, n_in, generator=gen) / n_in**0.5
    w_hh = torch.randn(k, hidden, hidden, generator=gen) / hidden**0.5
    b_h = torch.zeros(k, hidden)
    out = torch.empty(k, steps, batch, hidden)
    copying = srnn_kernels.step_weights

    def run(weights: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], None]:
        def call() -> None:
            srnn_kernels.step_weights = weights
            try:
                with srnn_native.python_loops():
                    srnn_kernels.forward_states(x, w_xh, w_hh, b_h, out)
            finally:
                srnn_kernels.step_weights = copying
        return call

    return run(lambda w: w.transpose(1, 2)), run(copying)


def main() -> None:
    args = parser(__doc__.splitlines()[0], repeats=5,
                  quick="one repeat, 0.05 s per timing").parse_args()
    clock = clock_of(args)
    if args.threads is None:
        torch.set_num_threads(1)
    min_time, repeats = (0.05, 1) if args.quick else (0.3, args.repeats)
    print(f"{torch.get_num_threads()} thread(s); time per call, transposed view / copy")
    print(f"{'shape':<22} {'K':>3} {'view':>11} {'copy':>11} {'ratio':>7}")
    for name, (batch, hidden, n_in, steps) in SHAPES.items():
        for label, calls in (
                (f"{name} product", lambda k, b=batch, h=hidden: product_calls(k, b, h)),
                (f"{name} forward T={steps}", lambda k, b=batch, h=hidden, i=n_in, t=steps:
                 forward_calls(k, b, h, i, t))):
            for k in PACK_SIZES:
                view, copy = seconds_per_call(list(calls(k)), min_time, repeats, clock)
                print(f"{label:<22} {k:>3} {view * 1e6:>9.1f}µs {copy * 1e6:>9.1f}µs "
                      f"{view / copy:>6.2f}x", flush=True)


if __name__ == "__main__":
    main()
