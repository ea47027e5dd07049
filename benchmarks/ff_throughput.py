"""Throughput of the packed feedforward trainers against a straightforward per-configuration loop.

Run from the repository root:

    python benchmarks/ff_throughput.py              # full table, K in {1, 8, 32}, about 1-3 minutes
    python benchmarks/ff_throughput.py --quick      # a few seconds, K in {1, 8}
    python benchmarks/ff_throughput.py --threads 1 --repeats 5
    python benchmarks/ff_throughput.py --threads 1 --cpu-time   # steadier on a shared machine

Two nets, as the trainers build them:

- ``ff``: M's feedforward net (``ff-mnist``): 784-100×10-10, tanh, W ~ N(0, 0.001²), batch 20;
- ``mlp``: K's MLP(100, 128) (``lcw-mlp``, variant ``plain``): 784-128×100-10, sigmoid, Glorot
  initialisation, batch 128.

One trial-iteration is what one configuration does per SGD iteration: forward, softmax
cross-entropy, backward and the update, on a fixed MNIST-shaped batch (uniform pixels; data
loading is not measured). The packed implementation is the trainers' own step
(:func:`ortho_core.experiments.feedforward.train_step`: one ``PackedMLP`` of K members, one
backward, the multi-tensor update of :func:`ortho_core.optim.sgd_step`): K trial-iterations per
call. The baseline, measured in the same process, is the straightforward PyTorch program: K
separate ``nn.Sequential`` stacks of ``nn.Linear`` and the nonlinearity, each with its own
``torch.optim.SGD``, stepped one after the other in a Python loop (``zero_grad``, forward,
``loss.backward()``, ``step``), starting from the same weights as the pack's members (the speed
of float arithmetic can depend on the values: deep sigmoid nets have subnormal gradients).
"ratio" is the packed rate over the loop's at the same K; the two are timed alternately, best
of ``--repeats``, so that a change in the machine's load shifts both.

FLOPs are counted per trial-iteration as 2 per multiply-add of the matrix products a minimal
implementation needs: forward 2B·Σ in·out; backward 2B·Σ in·out for the weight gradients plus
2B·Σ in·out over every layer but the first for the gradients of the layer inputs (the input
batch needs none). Elementwise work (nonlinearity, softmax, bias, the SGD update) is not
counted, so the achieved rate understates the work done. The machine's float32 matmul rate is
measured in the same process by timing a 2048 × 2048 sgemm; "peak" is the achieved rate as a
fraction of it. The header line gives the machine's load average, which the wall clock feels.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from timing import clock_of, parser, seconds_per_call, sgemm_rate
from torch import nn

from ortho_core.experiments import ff_mnist, lcw_mlp
from ortho_core.experiments.feedforward import train_step
from ortho_core.models.mlp import PackedMLP


@dataclass(frozen=True)
class Net:
    """One benchmarked network."""

    name: str
    sizes: tuple[int, ...]
    activation: str
    batch: int
    lr: float


NETS = (
    Net("ff", (784, *[100] * 10, 10), "tanh", 20, 0.01),
    Net("mlp", (784, *[128] * 100, 10), "sigmoid", 128, 0.1),
)


def flops_per_trial_iteration(net: Net) -> int:
    """Matmul FLOPs of forward + backward for one member (see the module docstring)."""
    products = [a * b for a, b in zip(net.sizes, net.sizes[1:], strict=False)]
    return 2 * net.batch * (2 * sum(products) + sum(products[1:]))


def fixed_batch(net: Net) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed MNIST-shaped batch: uniform pixels in [0, 1] and labels in 0..9."""
    gen = torch.Generator().manual_seed(0)
    return (torch.rand(net.batch, net.sizes[0], generator=gen),
            torch.randint(net.sizes[-1], (net.batch,), generator=gen))


def packed_model(net: Net, k: int) -> PackedMLP:
    """The trainer's pack of K members (seeds 0..K−1), as ``ff-mnist``/``lcw-mlp`` build it."""
    x, _ = fixed_batch(net)
    device = torch.device("cpu")
    if net.name == "ff":
        return ff_mnist.build_model([ff_mnist.Config(seed=s) for s in range(k)], device)
    configs = [lcw_mlp.Config(variant="plain", layers=len(net.sizes) - 2, hidden=net.sizes[1],
                              seed=s) for s in range(k)]
    return lcw_mlp.build_model(configs, x, device)


def packed_step(net: Net, k: int) -> Callable[[], None]:
    """One iteration of the trainer's packed step for K members."""
    x, y = fixed_batch(net)
    model = packed_model(net, k)
    params = list(model.parameters())
    lr = torch.full((k,), net.lr)
    active = torch.ones(k, dtype=torch.bool)

    def step() -> None:
        train_step(model, params, x, y, lr, active, keep_loss_grads=False)

    return step


def loop_step(net: Net, k: int) -> Callable[[], None]:
    """One iteration of K plain nn.Sequential models, one after the other, each starting from
    the weights of the corresponding member of :func:`packed_model`."""
    x, y = fixed_batch(net)
    act = {"tanh": nn.Tanh, "sigmoid": nn.Sigmoid}[net.activation]
    pack = packed_model(net, k)
    models: list[nn.Sequential] = []
    for member in range(k):
        layers: list[nn.Module] = []
        for i, packed_layer in enumerate(pack.layers):
            linear = nn.Linear(*reversed(packed_layer.weight.shape[1:]))
            with torch.no_grad():
                linear.weight.copy_(packed_layer.weight[member])
                linear.bias.copy_(packed_layer.bias[member])
            layers.append(linear)
            if i < len(pack.layers) - 1:
                layers.append(act())
        models.append(nn.Sequential(*layers))
    optimisers = [torch.optim.SGD(m.parameters(), lr=net.lr) for m in models]

    def step() -> None:
        for model, opt in zip(models, optimisers, strict=True):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()

    return step


def run(packs: Sequence[int], min_time: float, repeats: int, clock: Callable[[], float]) -> None:
    """Print the table: one row per net, K and implementation."""
    peak = sgemm_rate(repeats, clock)
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"threads {torch.get_num_threads()}; timed by "
          f"{'process CPU time' if clock is time.process_time else 'wall clock'}; "
          f"load average {load}; 2048² sgemm {peak / 1e9:.1f} GFLOP/s")
    print(f"| {'net':<4} | {'K':>3} | {'impl':<4} | {'trial-it/s':>10} | {'ratio':>5} | "
          f"{'GFLOP/s':>7} | {'peak':>6} |")
    print("|------|-----|------|------------|-------|---------|--------|")
    for net in NETS:
        flops = flops_per_trial_iteration(net)
        for k in packs:
            seconds = seconds_per_call([loop_step(net, k), packed_step(net, k)], min_time,
                                       repeats, clock)
            rates = {impl: k / s for impl, s in zip(("loop", "pack"), seconds, strict=True)}
            for impl, rate in rates.items():
                gflops = rate * flops / 1e9
                print(f"| {net.name:<4} | {k:>3} | {impl:<4} | {rate:>10.1f} | "
                      f"{rate / rates['loop']:>5.2f} | {gflops:>7.1f} | "
                      f"{gflops * 1e9 / peak:>6.1%} |", flush=True)


def main() -> None:
    args = parser(__doc__.splitlines()[0], repeats=2,
                  quick="K in {1, 8}, shorter timings").parse_args()
    clock = clock_of(args)
    packs = [1, 8] if args.quick else [1, 8, 32]
    run(packs, min_time=0.1 if args.quick else 0.5, repeats=args.repeats, clock=clock)


if __name__ == "__main__":
    main()
