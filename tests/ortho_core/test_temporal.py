"""Temporal gradients (G eqs. 3.1-3.3) from one hand-written BPTT pass, checked against G's
definition computed by autograd on an unrolled SRNN whose weights are replicated per step."""

from __future__ import annotations

import pytest
import torch

from ortho_core.data.synthetic import get_task
from ortho_core.models.srnn import SRNNInit, Trace, init_srnn
from ortho_core.temporal import CHUNK_ELEMENTS, combine, temporal_sq_norms

K, B, T, H = 3, 5, 7, 6


def pack_and_batch(task_name: str = "temporal_order"):
    task = get_task(task_name)
    inits = [SRNNInit(seed, "gaussian", 0.4) for seed in range(K)]
    model = init_srnn(task.n_in, H, task.n_out, inits, dtype=torch.float64)
    with torch.no_grad():
        for p in (model.b_h, model.b_y):
            p.normal_(0, 0.3, generator=torch.Generator().manual_seed(9))
    raw, y = task.sample(B, T, torch.Generator().manual_seed(4))
    x = task.encode(raw, torch.float64)
    return task, model, x, (y.double() if task.loss == "mse" else y)


def temporal_gradients(trace: Trace) -> list[torch.Tensor]:
    """Every temporal gradient ∇_θ L|_t (G eqs. 3.1, 3.3) from a BPTT trace: one (K, T, *shape)
    tensor per parameter (W_xh, W_hh, b_h, W_hy, b_y), summing over t to the gradient
    (eq. 3.2). K·T·|θ| numbers: the reference that :func:`~ortho_core.temporal.temporal_sq_norms`
    and :func:`~ortho_core.temporal.combine` reduce without holding them."""
    x, hs, da = trace.x, trace.hs, trace.da
    steps = hs.shape[1]
    g_xh = torch.einsum("ktbh,tbi->kthi", da, x.transpose(0, 1))
    g_hh = torch.zeros(*hs.shape[:2], hs.shape[3], hs.shape[3], dtype=hs.dtype,
                       device=hs.device)
    if steps > 1:
        g_hh[:, 1:] = torch.einsum("ktbh,ktbj->kthj", da[:, 1:], hs[:, :-1])
    g_bh = da.sum(dim=2)
    readout = []
    for grad in trace.grads[3:]:
        per_step = grad.new_zeros((grad.shape[0], steps, *grad.shape[1:]))
        per_step[:, -1] = grad
        readout.append(per_step)
    return [g_xh, g_hh, g_bh, *readout]


def replicated_temporal_gradients(task, model, x, y) -> list[torch.Tensor]:
    """G's definition: the gradient with respect to the k-th replicate of each variable
    (one leaf tensor per step), for every member; (K, T, *shape) per parameter."""
    out = [torch.zeros(K, T, *p.shape[1:], dtype=torch.float64) for p in model.parameters()]
    for k in range(K):
        base = [p.detach()[k] for p in model.parameters()]
        reps = [[w.clone().requires_grad_() for _ in range(T)] for w in base]
        h = torch.zeros(B, H, dtype=torch.float64)
        for t in range(T):
            h = torch.tanh(x[:, t] @ reps[0][t].T + h @ reps[1][t].T + reps[2][t])
        logits = h @ reps[3][T - 1].T + reps[4][T - 1]
        loss = task.losses(logits[None], y)[0]
        leaves = [r for rep in reps for r in rep]
        grads = torch.autograd.grad(loss, leaves, allow_unused=True)
        for j in range(5):
            for t in range(T):
                g = grads[j * T + t]
                if g is not None:
                    out[j][k, t] = g
    return out


@pytest.mark.parametrize("task_name", ["temporal_order", "adding_galvan"])
def test_temporal_gradients_are_the_replicate_gradients_and_sum_to_the_gradient(task_name):
    task, model, x, y = pack_and_batch(task_name)
    trace = model.bptt(x, lambda out: task.losses(out, y))
    got = temporal_gradients(trace)
    expected = replicated_temporal_gradients(task, model, x, y)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-14)
    assert got[1][:, 0].abs().max() == 0, "h_0 = 0: no W_hh term at the first step"
    assert got[3][:, :-1].abs().max() == 0 and got[3][:, -1].abs().max() > 0
    losses = task.losses(model(x), y)
    full = torch.autograd.grad(losses.sum(), list(model.parameters()))
    for g, f in zip(got, full, strict=True):
        torch.testing.assert_close(g.sum(1), f, rtol=1e-10, atol=1e-14)
    for g, f in zip(trace.grads, full, strict=True):
        torch.testing.assert_close(g, f, rtol=0, atol=0)
    torch.testing.assert_close(trace.losses, losses.detach(), rtol=0, atol=0)


def test_per_step_norms_and_weighted_sums(monkeypatch: pytest.MonkeyPatch):
    task, model, x, y = pack_and_batch()
    trace = model.bptt(x, lambda out: task.losses(out, y))
    full = temporal_gradients(trace)
    expected = torch.stack([g.reshape(K, T, -1).square().sum(-1) for g in full], dim=-1)
    torch.testing.assert_close(temporal_sq_norms(trace), expected, rtol=1e-12, atol=1e-20)
    monkeypatch.setattr("ortho_core.temporal.CHUNK_ELEMENTS", K * H * H * 2)
    assert CHUNK_ELEMENTS > K * H * H * 2
    torch.testing.assert_close(temporal_sq_norms(trace), expected, rtol=1e-12, atol=1e-20)
    weights = torch.rand(K, T, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for got, g in zip(combine(trace, weights), full, strict=True):
        want = (g * weights.view(K, T, *[1] * (g.dim() - 2))).sum(1)
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-14)
