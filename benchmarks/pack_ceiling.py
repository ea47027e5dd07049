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

- ``ff-mnist``: M's feedforward net (784-100×10-10, tanh, batch 20), the trainer's
  :func:`~ortho_core.experiments.feedforward.train_step` as it runs every minibatch but an
  epoch's last: FF members only; FF+OPEN members only (λ = 0.01); and FF, FF+OPEN and
  FF+OINIT dealt in turn, as the ``cpu`` profile's plan deals them into its packs (FF+OINIT
  iterates as FF does, its pre-training is once per run), against each member alone;
- ``synthetic``: the SRNN of ``synthetic-max-length`` (100 hidden units, batch 20, temporal
  order's 6 inputs and 4 classes) at lengths T its ``cpu`` profile trains,
  :class:`~ortho_core.models.srnn.PackedSRNN` and ``sgd_step`` through
  :func:`srnn_steps.pack_step`.

Printed per shape and K: the time of its K members' iterations one configuration at a time
over the pack's iteration, as a speed-up (K · t(1) / t(K) where the members are alike); the
calls are timed alternately. One thread, as a sweep's
trial of one CPU has, unless ``--threads``; ``--cpu-time`` on a busy machine.

A second table bounds what any packing could reach on this core: the time the pack of K
spends in its matrix products alone (``aten::mm``, ``bmm``, ``addmm``, ``baddbmm`` and their
in-place forms, their self time under ``torch.profiler``, which the native SRNN loops' ATen
calls report too), and the speed-up over the members alone that packing would give if
everything else in the iteration (elementwise work, the update, the interpreter) cost nothing.
Those products are the FLOPs of K members, which packing cannot share, so a ratio under a
target there means no pack of that size reaches it on this machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from ff_throughput import NETS, fixed_batch, packed_model
from srnn_steps import pack_step
from timing import clock_of, parser, seconds_per_call

from ortho_core.data.synthetic import get_task
from ortho_core.experiments.feedforward import train_step
from ortho_core.models.srnn import SRNNInit

PACK_SIZES = (1, 3, 6, 12)
"""K: 1 is the baseline; 3 and 6 are the ``cpu`` profiles' pack sizes of ff-mnist and
synthetic-max-length."""
LENGTHS = (10, 40, 70)
"""Sequence lengths T of the SRNN: the start of the curriculum and where, in the ``cpu``
profile, SRNN and SRNN+OINIT stop."""
HIDDEN, BATCH = 100, 20
PENALTY = 0.01
"""λ of the FF+OPEN members (M's best)."""

Step = Callable[[], None]


@dataclass
class Row:
    """One shape of the table: its packs, and the members each pack holds."""

    name: str
    packs: list[Step]
    """One iteration of the pack of K members, for each K of :data:`PACK_SIZES`."""
    members: Callable[[int], list[str]]
    """The kinds of the first K members (keys of ``alone``)."""
    alone: dict[str, Step]
    """One iteration of a pack of one of each kind."""


def ff_step(kinds: Sequence[str]) -> Step:
    """One ff-mnist iteration of a pack whose members are ``kinds`` (``ff``, ``open``)."""
    net = NETS[0]
    x, y = fixed_batch(net)
    k = len(kinds)
    model = packed_model(net, k)
    params = list(model.parameters())
    lr = torch.full((k,), net.lr)
    active = torch.ones(k, dtype=torch.bool)
    opened = [i for i, kind in enumerate(kinds) if kind == "open"]
    penalty = torch.full((k,), PENALTY) if opened else None
    penalised = None if len(opened) in (0, k) else torch.tensor(opened)

    def step() -> None:
        train_step(model, params, x, y, lr, active, penalty, penalised, keep_loss_grads=False)

    return step


def ff_row(name: str, deal: Sequence[str]) -> Row:
    """ff-mnist packs whose members are dealt ``deal`` in turn."""
    def members(k: int) -> list[str]:
        return [deal[i % len(deal)] for i in range(k)]

    return Row(name, [ff_step(members(k)) for k in PACK_SIZES], members,
               {kind: ff_step([kind]) for kind in set(deal)})


def synthetic_step(length: int, k: int) -> Step:
    """One iteration of a synthetic pack of K members on temporal-order batches of length T."""
    task = get_task("temporal_order")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, length, task.n_in, generator=gen)
    y = torch.randint(task.n_out, (BATCH,), generator=gen)
    return pack_step(x, y, [SRNNInit(seed=s) for s in range(k)], HIDDEN, task.n_out, 0.01)


def synthetic_row(length: int) -> Row:
    """SRNN packs at length T."""
    packs = [synthetic_step(length, k) for k in PACK_SIZES]
    return Row(f"synthetic T = {length}", packs, lambda k: ["srnn"] * k, {"srnn": packs[0]})


MATMULS = frozenset({"aten::mm", "aten::bmm", "aten::addmm", "aten::addmm_", "aten::baddbmm",
                     "aten::baddbmm_"})
"""The profiler's names of the matrix products the steps call, the in-place forms included
(the SRNN's backward accumulates its weight gradients with ``baddbmm_`` and ``addmm_``)."""


def matmul_seconds(step: Callable[[], None], min_time: float) -> float:
    """Seconds per call of ``step`` spent in its matrix products (:data:`MATMULS`' self time
    under ``torch.profiler``), over calls for at least ``min_time`` seconds."""
    from torch.profiler import profile

    step()
    calls, start = 0, time.perf_counter()
    with profile() as prof:
        while calls < 2 or time.perf_counter() - start < min_time:
            step()
            calls += 1
    total = sum(e.self_cpu_time_total for e in prof.key_averages() if e.key in MATMULS)
    return total / 1e6 / calls


def main() -> None:
    args = parser(__doc__ or "", repeats=3, quick="0.05 s per timing, one repeat").parse_args()
    args.threads = args.threads or 1
    clock = clock_of(args)
    min_time, repeats = (0.05, 1) if args.quick else (0.5, args.repeats)
    header = "".join(f"{f'K = {k}':>9}" for k in PACK_SIZES)
    print(f"speed-up of a pack over its members one at a time, {args.threads} thread(s)")
    print(f"{'shape':<30}{header}")
    rows = [ff_row("ff-mnist FF", ["ff"]), ff_row("ff-mnist FF+OPEN", ["open"]),
            ff_row("ff-mnist FF, OPEN, OINIT", ["ff", "open", "ff"]),
            *[synthetic_row(t) for t in LENGTHS]]
    alone_costs = []
    for row in rows:
        kinds = sorted(row.alone)
        seconds = seconds_per_call([row.alone[kind] for kind in kinds] + row.packs, min_time,
                                   repeats, clock)
        single = dict(zip(kinds, seconds, strict=False))
        alone = [sum(single[kind] for kind in row.members(k)) for k in PACK_SIZES]
        alone_costs.append(alone)
        ratios = [a / t for a, t in zip(alone, seconds[len(kinds):], strict=True)]
        print(f"{row.name:<30}" + "".join(f"{r:>8.2f}×" for r in ratios), flush=True)
    print("\nbound if all but the matrix products were free: members alone / t_matmul(pack)")
    print(f"{'shape':<30}{header}")
    for row, alone in zip(rows, alone_costs, strict=True):
        bounds = [a / matmul_seconds(step, min_time)
                  for a, step in zip(alone, row.packs, strict=True)]
        print(f"{row.name:<30}" + "".join(f"{b:>8.2f}×" for b in bounds), flush=True)


if __name__ == "__main__":
    main()
