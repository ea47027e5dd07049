"""What writing the SGD steps over the gradients saves (``sgd_step``'s ``overwrite_grads``).

Run from the repository root:

    python benchmarks/sgd_update.py            # ~1 min
    python benchmarks/sgd_update.py --quick    # seconds, noisy

A pack's update p := p − α·g touches every parameter and gradient once per iteration; for the
tiny matrices of M's nets that is memory traffic, not arithmetic, and it grows with K past
what the core's cache holds. :func:`ortho_core.optim.sgd_step` computes the steps α·g into
temporaries and subtracts them; with ``overwrite_grads`` it writes them into the gradients
(which the trainers read no more), the same numbers with a temporary and a pass over memory
less. Both are timed alternately in this process, on the packed parameters of ``ff-mnist``'s
net (784-100×10-10) for K = 1, 3, 6 and 12 members:

- ``update``: ``sgd_step`` alone, each call after the gradients are written afresh (as the
  backward pass leaves them: just written, partly in cache), the copy timed in both columns;
- ``train_step``: the trainer's whole iteration (forward, backward, update) on a fixed
  batch, ``keep_loss_grads`` on (the copying update) and off (the overwriting one, as
  ``ff-mnist`` runs every minibatch but an epoch's last).

Printed per row and K: the time per call of each and their ratio (copy / overwrite). One
thread, as a sweep's trial of one CPU has, unless ``--threads``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from ff_throughput import NETS, fixed_batch, packed_model
from timing import clock_of, parser, seconds_per_call

from ortho_core.experiments.feedforward import train_step
from ortho_core.optim import sgd_step

PACK_SIZES = (1, 3, 6, 12)
"""K: one configuration, and the pack sizes of the ``cpu`` profiles and beyond."""
NET = NETS[0]


def update_calls(k: int) -> tuple[Callable[[], None], Callable[[], None]]:
    """``sgd_step`` on the pack's parameters, copying and overwriting the fresh gradients."""
    params = [p.detach() for p in packed_model(NET, k).parameters()]
    gen = torch.Generator().manual_seed(0)
    fresh = [torch.randn(p.shape, generator=gen) * 1e-3 for p in params]
    grads = [torch.empty_like(p) for p in params]
    lr = torch.full((k,), NET.lr)
    active = torch.ones(k, dtype=torch.bool)

    def step(overwrite: bool) -> None:
        torch._foreach_copy_(grads, fresh)
        sgd_step(params, grads, lr, active, overwrite_grads=overwrite)

    return lambda: step(False), lambda: step(True)


def train_calls(k: int) -> tuple[Callable[[], None], Callable[[], None]]:
    """The trainer's iteration, keeping CE's gradients (copying update) or not."""
    x, y = fixed_batch(NET)
    model = packed_model(NET, k)
    params = list(model.parameters())
    lr = torch.full((k,), NET.lr)
    active = torch.ones(k, dtype=torch.bool)

    def step(keep: bool) -> None:
        train_step(model, params, x, y, lr, active, keep_loss_grads=keep)

    return lambda: step(True), lambda: step(False)


def main() -> None:
    args = parser(__doc__ or "", repeats=5, quick="0.05 s per timing, one repeat").parse_args()
    args.threads = args.threads or 1
    clock = clock_of(args)
    min_time, repeats = (0.05, 1) if args.quick else (0.3, args.repeats)
    print(f"ff-mnist's net, {args.threads} thread(s): copy / overwrite per call")
    for name, calls in (("update", update_calls), ("train_step", train_calls)):
        for k in PACK_SIZES:
            copy, overwrite = seconds_per_call(list(calls(k)), min_time, repeats, clock)
            print(f"{name:<11} K = {k:<3} {copy * 1e3:8.3f} ms {overwrite * 1e3:8.3f} ms"
                  f"  {copy / overwrite:5.2f}×", flush=True)


if __name__ == "__main__":
    main()
