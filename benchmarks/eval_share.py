"""Share of a synthetic trial's time spent in validation, full protocol against screened.

Run from the repository root, with the package installed (``pip install -e .``):

    python benchmarks/eval_share.py                 # K = 16, 300 iterations, about a minute
    python benchmarks/eval_share.py --quick         # 100 iterations, K = 4
    python benchmarks/eval_share.py --threads 1 --cpu-time   # on a busy shared machine
    python benchmarks/eval_share.py --length 300 --pack 28   # a longer T, the paper's pack
    python benchmarks/eval_share.py --elements 524288        # smaller validation chunks
    python benchmarks/eval_share.py --pack 9 --length 50 --val-size 1000 --screen 100
                                                             # the cpu profile's settings

One pack at the ``paper`` settings of ``sweeps/specs/synthetic-max-length.yaml`` (M Table I):
temporal order at T = 100 (or ``--length``), 100 tanh units, SGD on batches of 20, validation
every 100 iterations on 10,000 sequences (or ``--val-size``). The pack's K members are the
paper grid's own kinds: SRNN, SRNN+OPEN (unsquared term, λ ∈ {1, 0.1}) and SRNN+OINIT at
α ∈ {10⁻¹…10⁻⁴} (K = 16).

The trainer's stage (:class:`~ortho_core.experiments.synthetic_stage.Stage`) runs the same
``--iters`` iterations twice from the same seeds: once validating on the full set at every
evaluation (``screen_size`` None, the paper's protocol) and once screened on the first
``--screen`` sequences (``screen_size``). Training time (drawing batches and the SGD
iterations) and validation time are clocked separately; the share is validation / (training
+ validation). On CUDA, ρ(W_hh) is computed on a host thread while the pack trains on, as
the trainer does (:func:`~ortho_core.experiments.synthetic_stage.defers_radius`): waiting for
it counts as validation. The evaluations are the steady state of a length: the one evaluation that
ends a length's budget is always on the full set, one in ``max_iters / eval_every`` = 1,000
at M's budget, so it is left out. The two runs must reach the same decision (solved,
unsolved or diverged) for every member at every evaluation; the script checks it.
"""

from __future__ import annotations

import argparse

import torch
from timing import add_subnormals, clock_of

from ortho_core.data.synthetic import get_task
from ortho_core.devices import DTYPES, resolve_device
from ortho_core.experiments import synthetic_stage
from ortho_core.experiments.synthetic import Config, initial_weights
from ortho_core.experiments.synthetic_stage import EVAL_KEYS, Stage, defers_radius

PAPER = {"task": "temporal_order", "seq_len": 100, "hidden": 100, "batch_size": 20,
         "eval_every": 100, "val_size": 10_000, "protocol": "fixed", "init": "normalised"}
"""The ``paper`` profile's fixed settings at T = 100 (``max_iters`` is left at M's 100,000)."""
RATES = (1e-1, 1e-2, 1e-3, 1e-4)


def pack(size: int, length: int, screen_size: int | None, device: str,
         val_size: int = PAPER["val_size"]) -> list[Config]:
    """``size`` members of the paper grid (cycling SRNN, OPEN λ = 1, OPEN λ = 0.1, OINIT over
    the four rates), validating on ``val_size`` sequences."""
    kinds = [{"variant": "plain"},
             {"variant": "open", "penalty": 1.0, "penalty_form": "unsquared"},
             {"variant": "open", "penalty": 0.1, "penalty_form": "unsquared"},
             {"variant": "oinit", "pretrain_lr": 0.1, "pretrain_tol": 1e-6}]
    fixed = {**PAPER, "seq_len": length, "val_size": val_size}
    return [Config(**fixed, **kinds[i // len(RATES) % len(kinds)], lr=RATES[i % len(RATES)],
                   seed=i, screen_size=screen_size, device=device) for i in range(size)]


def measure(configs: list[Config], iters: int, clock) -> tuple[float, float, list[list[str]]]:
    """Seconds training, seconds validating, and every evaluation's decision per member."""
    cfg = configs[0]
    task, device, dtype = get_task(cfg.task), resolve_device(cfg.device), DTYPES[cfg.dtype]
    weights, _ = initial_weights(configs, task, dtype, device)
    stage = Stage(configs, task, cfg.seq_len, weights, dtype, device)
    training = validating = 0.0
    decisions = []
    later = defers_radius(device)
    radius = None
    for _ in range(iters // cfg.eval_every):
        start = clock()
        for raw, y, beta in stage.draw(cfg.eval_every):
            stage.iteration(raw, y, beta)
        sync(device)
        middle = clock()
        table = stage.evaluate(radius=not later).tolist()
        if radius is not None:
            radius.result()
        radius = stage.radius_later() if later else None
        sync(device)
        training, validating = training + middle - start, validating + clock() - middle
        decisions.append([_decision(row) for row in table])
    if radius is not None:
        start = clock()
        radius.result()
        validating += clock() - start
    return training, validating, decisions


def _decision(row: list[float]) -> str:
    """What the trainer decides from one evaluation row (``zero_errors``)."""
    diverged, wrong, screened = row[len(EVAL_KEYS):]
    if diverged:
        return "diverged"
    return "unsolved" if screened or wrong > 0 else "solved"


def sync(device: torch.device) -> None:
    """Wait for ``device``'s queued work (on CUDA), so that the clock times it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--pack", type=int, default=16, help="K, members in the pack")
    p.add_argument("--iters", type=int, default=300, help="iterations per run")
    p.add_argument("--length", type=int, default=100, help="T, the sequence length")
    p.add_argument("--elements", type=int, default=None,
                   help="synthetic_stage.EVAL_ELEMENTS, the numbers a validation chunk holds")
    p.add_argument("--val-size", type=int, default=PAPER["val_size"],
                   help="validation sequences (default the paper's 10,000; the cpu profile "
                   "has 1,000)")
    p.add_argument("--screen", type=int, default=1000, help="screen_size of the screened run")
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    p.add_argument("--quick", action="store_true", help="K = 4 and 100 iterations")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    p.add_argument("--cpu-time", action="store_true",
                   help="time by this process's CPU time (steadier on a shared machine)")
    add_subnormals(p)
    args = p.parse_args()
    if args.quick:
        args.pack, args.iters = 4, 100
    clock = clock_of(args)
    if args.elements:
        synthetic_stage.EVAL_ELEMENTS = args.elements
    rows = {}
    for name, screen in (("full", None), ("screened", args.screen)):
        rows[name] = measure(pack(args.pack, args.length, screen, args.device, args.val_size),
                             args.iters, clock)
    print(f"K = {args.pack}, T = {args.length}, H = 100, batch 20, val_size {args.val_size:,}, "
          f"eval_every 100, chunks of {synthetic_stage.EVAL_ELEMENTS:,} numbers, "
          f"{args.iters} iterations, device {resolve_device(args.device)}, "
          f"{torch.get_num_threads()} threads")
    print(f"{'protocol':<10} {'train s':>9} {'eval s':>9} {'eval share':>11}")
    for name, (training, validating, _) in rows.items():
        print(f"{name:<10} {training:9.2f} {validating:9.2f} "
              f"{validating / (training + validating):11.1%}")
    (t_full, v_full, d_full), (t_scr, v_scr, d_scr) = rows["full"], rows["screened"]
    print(f"validation time full / screened: {v_full / v_scr:.1f}x; trial time full / "
          f"screened: {(t_full + v_full) / (t_scr + v_scr):.2f}x")
    same = d_full == d_scr
    print(f"decisions identical at all {len(d_full)} evaluations x {args.pack} members: "
          f"{'yes' if same else 'NO'}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
