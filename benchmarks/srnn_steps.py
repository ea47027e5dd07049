"""The two training iterations the SRNN benchmarks compare (``srnn_throughput.py``,
``pixel_throughput.py``): the straightforward per-configuration autograd loop, and a pack of
configurations (:class:`~ortho_core.models.srnn.PackedSRNN` and ``sgd_step``); and the
matmul FLOPs both are measured against.

Both take a fixed batch (x (B, T, I), labels (B,)), so that data generation is not measured,
and return a function that runs one iteration (waiting for the device on CUDA).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from ortho_core.models import SRNNInit, init_srnn
from ortho_core.optim import sgd_step

Step = Callable[[], None]


def flops_per_trial_iteration(batch: int, steps: int, n_in: int, hidden: int,
                              n_out: int) -> int:
    """Matmul FLOPs of forward + backward for one member (2 per multiply-add): forward
    2BHI·T + 2BH²·(T−1) + 2BHO, backward 2BHO + 2BHO + 2BH²·(T−1) + 2BH²·(T−1) + 2BHI·T."""
    b, h, i, o = batch, hidden, n_in, n_out
    return 4 * b * h * i * steps + 6 * b * h * h * (steps - 1) + 6 * b * h * o


def synchronised(fn: Step, device: torch.device) -> Step:
    """``fn`` followed by waiting for the device, so that timing it times the device's work."""
    if device.type != "cuda":
        return fn

    def call() -> None:
        fn()
        torch.cuda.synchronize(device)

    return call


def loop_step(x: torch.Tensor, y: torch.Tensor, hidden: int, n_out: int, lr: float,
              init_std: float, single_thread: bool = False) -> Step:
    """One iteration of the straightforward program: a Python loop over time of
    ``h = tanh(x_t @ W_xhᵀ + h @ W_hhᵀ + b)`` under autograd, ``loss.backward()`` and
    ``p -= lr * p.grad``, one configuration; with ``single_thread``, on one intra-op thread
    (as a sweep runs such trials, one per core)."""
    device = x.device
    g = torch.Generator().manual_seed(0)

    def weight(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * init_std).to(device).requires_grad_()

    w_xh, w_hh, w_hy = weight(hidden, x.shape[2]), weight(hidden, hidden), weight(n_out, hidden)
    b_h = torch.zeros(hidden, device=device, requires_grad=True)
    b_y = torch.zeros(n_out, device=device, requires_grad=True)
    params = [w_xh, w_hh, b_h, w_hy, b_y]

    def loop() -> None:
        h = torch.zeros(x.shape[0], hidden, device=device)
        for t in range(x.shape[1]):
            h = torch.tanh(x[:, t] @ w_xh.T + h @ w_hh.T + b_h)
        F.cross_entropy(h @ w_hy.T + b_y, y).backward()
        with torch.no_grad():
            for p in params:
                p -= lr * p.grad
                p.grad = None

    def step() -> None:
        threads = torch.get_num_threads()
        if single_thread:
            torch.set_num_threads(1)
        try:
            loop()
        finally:
            torch.set_num_threads(threads)

    return synchronised(step, device)


def pack_step(x: torch.Tensor, y: torch.Tensor, inits: list[SRNNInit], hidden: int,
              n_out: int, lr: float, graphs: bool = True) -> Step:
    """One iteration of a pack with one member per entry of ``inits`` (``PackedSRNN`` and
    ``sgd_step``); ``graphs``: its time loops as CUDA graphs on a GPU."""
    device = x.device
    model = init_srnn(x.shape[2], hidden, n_out, inits, device=device)
    model.cuda_graphs = graphs
    params = list(model.parameters())
    rates = torch.full((len(inits),), lr, device=device)
    active = torch.ones(len(inits), dtype=torch.bool, device=device)
    targets = y.repeat(len(inits))

    def step() -> None:
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, n_out), targets, reduction="sum") / x.shape[0]
        sgd_step(params, torch.autograd.grad(loss, params), rates, active, overwrite_grads=True)

    return synchronised(step, device)
