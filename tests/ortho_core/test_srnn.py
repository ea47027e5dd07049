"""The packed SRNN: against torch.nn.RNN, finite differences and members alone."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck

from ortho_core.errors import ConfigError
from ortho_core.metrics import spectral_radius
from ortho_core.models import PackedSRNN, SRNNInit, init_srnn
from ortho_core.models.srnn import _Recurrence
from ortho_core.models.srnn_kernels import tanh_into

N_IN, N_HIDDEN, N_OUT, BATCH = 3, 5, 2, 4


def pack(k: int, dtype: torch.dtype = torch.float64, random_biases: bool = True) -> PackedSRNN:
    model = init_srnn(N_IN, N_HIDDEN, N_OUT, [SRNNInit(seed=s) for s in range(k)], dtype=dtype)
    if random_biases:
        g = torch.Generator().manual_seed(99)
        with torch.no_grad():
            model.b_h.copy_(torch.randn(model.b_h.shape, generator=g, dtype=dtype) * 0.5)
            model.b_y.copy_(torch.randn(model.b_y.shape, generator=g, dtype=dtype) * 0.5)
    return model


def inputs(steps: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(BATCH, steps, N_IN, generator=g, dtype=torch.float64)
    return x, torch.randint(N_OUT, (BATCH,), generator=g)


def member_losses(y: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Each member's mean cross-entropy, (K,), for outputs y (K, B, O)."""
    k = y.shape[0]
    ce = F.cross_entropy(y.reshape(-1, N_OUT), labels.repeat(k), reduction="none")
    return ce.view(k, -1).mean(dim=1)


def torch_rnn(model: PackedSRNN, k: int) -> tuple[torch.nn.RNN, torch.nn.Linear]:
    """Member k as torch.nn.RNN + nn.Linear holding the same weights."""
    rnn = torch.nn.RNN(N_IN, N_HIDDEN, nonlinearity="tanh", batch_first=True).double()
    linear = torch.nn.Linear(N_HIDDEN, N_OUT).double()
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(model.w_xh[k])
        rnn.weight_hh_l0.copy_(model.w_hh[k])
        rnn.bias_ih_l0.copy_(model.b_h[k])
        rnn.bias_hh_l0.zero_()
        linear.weight.copy_(model.w_hy[k])
        linear.bias.copy_(model.b_y[k])
    return rnn, linear


@pytest.mark.parametrize("steps", [1, 9])
def test_outputs_and_gradients_match_torch_rnn(steps: int) -> None:
    model = pack(3)
    x, labels = inputs(steps)
    y = model(x)
    member_losses(y, labels).sum().backward()
    for k in range(3):
        rnn, linear = torch_rnn(model, k)
        out, _ = rnn(x)
        y_ref = linear(out[:, -1])
        F.cross_entropy(y_ref, labels).backward()
        torch.testing.assert_close(y[k], y_ref, rtol=1e-12, atol=1e-12)
        for mine, ref in [(model.w_xh, rnn.weight_ih_l0), (model.w_hh, rnn.weight_hh_l0),
                          (model.b_h, rnn.bias_ih_l0), (model.w_hy, linear.weight),
                          (model.b_y, linear.bias)]:
            torch.testing.assert_close(mine.grad[k], ref.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("dtype", "atol"), [(torch.float32, 2e-7), (torch.float64, 1e-15)])
def test_fast_tanh_is_accurate(dtype: torch.dtype, atol: float) -> None:
    a = torch.linspace(-20, 20, 100_001, dtype=dtype)
    out = torch.empty_like(a)
    tanh_into(a.clone(), out, out.new_ones(()))
    torch.testing.assert_close(out, torch.tanh(a), rtol=0, atol=atol)
    assert out.abs().max() <= 1


def test_recurrence_gradcheck() -> None:
    g = torch.Generator().manual_seed(3)

    def leaf(*shape: int) -> torch.Tensor:
        return (torch.randn(shape, generator=g, dtype=torch.float64) * 0.7).requires_grad_()

    args = (leaf(2, 4, 3), leaf(2, 3, 3), leaf(2, 3, 3), leaf(2, 3))
    assert gradcheck(lambda *a: _Recurrence.apply(*a, None), args)


def test_member_of_pack_equals_same_init_alone() -> None:
    inits = [SRNNInit(seed=7), SRNNInit(seed=8, scheme="gaussian", init_std=0.3),
             SRNNInit(seed=9, spectral_radius=1.1),
             SRNNInit(seed=7, scheme="gaussian", spectral_radius=0.9)]
    x, labels = inputs(12, seed=2)
    together = init_srnn(N_IN, N_HIDDEN, N_OUT, inits, dtype=torch.float64)
    y = together(x)
    member_losses(y, labels).sum().backward()
    for k, init in enumerate(inits):
        alone = init_srnn(N_IN, N_HIDDEN, N_OUT, [init], dtype=torch.float64)
        for a, b in zip(alone.parameters(), together.parameters(), strict=True):
            assert torch.equal(a.detach()[0], b.detach()[k])
        y_alone = alone(x)
        member_losses(y_alone, labels).sum().backward()
        torch.testing.assert_close(y_alone[0], y[k], rtol=1e-12, atol=1e-13)
        for a, b in zip(alone.parameters(), together.parameters(), strict=True):
            torch.testing.assert_close(a.grad[0], b.grad[k], rtol=1e-10, atol=1e-13)


def test_init_is_drawn_in_float64_then_cast() -> None:
    inits = [SRNNInit(seed=1, scheme="gaussian", spectral_radius=1.2), SRNNInit(seed=2)]
    m64 = init_srnn(N_IN, 50, N_OUT, inits, dtype=torch.float64)
    m32 = init_srnn(N_IN, 50, N_OUT, inits)
    for a, b in zip(m64.parameters(), m32.parameters(), strict=True):
        assert b.dtype == torch.float32
        assert torch.equal(a.detach().float(), b.detach())
    assert spectral_radius(m64.w_hh[0]).item() == pytest.approx(1.2, rel=1e-9)
    assert m64.w_hh[1].abs().max().item() <= math.sqrt(6 / 100)
    assert m64.w_hy[1].abs().max().item() <= math.sqrt(6 / (50 + N_OUT))
    assert not m64.b_h.any() and not m64.b_y.any()


def test_forward_without_gradients_equals_training_forward() -> None:
    model = pack(3, dtype=torch.float32)
    x, _ = inputs(20, seed=4)
    y = model(x)
    with torch.no_grad():
        torch.testing.assert_close(model(x), y.detach())


@pytest.mark.parametrize(("kwargs", "field"), [({"scheme": "uniform"}, "scheme"),
                                               ({"init_std": -1.0}, "init_std"),
                                               ({"spectral_radius": 0.0}, "spectral_radius")])
def test_init_config_errors_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        SRNNInit(seed=0, **kwargs)
    assert info.value.field == field
