"""Timing helpers shared by the throughput benchmarks: the command-line options, a repeatable
per-call timer, and the machine's float32 matmul rate measured in the same process."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import torch

from ortho_core.subnormals import SUBNORMAL_MODES, apply_mode


def add_subnormals(p: argparse.ArgumentParser) -> None:
    """``--subnormals``, applied by :func:`clock_of`: benchmarks that time the trainers' steps
    (not their ``train``, which applies its config's mode) compute as the trainers do."""
    p.add_argument("--subnormals", choices=SUBNORMAL_MODES, default="flush",
                   help="CPU arithmetic on subnormal numbers, as the trainers' `subnormals` "
                        "key (default flush, theirs; keep: IEEE 754)")


def parser(description: str, repeats: int, quick: str,
           subnormals: bool = True) -> argparse.ArgumentParser:
    """The options every throughput benchmark takes (``--quick`` described by ``quick``;
    ``--subnormals`` unless the benchmark sets the modes itself)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--repeats", type=int, default=repeats,
                   help="timings per cell; the best is kept")
    p.add_argument("--quick", action="store_true", help=quick)
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    p.add_argument("--cpu-time", action="store_true",
                   help="time by this process's CPU time instead of the wall clock: steadier "
                        "when other jobs share the cores; meaningful with --threads 1")
    if subnormals:
        add_subnormals(p)
    return p


def clock_of(args: argparse.Namespace) -> Callable[[], float]:
    """Apply ``--subnormals`` (before any parallel work, so that PyTorch's threads start in
    that mode) and ``--threads``, and return the clock ``--cpu-time`` asks for."""
    if getattr(args, "subnormals", None):
        apply_mode(args.subnormals)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    return time.process_time if args.cpu_time else time.perf_counter


def seconds_per_call(fns: Sequence[Callable[[], None]], min_time: float, repeats: int,
                     clock: Callable[[], float]) -> list[float]:
    """For each of ``fns``, the best over ``repeats`` of its mean time by ``clock`` over at
    least ``min_time`` seconds; the functions take turns in every repeat, each after one
    untimed call (so the allocator has settled after the previous one)."""
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            fn()
            calls, start = 0, clock()
            while True:
                fn()
                calls += 1
                elapsed = clock() - start
                if elapsed >= min_time and calls >= 2:
                    break
            best[i] = min(best[i], elapsed / calls)
    return best


def sgemm_rate(repeats: int, clock: Callable[[], float]) -> float:
    """The float32 matmul rate (FLOP/s) of a 2048 × 2048 sgemm."""
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    return 2 * n**3 / seconds_per_call([lambda: a @ b], 0.3, repeats, clock)[0]
