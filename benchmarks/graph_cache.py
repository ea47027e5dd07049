"""Training iterations of a pack whose batches change length (``length_jitter``) on a GPU:
CUDA graphs kept per input length, against one pair of graphs recaptured at every change of
length (the workspace before a72b16b), against no graphs.

Run from the repository root, with the package installed (``pip install -e .``):

    python benchmarks/graph_cache.py                      # on a CUDA machine, about a minute
    python benchmarks/graph_cache.py --lengths 50 --iters 200
    python benchmarks/graph_cache.py --device cpu --quick # the path; graphs apply on CUDA only

One pack of the ``paper`` grid's kinds (``eval_share.pack``: SRNN, SRNN+OPEN, SRNN+OINIT at
α ∈ {10⁻¹…10⁻⁴}) on M's adding problem with G's per-batch lengths in [T₀, 1.1T₀), as the
``paper`` profile of ``synthetic-max-length`` trains it, for each T₀ of ``--lengths``. The
trainer's stage (:class:`~ortho_core.experiments.synthetic_stage.Stage`) draws ``--iters``
batches once; each way then trains a fresh stage from the same weights on those batches,
first captures included (T₀/10 lengths, so at most that many captures with graphs kept per
length; up to one per iteration with one pair), and the clock stops after the device has
finished; one untimed warm-up of 20 iterations comes first. The ways are switched by the
model's own settings: ``PackedSRNN.cuda_graphs`` and the workspace's byte bound
``srnn.GRAPH_BYTES`` (0 keeps only the latest pair).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch
from eval_share import pack, sync
from timing import add_subnormals, clock_of

from ortho_core.data.synthetic import get_task
from ortho_core.devices import DTYPES, resolve_device
from ortho_core.experiments.synthetic import initial_weights
from ortho_core.experiments.synthetic_stage import Stage
from ortho_core.models import srnn

WAYS = {"graphs per length": (True, srnn.GRAPH_BYTES), "one pair": (True, 0),
        "no graphs": (False, srnn.GRAPH_BYTES)}
"""Each way's ``cuda_graphs`` and ``GRAPH_BYTES``."""


def seconds(size: int, length: int, iters: int, device: str, graphs: bool,
            graph_bytes: int) -> tuple[float, list[int]]:
    """Seconds for ``iters`` iterations of a fresh pack of ``size`` at T₀ = ``length``, and the
    lengths its batches had."""
    configs = [replace(c, task="adding", length_jitter=True) for c in
               pack(size, length, None, device)]
    cfg = configs[0]
    task, dev, dtype = get_task(cfg.task), resolve_device(cfg.device), DTYPES[cfg.dtype]
    weights, _ = initial_weights(configs, task, dtype, dev)
    stage = Stage(configs, task, length, weights, dtype, dev)
    stage.model.cuda_graphs = graphs
    batches = stage.draw(iters)
    srnn.GRAPH_BYTES = graph_bytes
    sync(dev)
    start = time.perf_counter()
    for raw, y, beta in batches:
        stage.iteration(raw, y, beta)
    sync(dev)
    return time.perf_counter() - start, [raw.shape[1] for raw, _, _ in batches]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--pack", type=int, default=28, help="K, members in the pack (default 28)")
    p.add_argument("--iters", type=int, default=300, help="iterations per way and T₀")
    p.add_argument("--lengths", default="20,50,100", help="T₀ values, comma-separated")
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    p.add_argument("--quick", action="store_true", help="K = 4, 20 iterations, T₀ = 20")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    p.set_defaults(cpu_time=False)
    add_subnormals(p)
    args = p.parse_args()
    if args.quick:
        args.pack, args.iters, args.lengths = 4, 20, "20"
    clock_of(args)
    lengths = [int(t) for t in args.lengths.split(",")]
    name = (torch.cuda.get_device_name(args.device) if args.device.startswith("cuda")
            else "cpu")
    print(f"K = {args.pack}, adding with per-batch lengths in [T0, 1.1 T0), H = 100, batch 20, "
          f"{args.iters} iterations per way, on {name}")
    print(f"{'T0':>4} {'lengths':>8} " + " ".join(f"{w + ' ms/it':>22}" for w in WAYS)
          + f" {'one pair / per length':>22} {'none / per length':>18}")
    graphs, graph_bytes = WAYS["graphs per length"]
    seconds(args.pack, lengths[0], min(args.iters, 20), args.device, graphs, graph_bytes)
    for length in lengths:
        times = {}
        for way, (graphs, graph_bytes) in WAYS.items():
            times[way], drawn = seconds(args.pack, length, args.iters, args.device, graphs,
                                        graph_bytes)
        per_it = {w: 1e3 * t / args.iters for w, t in times.items()}
        kept = times["graphs per length"]
        print(f"{length:>4} {len(set(drawn)):>8} "
              + " ".join(f"{per_it[w]:>22.2f}" for w in WAYS)
              + f" {times['one pair'] / kept:>21.2f}x {times['no graphs'] / kept:>17.2f}x",
              flush=True)


if __name__ == "__main__":
    main()
