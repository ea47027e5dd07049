"""Packed MLPs against PyTorch's own modules: nn.Linear stacks, nn.BatchNorm1d and
parametrizations.weight_norm, member by member; the angle θ of K eq. 3 against its definition;
Salimans & Kingma's data-dependent initialisation against its promise (zero mean, unit variance)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import weight_norm

from ortho_core.diagnostics import neuron_angles
from ortho_core.init import weight_norm_data_init
from ortho_core.models.mlp import (
    PackedMLP,
    member_accuracy,
    member_correct,
    member_cross_entropy,
)
from ortho_core.models.normalization import PackedBatchNorm, PackedWeightNorm

K, B = 3, 16
SIZES = [7, 5, 6, 4]


def random_mlp(activation: str, *, members: int = K, seed: int = 0) -> PackedMLP:
    """A float64 pack with random weights and biases."""
    torch.manual_seed(seed)
    model = PackedMLP(SIZES, members, activation, dtype=torch.float64)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p))
    return model


def sequential(model: PackedMLP, member: int) -> nn.Sequential:
    """Member ``member`` of ``model`` rebuilt as a plain nn.Sequential of nn.Linear."""
    f = {"tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "relu": nn.ReLU}[model.activation]
    mods: list[nn.Module] = []
    for index, layer in enumerate(model.layers):
        lin = nn.Linear(layer.weight.shape[2], layer.weight.shape[1], dtype=torch.float64)
        with torch.no_grad():
            lin.weight.copy_(layer.weight[member])
            lin.bias.copy_(layer.bias[member])
        mods.append(lin)
        if index < len(model.layers) - 1:
            mods.append(f())
    return nn.Sequential(*mods)


@pytest.mark.parametrize("members", [1, K])
@pytest.mark.parametrize("activation", ["tanh", "sigmoid", "relu"])
def test_forward_and_gradients_equal_nn_linear_stacks(activation, members):
    model = random_mlp(activation, members=members)
    x = torch.randn(B, SIZES[0], dtype=torch.float64)
    y = torch.randint(0, SIZES[-1], (B,))
    logits = model(x)
    assert logits.shape == (members, B, SIZES[-1])
    loss = member_cross_entropy(logits, y)
    grads = torch.autograd.grad(loss.sum(), list(model.parameters()))
    for k in range(members):
        ref = sequential(model, k)
        ref_logits = ref(x)
        torch.testing.assert_close(logits[k], ref_logits)
        ref_loss = F.cross_entropy(ref_logits, y)
        torch.testing.assert_close(loss[k], ref_loss)
        ref_grads = torch.autograd.grad(ref_loss, list(ref.parameters()))
        for g, rg in zip(grads, ref_grads, strict=True):
            torch.testing.assert_close(g[k], rg)


@pytest.mark.parametrize("members", [1, K])
def test_per_member_input_and_trace(members):
    model = random_mlp("tanh", members=members)
    x = torch.randn(B, SIZES[0], dtype=torch.float64)
    trace = model.trace(x)
    assert len(trace) == len(SIZES) - 1
    assert trace[0].inputs is x
    torch.testing.assert_close(trace[-1].activation, model(x))
    for i, t in enumerate(trace[1:], start=1):
        assert t.inputs.shape == (members, B, SIZES[i])
        torch.testing.assert_close(t.inputs, trace[i - 1].activation)
        torch.testing.assert_close(model.layer_forward(i, t.inputs)[0], t.preactivation)


def test_accuracy_counts():
    model = random_mlp("relu")
    x = torch.randn(50, SIZES[0], dtype=torch.float64)
    y = torch.randint(0, SIZES[-1], (50,))
    expected = [(sequential(model, k)(x).argmax(1) == y).double().mean() for k in range(K)]
    torch.testing.assert_close(member_accuracy(model, x, y, chunk=7), torch.stack(expected))
    assert member_correct(model(x), y).tolist() == [int(e * 50) for e in expected]


def test_neuron_angles_follow_the_definition():
    torch.manual_seed(1)
    a = torch.rand(4, 6, dtype=torch.float64)
    w = torch.randn(2, 3, 6, dtype=torch.float64)
    theta = neuron_angles(a, w)
    assert theta.shape == (2, 4, 3)
    for k in range(2):
        for s in range(4):
            for i in range(3):
                cos = float(w[k, i] @ a[s]) / (float(w[k, i].norm()) * float(a[s].norm()))
                assert theta[k, s, i].item() == pytest.approx(math.degrees(math.acos(cos)))
    # A weight vector along the input has angle 0; one orthogonal to it, 90 degrees.
    a1 = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    w1 = torch.tensor([[[2.0, 2.0], [1.0, -1.0]]], dtype=torch.float64)
    torch.testing.assert_close(neuron_angles(a1, w1),
                               torch.tensor([[[0.0, 90.0]]], dtype=torch.float64),
                               atol=1e-5, rtol=0)


def test_batch_norm_matches_batchnorm1d_per_member():
    torch.manual_seed(2)
    m = 5
    packed = PackedBatchNorm(K, m, dtype=torch.float64)
    refs = [nn.BatchNorm1d(m, dtype=torch.float64) for _ in range(K)]
    with torch.no_grad():
        packed.weight.copy_(torch.rand(K, m) + 0.5)
        packed.bias.copy_(torch.randn(K, m))
        for k, ref in enumerate(refs):
            ref.weight.copy_(packed.weight[k])
            ref.bias.copy_(packed.bias[k])
    for _ in range(3):
        z = torch.randn(K, B, m, dtype=torch.float64) * 3 + 1
        z.requires_grad_(True)
        out = packed(z)
        upstream = torch.randn_like(out)
        grads = torch.autograd.grad((out * upstream).sum(), [z, packed.weight, packed.bias])
        for k, ref in enumerate(refs):
            zk = z[k].detach().clone().requires_grad_(True)
            ref_out = ref(zk)
            torch.testing.assert_close(out[k], ref_out)
            ref_grads = torch.autograd.grad((ref_out * upstream[k]).sum(),
                                            [zk, ref.weight, ref.bias])
            for g, rg in zip(grads, ref_grads, strict=True):
                torch.testing.assert_close(g[k], rg)
    packed.eval()
    z = torch.randn(K, B, m, dtype=torch.float64)
    for k, ref in enumerate(refs):
        ref.eval()
        torch.testing.assert_close(packed.running_mean[k], ref.running_mean)
        torch.testing.assert_close(packed.running_var[k], ref.running_var)
        torch.testing.assert_close(packed(z)[k], ref(z[k]))


def test_batch_norm_of_one_member_takes_a_two_dimensional_batch():
    torch.manual_seed(4)
    packed, ref = PackedBatchNorm(1, 5, dtype=torch.float64), nn.BatchNorm1d(5, dtype=torch.float64)
    for _ in range(2):
        z = torch.randn(B, 5, dtype=torch.float64) * 2 + 1
        torch.testing.assert_close(packed(z), ref(z))
    torch.testing.assert_close(packed.running_var[0], ref.running_var)
    packed.eval()
    torch.testing.assert_close(packed(z.unsqueeze(0))[0], packed(z))


def test_batch_norm_mlp_has_no_hidden_bias():
    model = PackedMLP(SIZES, K, "sigmoid", batch_norm=True)
    assert [layer.bias is None for layer in model.layers] == [True, True, False]
    assert len(model.norms) == len(SIZES) - 2


def test_weight_norm_matches_pytorch_weight_norm():
    torch.manual_seed(3)
    packed = PackedMLP([6, 4], K, "tanh", dtype=torch.float64)
    layer = packed.layers[0]
    parametrize.register_parametrization(layer, "weight", PackedWeightNorm())
    params = layer.parametrizations.weight
    with torch.no_grad():
        params.original0.copy_(torch.rand(K, 4, 1) + 0.5)
        params.original1.copy_(torch.randn(K, 4, 6))
        layer.bias.copy_(torch.randn(K, 4))
    x = torch.randn(B, 6, dtype=torch.float64)
    out = packed(x)
    upstream = torch.randn_like(out)
    grads = torch.autograd.grad((out * upstream).sum(),
                                [params.original0, params.original1, layer.bias])
    for k in range(K):
        ref = weight_norm(nn.Linear(6, 4, dtype=torch.float64), dim=0)
        with torch.no_grad():
            ref.parametrizations.weight.original0.copy_(params.original0[k])
            ref.parametrizations.weight.original1.copy_(params.original1[k])
            ref.bias.copy_(layer.bias[k])
        ref_out = ref(x)
        torch.testing.assert_close(out[k], ref_out)
        ref_grads = torch.autograd.grad((ref_out * upstream[k]).sum(),
                                        [ref.parametrizations.weight.original0,
                                         ref.parametrizations.weight.original1, ref.bias])
        for g, rg in zip(grads, ref_grads, strict=True):
            torch.testing.assert_close(g[k], rg)


def wn_model(members: int) -> PackedMLP:
    model = PackedMLP([8, 6, 6, 3], members, "sigmoid", dtype=torch.float64)
    for layer in model.layers:
        parametrize.register_parametrization(layer, "weight", PackedWeightNorm())
    return model


def test_weight_norm_data_init_standardises_every_layer_on_its_batch():
    x = torch.rand(32, 8, dtype=torch.float64)
    model = wn_model(2)
    weight_norm_data_init(model, x, [torch.Generator().manual_seed(s) for s in (0, 1)])
    with torch.no_grad():
        traces = model.trace(x)
    for t in traces:
        z = t.preactivation
        assert float(z.mean(dim=1).abs().max()) < 1e-12
        torch.testing.assert_close(z.std(dim=1, correction=0), torch.ones_like(z[:, 0]))
    # v keeps the direction drawn from N(0, 0.05²): its norm is of that scale, not unit.
    v = model.layers[0].parametrizations.weight.original1
    assert 0.02 < float(v.detach().std()) < 0.1
    alone = wn_model(1)
    weight_norm_data_init(alone, x, [torch.Generator().manual_seed(1)])
    for a, p in zip(alone.parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(a[0], p[1])


@pytest.mark.parametrize("batch_norm", [False, True])
def test_dtype_and_device_moves_convert_every_parameter(batch_norm):
    """``.double()`` and ``.to(device, dtype)`` reach every parameter and buffer (the pack's
    layer helper must not shadow ``nn.Module._apply``), and the float64 net computes the float32
    net's logits."""
    torch.manual_seed(2)
    model = PackedMLP(SIZES, K, "tanh", batch_norm=batch_norm)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p))
    x = torch.randn(B, SIZES[0])
    logits32 = model(x)
    moved = model.to("cpu", torch.float64)
    assert moved is model
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    float_buffers = [b for b in model.buffers() if b.is_floating_point()]
    assert {b.dtype for b in float_buffers} <= {torch.float64}
    logits64 = model(x.double())
    assert logits64.dtype == torch.float64
    torch.testing.assert_close(logits64.float(), logits32, rtol=1e-5, atol=1e-5)
    model.float()
    model.double()
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    torch.testing.assert_close(model(x.double()), logits64)
