"""SGD over a pack: clipping factors and masked in-place steps, exact to p − α·g."""

from __future__ import annotations

import math

import pytest
import torch

from ortho_core import optim
from ortho_core.optim import clip_factors, sgd_step


@pytest.fixture(params=["reads-active", "masks"])
def stopped_by(request, monkeypatch) -> str:
    """Run a test through both ways ``sgd_step`` leaves stopped members alone: looking them
    up in ``active`` (the CPU's) and masking every step (an accelerator's, no sync)."""
    monkeypatch.setattr(optim, "_reads_active",
                        lambda device, tensors: request.param == "reads-active")
    return request.param


def test_clip_factors() -> None:
    norm = torch.tensor([0.5, 2.0, 4.0, 0.0])
    assert torch.equal(clip_factors(norm, None), torch.ones(4))
    assert torch.equal(clip_factors(norm, 0.0), torch.ones(4))
    torch.testing.assert_close(clip_factors(norm, 1.0), torch.tensor([1.0, 0.5, 0.25, 1.0]))
    per_member = torch.tensor([1.0, 0.0, 2.0, 1.0])
    torch.testing.assert_close(clip_factors(norm, per_member),
                               torch.tensor([1.0, 1.0, 0.5, 1.0]))
    assert math.isnan(clip_factors(torch.tensor([math.nan]), 1.0).item())


def test_clipped_gradient_has_norm_tau() -> None:
    g = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
    scaled = g * clip_factors(g.norm(dim=1), 1.0)[:, None]
    torch.testing.assert_close(scaled.norm(dim=1), torch.tensor([1.0, 0.5]))


def test_sgd_step_updates_active_members_only() -> None:
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(3, 4, 5, generator=gen)
    b = torch.randn(3, 4, generator=gen)
    gw = torch.randn(3, 4, 5, generator=gen)
    gb = torch.randn(3, 4, generator=gen)
    gw[1] = math.nan
    gb[1] = math.inf
    lr = torch.tensor([0.1, 0.2, 0.3])
    w0, b0 = w.clone(), b.clone()
    sgd_step([w, b], [gw, gb], lr, torch.tensor([True, False, True]))
    assert torch.equal(w[1], w0[1]) and torch.equal(b[1], b0[1])
    for k in (0, 2):
        assert torch.equal(w[k], w0[k] - lr[k] * gw[k])
        assert torch.equal(b[k], b0[k] - lr[k] * gb[k])


def test_sgd_step_float_lr_on_parameters() -> None:
    p = torch.nn.Parameter(torch.ones(2, 3))
    sgd_step([p], [torch.full((2, 3), 2.0)], 0.25, torch.tensor([True, True]))
    assert torch.equal(p.detach(), torch.full((2, 3), 0.5))


def test_sgd_step_of_a_full_pack_is_exactly_p_minus_rate_times_gradient() -> None:
    gen = torch.Generator().manual_seed(1)
    params = [torch.randn(4, 30, 20, generator=gen), torch.randn(4, 30, generator=gen)]
    grads = [torch.randn(p.shape, generator=gen) for p in params]
    lr = torch.rand(4, generator=gen)
    before = [p.clone() for p in params]
    sgd_step(params, grads, lr, torch.ones(4, dtype=torch.bool))
    for p, p0, g in zip(params, before, grads, strict=True):
        rate = lr.view(-1, *[1] * (p.dim() - 1))
        assert torch.equal(p, p0 - rate * g)
    # p − α·g rounded once (a fused multiply-add) differs somewhere, so the test can tell.
    fused = (before[0].double() - lr.double().view(-1, 1, 1) * grads[0].double()).float()
    assert not torch.equal(params[0], fused)


def test_a_diverged_members_nan_gradient_and_rate_leave_its_weights_unchanged(
        stopped_by: str) -> None:
    gen = torch.Generator().manual_seed(2)
    w = torch.randn(3, 6, 5, generator=gen)
    w[2, 0, 0] = -0.0
    gw = torch.randn(3, 6, 5, generator=gen)
    gw[2] = math.nan
    gw[2, 1] = -math.inf
    lr = torch.tensor([0.1, 0.2, math.nan])
    w0 = w.clone()
    sgd_step([w], [gw], lr, torch.tensor([True, True, False]))
    assert torch.equal(w[2], w0[2]) and torch.signbit(w[2, 0, 0])
    for k in (0, 1):
        assert torch.equal(w[k], w0[k] - lr[k] * gw[k])


def test_an_active_members_nan_gradient_shows_in_its_weights_only() -> None:
    w = torch.ones(2, 3)
    g = torch.tensor([[1.0, math.nan, 1.0], [1.0, 1.0, 1.0]])
    sgd_step([w], [g], 0.5, torch.tensor([True, True]))
    assert math.isnan(w[0, 1]) and torch.equal(w[1], torch.full((3,), 0.5))


@pytest.mark.parametrize("block", [1, 50, 10**9])
def test_sgd_step_in_blocks_updates_every_tensor_alike(block, monkeypatch,
                                                       stopped_by: str) -> None:
    monkeypatch.setattr(optim, "STEP_BLOCK", block)
    gen = torch.Generator().manual_seed(3)
    shapes = [(3, 4, 5), (3, 4), (3, 30, 2), (3, 1), (3, 6, 6)]
    params = [torch.randn(s, generator=gen) for s in shapes]
    grads = [torch.randn(s, generator=gen) for s in shapes]
    grads[2][1] = math.nan
    lr = torch.tensor([0.5, 0.25, 0.125])
    before = [p.clone() for p in params]
    sgd_step(params, grads, lr, torch.tensor([True, False, True]))
    for p, p0, g in zip(params, before, grads, strict=True):
        assert torch.equal(p[1], p0[1])
        for k in (0, 2):
            assert torch.equal(p[k], p0[k] - lr[k] * g[k])


@pytest.mark.parametrize("lr", [torch.tensor([0.5, 0.3, 0.125]), 0.3])
def test_sgd_step_overwriting_the_gradients_updates_bit_for_bit_alike(lr,
                                                                     stopped_by: str) -> None:
    gen = torch.Generator().manual_seed(4)
    shapes = [(3, 7, 5), (3, 7), (3, 2, 9)]
    params = [torch.randn(s, generator=gen) for s in shapes]
    grads = [torch.randn(s, generator=gen) for s in shapes]
    grads[0][1] = math.nan
    active = torch.tensor([True, False, True])
    copied = [p.clone() for p in params]
    reused = [g.clone() for g in grads]
    sgd_step(copied, grads, lr, active)
    sgd_step(params, reused, lr, active, overwrite_grads=True)
    rate = torch.as_tensor(lr).expand(3)
    for p, p_copied, g, step in zip(params, copied, grads, reused, strict=True):
        assert torch.equal(p, p_copied)
        assert torch.equal(step[1], torch.zeros_like(step[1]))
        for k in (0, 2):
            assert torch.equal(step[k], rate[k] * g[k])


def test_sgd_step_refuses_to_overwrite_one_gradient_given_twice() -> None:
    params = [torch.ones(2, 3), torch.ones(2, 3)]
    shared = torch.full((2, 3), 2.0)
    with pytest.raises(ValueError, match="overwrite_grads"):
        sgd_step(params, [shared, shared], 0.5, torch.ones(2, dtype=torch.bool),
                 overwrite_grads=True)
    assert torch.equal(shared, torch.full((2, 3), 2.0))
    sgd_step(params, [shared, shared], 0.5, torch.ones(2, dtype=torch.bool))
    assert all(torch.equal(p, torch.zeros(2, 3)) for p in params)


def test_only_an_accelerators_small_updates_are_masked() -> None:
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    assert optim._reads_active(cpu, 1) and optim._reads_active(cpu, 100)
    assert not optim._reads_active(gpu, optim.MASKED_TENSORS)
    assert optim._reads_active(gpu, optim.MASKED_TENSORS + 1)
