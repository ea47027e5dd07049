"""N's geodesic momentum step on packs against the libraries that keep matrices orthogonal.

Run from the repository root (geoopt and geotorch are not dependencies of the project; install
them to measure: ``pip install geoopt geotorch``; a missing one is skipped):

    python benchmarks/riemannian_step.py --threads 1 --cpu-time
    python benchmarks/riemannian_step.py --quick

Per shape (L layers, K members, n × n), the time to move a stack of orthogonal matrices one
step, given ∂J/∂Q (L, K, n, n):

- ``ours``: :class:`ortho_core.riemannian.GeodesicMomentum` (N eqs. 6-9: tangent projection,
  momentum, one batched ``matrix_exp``, transport), the baseline;
- ``geoopt``: ``RiemannianSGD`` (momentum 0.9) on a ``ManifoldParameter`` (L·K, n, n) on
  ``Stiefel()`` (retraction and projection transport), ∂J/∂Q set as its ``.grad``, one
  parameter group (per-member α would need K groups);
- ``torch-param`` and ``geotorch``: ``torch.nn.utils.parametrizations.orthogonal`` and
  ``geotorch.orthogonal`` on a module whose weight is the (L·K, n, n) stack: computing Q from
  the parametrisation, back-propagating ∂J/∂Q through it, and ``torch.optim.SGD`` with
  momentum 0.9 on the unconstrained parameter (what one training step costs them beyond ours).

Printed: microseconds per step and each library's time over ours (ratio > 1: ours is faster),
timed alternately in this process, best of ``--repeats``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import clock_of, parser, seconds_per_call

from ortho_core.riemannian import GeodesicMomentum, reproject

SHAPES = [(20, 8, 2), (50, 8, 4), (40, 8, 8)]
"""(L, K, n): N-F1's 20 layers of 2 units, N-F4's 50 internal layers of 4, N-F3-like width 8."""


def _start(shape: tuple[int, int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    layers, k, n = shape
    g = torch.Generator().manual_seed(0)
    q, _ = reproject(torch.randn(layers, k, n, n, generator=g))
    return q, 1e-2 * torch.randn(layers, k, n, n, generator=g)


def ours(shape: tuple[int, int, int]) -> Callable[[], None]:
    q, grad = _start(shape)
    opt = GeodesicMomentum(q, torch.full((shape[1],), 1e-3), torch.full((shape[1],), 0.9))
    active = torch.ones(shape[1], dtype=torch.bool)
    return lambda: opt.step(q, grad, active)


def geoopt_step(shape: tuple[int, int, int]) -> Callable[[], None] | None:
    try:
        import geoopt
    except ImportError:
        return None
    q, grad = _start(shape)
    p = geoopt.ManifoldParameter(q.flatten(0, 1).clone(), manifold=geoopt.Stiefel())
    opt = geoopt.optim.RiemannianSGD([p], lr=1e-3, momentum=0.9)
    flat = grad.flatten(0, 1)

    def step() -> None:
        p.grad = flat.clone()
        opt.step()
    return step


def _parametrised(shape: tuple[int, int, int], apply: Callable[[nn.Module], None]
                  ) -> Callable[[], None]:
    q, grad = _start(shape)
    holder = nn.Module()
    holder.weight = nn.Parameter(q.flatten(0, 1).clone())
    apply(holder)
    opt = torch.optim.SGD(holder.parameters(), lr=1e-3, momentum=0.9)
    flat = grad.flatten(0, 1)

    def step() -> None:
        opt.zero_grad()
        holder.weight.backward(flat)
        opt.step()
    return step


def torch_param(shape: tuple[int, int, int]) -> Callable[[], None]:
    orthogonal = torch.nn.utils.parametrizations.orthogonal
    return _parametrised(shape, lambda m: orthogonal(m, "weight"))


def geotorch_step(shape: tuple[int, int, int]) -> Callable[[], None] | None:
    try:
        import geotorch
    except ImportError:
        return None
    return _parametrised(shape, lambda m: geotorch.orthogonal(m, "weight"))


def main() -> None:
    args = parser(__doc__.splitlines()[0], repeats=3, quick="one shape, one repeat").parse_args()
    clock = clock_of(args)
    shapes = SHAPES[1:2] if args.quick else SHAPES
    repeats = 1 if args.quick else args.repeats
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'L, K, n':>12} {'method':>12} {'µs/step':>10} {'× ours':>8}")
    for shape in shapes:
        makers = {"ours": ours, "geoopt": geoopt_step, "torch-param": torch_param,
                  "geotorch": geotorch_step}
        fns = {name: make(shape) for name, make in makers.items()}
        fns = {name: fn for name, fn in fns.items() if fn is not None}
        times = dict(zip(fns, seconds_per_call(list(fns.values()), 0.2, repeats, clock),
                         strict=True))
        for name, seconds in times.items():
            print(f"{shape!s:>12} {name:>12} {1e6 * seconds:10.1f} "
                  f"{seconds / times['ours']:8.2f}")


if __name__ == "__main__":
    main()
