"""Linearly constrained weights (K §3): the bases B_m, the reparameterised model against an
explicitly constrained one, zero row sums throughout training, uniform sampling from the unit
ball of W_LC (K App. A) and the minibatch initialisation (K §3.3)."""

from __future__ import annotations

import pytest
import torch

from ortho_core.init import lcw_minibatch_init, sample_zero_sum_ball
from ortho_core.models.lcw import ZeroSumBasis, apply_lcw
from ortho_core.models.mlp import PackedMLP, member_cross_entropy
from ortho_core.optim import sgd_step

BASES = ["orthonormal", "eq7"]


@pytest.mark.parametrize("m", [2, 5, 784])
def test_orthonormal_basis_spans_the_zero_sum_subspace(m):
    basis = ZeroSumBasis(m, "orthonormal")
    b = basis.matrix()
    assert b.shape == (m, m - 1)
    torch.testing.assert_close(b.T @ b, torch.eye(m - 1, dtype=torch.float64))
    assert float(b.sum(dim=0).abs().max()) < 1e-12
    # B Bᵀ is the projection onto W_LC, so SGD on v is projected SGD on w.
    ones = torch.ones(m, m, dtype=torch.float64) / m
    torch.testing.assert_close(b @ b.T, torch.eye(m, dtype=torch.float64) - ones)


def test_eq7_basis_is_kutsunas():
    b = ZeroSumBasis(4, "eq7").matrix()
    expected = torch.tensor([[1, 0, 0], [0, 1, 0], [0, 0, 1], [-1, -1, -1]], dtype=torch.float64)
    torch.testing.assert_close(b, expected)


@pytest.mark.parametrize("m", [2, 5, 128])
def test_eq7_sgd_steps_m_times_further_along_the_last_inputs_direction(m):
    """SGD on v moves w = B_m v by −α B_m B_mᵀ ∇_w. For K eq. 7, B_m B_mᵀ is the projection
    onto W_LC plus (m − 1) times the projection onto d = (1, …, 1, −(m − 1)): the step along d
    is m times the projected gradient's (why eq. 7 and an orthonormal basis train differently)."""
    b = ZeroSumBasis(m, "eq7").matrix()
    d = torch.ones(m, dtype=torch.float64)
    d[-1] = -(m - 1)
    along = torch.outer(d, d) / d.dot(d)
    project = torch.eye(m, dtype=torch.float64) - torch.ones(m, m, dtype=torch.float64) / m
    torch.testing.assert_close(b @ b.T, project + (m - 1) * along)
    torch.testing.assert_close(b @ b.T @ d, m * d)


@pytest.mark.parametrize("basis", BASES)
def test_forward_maps_onto_the_zero_sum_subspace_as_a_basis(basis):
    """w = B_m v (K §3.2) from the definition of a basis of W_LC (K eq. 6): linear in v,
    1ᵀw = 0 for every v, injective (rank m − 1 = dim W_LC), so that every w in W_LC is reached;
    ``right_inverse`` returns the v of a given w."""
    m = 9
    param = ZeroSumBasis(m, basis)
    gen = torch.Generator().manual_seed(0)
    v1, v2 = (torch.randn(3, 4, m - 1, generator=gen, dtype=torch.float64) for _ in range(2))
    w1 = param(v1)
    assert w1.shape == (3, 4, m)
    assert float(w1.sum(dim=-1).abs().max()) < 1e-12
    torch.testing.assert_close(param(2.0 * v1 - 3.0 * v2), 2.0 * w1 - 3.0 * param(v2))
    images = param(torch.eye(m - 1, dtype=torch.float64))
    assert int(torch.linalg.matrix_rank(images)) == m - 1
    target = torch.randn(5, m, generator=gen, dtype=torch.float64)
    target = target - target.mean(dim=-1, keepdim=True)
    torch.testing.assert_close(param(param.right_inverse(target)), target)
    torch.testing.assert_close(param.right_inverse(w1), v1)


def test_eq7_forward_is_kutsunas_formula():
    """K eq. 7: B_m v = (v₁, …, v_{m−1}, −Σv), written out by hand."""
    v = torch.tensor([[1.0, -2.0, 0.5], [3.0, 0.25, 4.0]], dtype=torch.float64)
    expected = torch.tensor([[1.0, -2.0, 0.5, 0.5], [3.0, 0.25, 4.0, -7.25]], dtype=torch.float64)
    torch.testing.assert_close(ZeroSumBasis(4, "eq7")(v), expected)


def test_orthonormal_forward_is_an_isometry_onto_the_zero_sum_subspace():
    """With an orthonormal B_m, ‖B_m v‖ = ‖v‖ and ⟨B_m v, B_m u⟩ = ⟨v, u⟩; for m = 2 the
    only unit vectors of W_LC are ±(1, −1)/√2."""
    param = ZeroSumBasis(16, "orthonormal")
    gen = torch.Generator().manual_seed(1)
    v, u = (torch.randn(6, 15, generator=gen, dtype=torch.float64) for _ in range(2))
    torch.testing.assert_close((param(v) * param(u)).sum(dim=-1), (v * u).sum(dim=-1))
    w = ZeroSumBasis(2, "orthonormal")(torch.ones(1, 1, dtype=torch.float64))
    torch.testing.assert_close(w.abs(), torch.full((1, 2), 2 ** -0.5, dtype=torch.float64))
    assert float(w.sum()) == pytest.approx(0.0, abs=1e-15)


def lcw_pack(basis: str, sizes, dtype=torch.float64) -> PackedMLP:
    torch.manual_seed(0)
    model = PackedMLP(sizes, 2, "sigmoid", dtype=dtype)
    apply_lcw(model, basis)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    return model


@pytest.mark.parametrize("basis", BASES)
def test_reparameterised_sgd_equals_explicitly_constrained_sgd(basis):
    """SGD on v (w = B v) is the step w := w − α B Bᵀ ∂L/∂w on an unconstrained model."""
    sizes = [6, 5, 4, 3]
    lcw = lcw_pack(basis, sizes)
    explicit = PackedMLP(sizes, 2, "sigmoid", dtype=torch.float64)
    with torch.no_grad():
        for e, layer in zip(explicit.layers, lcw.layers, strict=True):
            e.weight.copy_(layer.weight)
            e.bias.copy_(layer.bias)
    projectors = [ZeroSumBasis(m, basis).matrix() for m in sizes[:-1]]
    projectors = [b @ b.T for b in projectors]
    lr = torch.tensor([0.5, 0.2], dtype=torch.float64)
    active = torch.ones(2, dtype=torch.bool)
    gen = torch.Generator().manual_seed(1)
    for _ in range(20):
        x = torch.rand(8, sizes[0], generator=gen, dtype=torch.float64)
        y = torch.randint(0, sizes[-1], (8,), generator=gen)
        loss = member_cross_entropy(lcw(x), y)
        params = list(lcw.parameters())
        sgd_step(params, torch.autograd.grad(loss.sum(), params), lr, active)
        ref_loss = member_cross_entropy(explicit(x), y)
        torch.testing.assert_close(loss, ref_loss)
        grads = torch.autograd.grad(ref_loss.sum(), list(explicit.parameters()))
        steps = []
        for i in range(len(explicit.layers)):
            steps += [grads[2 * i] @ projectors[i], grads[2 * i + 1]]
        sgd_step(list(explicit.parameters()), steps, lr, active)
        for e, layer in zip(explicit.layers, lcw.layers, strict=True):
            torch.testing.assert_close(e.weight, layer.weight.detach())
            torch.testing.assert_close(e.bias, layer.bias.detach())


@pytest.mark.parametrize("basis", BASES)
def test_rows_sum_to_zero_throughout_float32_training(basis):
    sizes = [784, 64, 64, 10]
    model = lcw_pack(basis, sizes, dtype=torch.float32)
    gen = torch.Generator().manual_seed(2)
    lr = torch.full((2,), 0.1)
    active = torch.ones(2, dtype=torch.bool)
    for _ in range(30):
        x = torch.rand(32, sizes[0], generator=gen)
        y = torch.randint(0, 10, (32,), generator=gen)
        params = list(model.parameters())
        loss = member_cross_entropy(model(x), y)
        sgd_step(params, torch.autograd.grad(loss.sum(), params), lr, active)
        for w in model.weight_params():
            assert float(w.detach().sum(dim=-1).abs().max()) < 1e-5


def test_unit_ball_samples_are_uniform_in_the_zero_sum_subspace():
    gen = torch.Generator().manual_seed(3)
    w = sample_zero_sum_ball(40_000, 3, gen)
    assert float(w.sum(dim=1).abs().max()) < 1e-12
    r = w.norm(dim=1)
    assert float(r.max()) <= 1.0
    # W_LC in R³ is a plane: a uniform point of its unit disc has P(r ≤ 1/2) = 1/4 (K App. A's
    # exponent 1/(m−2) would give 1/2) and no preferred direction.
    assert float((r <= 0.5).double().mean()) == pytest.approx(0.25, abs=0.01)
    assert float(w.mean(dim=0).abs().max()) < 0.01
    w10 = sample_zero_sum_ball(40_000, 10, gen)
    # In 9 dimensions r⁹ is uniform on (0, 1).
    assert float(w10.norm(dim=1).pow(9).mean()) == pytest.approx(0.5, abs=0.01)


@pytest.mark.parametrize("basis", BASES)
def test_minibatch_init_gives_sigma_z_on_its_batch(basis):
    sizes = [30, 12, 12, 12, 5]
    x = torch.rand(64, 30, dtype=torch.float64)
    sigma = torch.tensor([0.5, 1.5], dtype=torch.float64)
    model = PackedMLP(sizes, 2, "sigmoid", dtype=torch.float64)
    apply_lcw(model, basis)
    etas = lcw_minibatch_init(model, x, sigma, [torch.Generator().manual_seed(s) for s in (4, 5)])
    assert etas.shape == (2, len(sizes) - 1) and bool((etas > 0).all())
    with torch.no_grad():
        traces = model.trace(x)
    for t in traces:
        torch.testing.assert_close(t.preactivation.reshape(2, -1).std(dim=1, correction=0), sigma)
    for layer in model.layers:
        assert float(layer.bias.detach().abs().max()) == 0.0
        assert float(layer.weight.detach().sum(dim=-1).abs().max()) < 1e-12
    alone = PackedMLP(sizes, 1, "sigmoid", dtype=torch.float64)
    apply_lcw(alone, basis)
    lcw_minibatch_init(alone, x, 1.5, [torch.Generator().manual_seed(5)])
    for a, p in zip(alone.weight_params(), model.weight_params(), strict=True):
        torch.testing.assert_close(a[0], p[1])
