"""Configurations per hour on one GPU shared by several trials: packs against fractional-GPU
trials of one configuration each, through the synthetic trainer itself (issue 13's GPU target,
without Ray and MLflow, which a GPU machine here may not have).

Run from the repository root, with the package importable (``pip install -e .`` or
``PYTHONPATH=.``):

    python benchmarks/gpu_fraction.py                        # on a CUDA machine, ~3 minutes
    python benchmarks/gpu_fraction.py --quick                # seconds of training
    python benchmarks/gpu_fraction.py --tasks all            # the paper profile's 4 packs of 28
    python benchmarks/gpu_fraction.py --tasks all --repeats 8 --pack-size 224 --alone-repeats 1
                                                             # 8 seeds each, 4 packs of 224
    python benchmarks/gpu_fraction.py --tasks all --modes packed   # one side only
    python benchmarks/gpu_fraction.py --device cpu --quick --slots 2   # the path, on a CPU

A sweep with ``resources: {gpu: 0.25}`` runs four trials on the GPU at once, each in a process
of its own (a reused Ray worker) with its own CUDA context. This script starts ``--slots``
worker processes (default 4 = 1 / 0.25), lets each set up its device first (a sweep's workers
are reused, so they pay that once), and then times them pulling work from one queue until it
is empty:

- **one per trial**: each item is one configuration, ``synthetic.train([config])``;
- **packed**: each problem's configurations dealt in turn into ``--slots`` / (number of
  problems) packs (at least one), as the plan deals a profile's configurations to fill a GPU's
  slots (:func:`sweeps.plan.deal` and :func:`sweeps.plan.pack_counts` with the ``paper``
  profile's ``pack_size: 28``, written out here rather than imported: ``sweeps`` needs
  pydantic, which the lent GPU machine lacks), each item one pack: temporal order alone in
  four packs of 7, the four problems in four packs of 28, one per problem, as the ``paper``
  profile trains them; with ``--repeats N`` (each configuration trained with seeds 0 … N−1,
  as a spec's ``repeats``), in as many packs of at most ``--pack-size`` as needed.

Configurations per hour = configurations finished / the wall time from the workers' common
start until the last of them ends; the longest length each configuration solved is printed
too. ``--alone-repeats M`` trains only seeds 0 … M−1 one per trial, so that a large sweep's
baseline fits a lease: its rate is measured on those configurations, whose costs the other
seeds' share on average (a seed changes the initial weights, not the work of an iteration,
though it can change how far a configuration climbs).

The workload is M Table I's grid for each problem of ``--tasks`` (default temporal order;
``all``: the four problems, 112 configurations, the ``paper`` profile's whole sweep, adding with
per-batch lengths in [T, 1.1T) as that profile has it), 28 per problem: SRNN, SRNN+OPEN with
λ ∈ {1, 10⁻¹, …, 10⁻⁴} (the unsquared term of M's code, as the ``paper`` profile) and
SRNN+OINIT, each at α ∈ {10⁻¹, …, 10⁻⁴}; the ``paper`` profile's protocol (100 units, batch
20, validation every 100 iterations screened on 1,000 sequences, or half the set if smaller)
shortened to fit a lease: ``--max-iters`` per length (default 2,000; M: 100,000),
``--val-size`` validation sequences (default 2,000; M: 10,000) and lengths 10, 20, … up to
``--max-len`` (default 60). The script says whether both runs
reached the same outcome for every configuration: on a CPU they do, since a pack's products
round as a single configuration's; on a GPU the batched products round differently at other
pack sizes, and a configuration at the margin can stop at another length.

What it leaves out: the sweep's costs per trial (Ray's scheduling and the tracking through
MLflow, 0.22 s a trial on this project's CPU machine, ``benchmarks/sweep_overhead.py``), which
a sweep of one configuration per trial pays once per configuration and a packed one once per
pack.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import queue as queues
import time
from dataclasses import replace
from typing import Any

import torch

from ortho_core.experiments import synthetic

LRS = (1e-1, 1e-2, 1e-3, 1e-4)
"""α of M's grid."""
PENALTIES = (1.0, 1e-1, 1e-2, 1e-3, 1e-4)
"""λ of M's grid for SRNN+OPEN."""


TASKS = ("temporal_order", "temporal_order_3bit", "adding", "permutation")
"""M Table I's problems, in the ``paper`` profile's order."""


def grid(args: argparse.Namespace, task: str) -> list[synthetic.Config]:
    """M Table I's grid for ``task`` under the shortened paper protocol."""
    base = synthetic.Config(task=task, length_jitter=task == "adding", protocol="max_length",
                            seq_len=10, seq_len_step=10, max_seq_len=args.max_len, hidden=100,
                            batch_size=20, max_iters=args.max_iters, eval_every=100,
                            val_size=args.val_size, screen_size=min(1000, args.val_size // 2),
                            init="normalised", data_seed=0, device=args.device)
    kinds = [{"variant": "plain"}]
    kinds += [{"variant": "open", "penalty": lam, "penalty_form": "unsquared"}
              for lam in PENALTIES]
    kinds += [{"variant": "oinit", "pretrain_lr": 0.1, "pretrain_tol": 1e-6}]
    return [replace(base, lr=lr, seed=seed, **kind)
            for seed in range(args.repeats) for kind in kinds for lr in LRS]


def deal(group: list[Any], n_packs: int) -> list[list[Any]]:
    """``group`` dealt in turn into ``n_packs`` packs (:func:`sweeps.plan.deal`)."""
    return [group[i::n_packs] for i in range(n_packs)]


def worker(device: str, queue: Any, results: Any, ready: Any) -> None:
    """Set up the device, wait for the common start, then train items of ``queue`` (lists of
    configurations) until it is empty; put (finish time, outcomes by configuration index) on
    ``results``."""
    torch.set_num_threads(1)
    if device.startswith("cuda"):
        torch.zeros(1, device=device).sum().item()
    ready.wait()
    outcomes: dict[int, tuple[str, float]] = {}
    while True:
        try:
            item = queue.get_nowait()
        except queues.Empty:
            break
        indices, configs = zip(*item, strict=True)
        for index, result in zip(indices, synthetic.train(list(configs), lambda _: None),
                                 strict=True):
            outcomes[index] = (result.outcome.value,
                               result.summary["max_seq_len_solved"])
    results.put((time.monotonic(), outcomes))


def run(items: list[list[tuple[int, synthetic.Config]]], slots: int,
        device: str) -> tuple[float, dict[int, tuple[str, float]]]:
    """Wall seconds for ``slots`` workers to train ``items`` from one queue, and every
    configuration's outcome."""
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        queue = manager.Queue()
        for item in items:
            queue.put(item)
        results = ctx.Queue()
        ready = ctx.Barrier(slots + 1)
        procs = [ctx.Process(target=worker, args=(device, queue, results, ready))
                 for _ in range(slots)]
        for p in procs:
            p.start()
        ready.wait()
        start = time.monotonic()
        finished = [results.get() for _ in procs]
        for p in procs:
            p.join()
    outcomes: dict[int, tuple[str, float]] = {}
    for _, part in finished:
        outcomes.update(part)
    return max(t for t, _ in finished) - start, outcomes


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    p.add_argument("--slots", type=int, default=4, help="trials sharing the device at once")
    p.add_argument("--max-iters", type=int, default=2000, help="iterations per length")
    p.add_argument("--val-size", type=int, default=2000, help="validation sequences")
    p.add_argument("--max-len", type=int, default=60, help="longest sequence length tried")
    p.add_argument("--tasks", default="temporal_order",
                   help=f"problems, comma-separated, or 'all' ({', '.join(TASKS)})")
    p.add_argument("--repeats", type=int, default=1,
                   help="seeds per configuration (a spec's repeats: seeds 0 … N−1), default 1")
    p.add_argument("--pack-size", type=int, default=28,
                   help="most configurations a pack holds (default 28, the paper profile's)")
    p.add_argument("--alone-repeats", type=int, default=None,
                   help="train only the first M seeds of each configuration one per trial "
                        "(default: all); configurations per hour is a rate either way")
    p.add_argument("--modes", default="alone,packed",
                   help="what to run, comma-separated: alone (one configuration per trial), "
                        "packed, or alone,packed (the default); the ratio needs both")
    p.add_argument("--quick", action="store_true",
                   help="200 iterations per length, 200 validation sequences, T up to 20")
    args = p.parse_args()
    if args.quick:
        args.max_iters, args.val_size, args.max_len = 200, 200, 20
    tasks = TASKS if args.tasks == "all" else tuple(args.tasks.split(","))
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown:
        p.error(f"--tasks: unknown problem(s) {', '.join(unknown)}; choose from {', '.join(TASKS)}")
    for name, value in (("--repeats", args.repeats), ("--pack-size", args.pack_size),
                        ("--slots", args.slots)):
        if value < 1:
            p.error(f"{name} must be at least 1, got {value}")
    alone_repeats = args.repeats if args.alone_repeats is None else args.alone_repeats
    if not 1 <= alone_repeats <= args.repeats:
        p.error(f"--alone-repeats must be in [1, --repeats = {args.repeats}], got {alone_repeats}")
    modes = set(args.modes.split(","))
    if not modes or modes - {"alone", "packed"}:
        p.error(f"--modes: choose from alone and packed, got {args.modes!r}")
    by_task = [grid(args, task) for task in tasks]
    configs = list(enumerate(c for group in by_task for c in group))
    name = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "cpu"
    print(f"{len(configs)} configurations ({', '.join(tasks)}; {args.repeats} seed(s) each), "
          f"{args.slots} slots on {name}; "
          f"{args.max_iters} iterations per length, {args.val_size} validation sequences, "
          f"T ≤ {args.max_len}",
          flush=True)
    singles = [[c] for c in configs if c[1].seed < alone_repeats]
    per_task = max(1, args.slots // len(tasks))
    packs, start = [], 0
    for group in by_task:
        numbered = configs[start:start + len(group)]
        packs += deal(numbered, max(per_task, -(-len(group) // args.pack_size)))
        start += len(group)
    rates = {}
    outcomes = {}
    runs = {"one per trial": singles, "packed": packs}
    if "alone" not in modes:
        del runs["one per trial"]
    if "packed" not in modes:
        del runs["packed"]
    for mode, items in runs.items():
        wall, outcomes[mode] = run(items, args.slots, args.device)
        rates[mode] = sum(map(len, items)) / wall * 3600
        sizes = sorted({len(item) for item in items})
        print(f"{mode:<14} {len(items):>3} trials of {'/'.join(map(str, sizes))} "
              f"configuration(s): wall {wall:7.1f} s, {rates[mode]:8.0f} configurations/h",
              flush=True)
        print("  longest T solved, by configuration: "
              + " ".join(str(int(outcomes[mode][i][1])) for i in sorted(outcomes[mode])),
              flush=True)
    if len(runs) < 2:
        return
    same = all(outcomes["packed"][i] == outcome
               for i, outcome in outcomes["one per trial"].items())
    print(f"packed / one per trial = {rates['packed'] / rates['one per trial']:.2f}x "
          f"configurations per hour; outcomes identical: {'yes' if same else 'no'}")
    if not same:
        for index in sorted(outcomes["one per trial"]):
            a, b = outcomes["one per trial"][index], outcomes["packed"][index]
            if a != b:
                print(f"  configuration {index}: one per trial {a}, packed {b}")


if __name__ == "__main__":
    main()
