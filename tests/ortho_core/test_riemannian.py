"""N's geodesic momentum SGD (N eqs. 6-9): orthogonality kept, tangent vectors, the
closed-form step, the equations step by step with momentum, per-member rates and packs; and
the Euclidean momentum of the unconstrained parameters."""

from __future__ import annotations

import math

import pytest
import torch

from ortho_core.models.orthogonal_net import haar_orthogonal
from ortho_core.riemannian import (
    EuclideanMomentum,
    GeodesicMomentum,
    orthogonality_error,
    reproject,
    tangent_projection,
)


def _stack(layers: int, members: int, n: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.stack([haar_orthogonal(n, g) for _ in range(members)])
                        for _ in range(layers)]).to(dtype)


def _run(dtype: torch.dtype, steps: int, reproject_every: int) -> torch.Tensor:
    q = _stack(5, 3, 4, dtype)
    opt = GeodesicMomentum(q, torch.tensor([0.05, 0.1, 0.2]), torch.tensor([0.9, 0.5, 0.0]),
                           reproject_every)
    g = torch.Generator().manual_seed(1)
    active = torch.ones(3, dtype=torch.bool)
    for _ in range(steps):
        opt.step(q, torch.randn(q.shape, generator=g, dtype=dtype), active)
    return q


def test_orthogonal_after_1000_steps_float64():
    q = _run(torch.float64, 1000, reproject_every=0)
    assert float(orthogonality_error(q).max()) < 1e-10


def test_orthogonal_after_1000_steps_float32_with_reprojection():
    q = _run(torch.float32, 1000, reproject_every=100)
    assert float(orthogonality_error(q).max()) < 1e-4


def test_projected_gradient_and_transported_momentum_are_tangent():
    q = _stack(2, 2, 5, torch.float64)
    z = torch.randn(q.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    v = tangent_projection(q, z)
    a = q.transpose(-1, -2) @ v
    assert torch.allclose(a, -a.transpose(-1, -2), atol=1e-13)
    assert not torch.allclose(v, torch.zeros_like(v))
    opt = GeodesicMomentum(q, torch.tensor([0.1, 0.3]), torch.tensor([0.9, 0.9]))
    active = torch.ones(2, dtype=torch.bool)
    for _ in range(5):
        opt.step(q, z, active)
    m = q.transpose(-1, -2) @ opt.velocity
    assert torch.allclose(m, -m.transpose(-1, -2), atol=1e-12)
    assert float(m.abs().max()) > 1e-3


def test_beta_zero_step_is_the_closed_form_rotation():
    """For n = 2, exp(αA) with A = [[0, −θ], [θ, 0]] is the rotation by αθ."""
    q = _stack(1, 2, 2, torch.float64)
    grad = torch.randn(q.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    lr = torch.tensor([0.3, 0.7], dtype=torch.float64)
    start = q.clone()
    GeodesicMomentum(q, lr, torch.zeros(2)).step(q, grad, torch.ones(2, dtype=torch.bool))
    for k in range(2):
        qk, zk = start[0, k], -grad[0, k]
        qtz = qk.T @ zk
        theta = 0.5 * float(qtz[1, 0] - qtz[0, 1]) * float(lr[k])
        c, s = math.cos(theta), math.sin(theta)
        expected = qk @ torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
        assert torch.allclose(q[0, k], expected, atol=1e-14)
        assert not torch.allclose(q[0, k], qk)


def test_members_of_a_pack_step_as_alone_and_inactive_ones_stay_put():
    q = _stack(3, 3, 4, torch.float64)
    grads = [torch.randn(q.shape, generator=torch.Generator().manual_seed(s),
                         dtype=torch.float64) for s in range(4)]
    lr, beta = torch.tensor([0.1, 0.2, 0.05]), torch.tensor([0.9, 0.0, 0.5])
    pack = q.clone()
    opt = GeodesicMomentum(pack, lr, beta)
    active = torch.tensor([True, True, False])
    for g in grads:
        opt.step(pack, g, active)
    assert torch.equal(pack[:, 2], q[:, 2])
    for k in range(2):
        alone = q[:, k:k + 1].clone()
        solo = GeodesicMomentum(alone, lr[k:k + 1], beta[k:k + 1])
        for g in grads:
            solo.step(alone, g[:, k:k + 1], torch.ones(1, dtype=torch.bool))
        assert torch.allclose(pack[:, k], alone[:, 0], atol=1e-14)


ACTIVE = [[True, True, True], [True, False, True], [True, True, True], [False, True, True]] * 2
"""Which members step at each of 8 steps: each member sits out at least once."""


def test_momentum_steps_follow_n_eqs_6_to_9_matrix_by_matrix():
    """β > 0 with members sitting out: every step against the equations written out for one
    matrix at a time, eq. 6 whole (its (I − QQᵀ)Z term included), Z' = βZ₀ + (1 − β)π_T(Z),
    A = QᵀZ' (eq. 7), Q := Q·exp(αA), Z₀ := Z'·exp(αA) (eq. 9)."""
    q = _stack(2, 3, 4, torch.float64)
    lr = torch.tensor([0.1, 0.3, 0.05], dtype=torch.float64)
    beta = torch.tensor([0.9, 0.5, 0.0], dtype=torch.float64)
    ref_q, ref_v = q.clone(), torch.zeros_like(q)
    opt = GeodesicMomentum(q, lr, beta)
    g = torch.Generator().manual_seed(7)
    eye = torch.eye(4, dtype=torch.float64)
    for active in ACTIVE:
        grad = torch.randn(q.shape, generator=g, dtype=torch.float64)
        opt.step(q, grad, torch.tensor(active))
        for layer in range(2):
            for k in [k for k in range(3) if active[k]]:
                qk, z = ref_q[layer, k], -grad[layer, k]
                a_z = 0.5 * (qk.T @ z - z.T @ qk)
                blended = beta[k] * ref_v[layer, k] + (1 - beta[k]) * (
                    qk @ a_z + (eye - qk @ qk.T) @ z)
                e = torch.linalg.matrix_exp(lr[k] * (qk.T @ blended))
                ref_q[layer, k], ref_v[layer, k] = qk @ e, blended @ e
        # the two trajectories part by rounding only (exp of one matrix against a batch's,
        # A re-skewed or not): about 4e-11 after 8 steps, where a wrong term gives 1e-3
        assert torch.allclose(q, ref_q, rtol=0, atol=1e-9)
        assert torch.allclose(opt.velocity, ref_v, rtol=0, atol=1e-9)
    assert float(opt.velocity.abs().max()) > 0.1


def test_a_small_step_descends_at_the_rate_of_the_projected_gradient():
    """First order: for J(Q) = ⟨C, Q⟩ one step of rate α (β = 0) changes J by −α‖π_T(−C)‖²."""
    q = _stack(1, 1, 4, torch.float64)
    c = torch.randn(q.shape, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    before, alpha = float((c * q).sum()), 1e-4
    predicted = -alpha * float(tangent_projection(q, -c).square().sum())
    GeodesicMomentum(q, torch.tensor([alpha]), torch.zeros(1)).step(
        q, c, torch.ones(1, dtype=torch.bool))
    assert float((c * q).sum()) - before == pytest.approx(predicted, rel=1e-3)


def test_euclidean_momentum_decays_the_flagged_parameters_of_active_members_only():
    """v := βv + (1 − β)(g + λp), p := p − αv per member, λ only on parameters flagged
    ``decay`` (N §5), members sitting out left with their weights and momentum."""
    g = torch.Generator().manual_seed(9)
    params = [torch.randn(3, 5, 2, generator=g, dtype=torch.float64),
              torch.randn(3, 5, generator=g, dtype=torch.float64)]
    lr = torch.tensor([0.1, 0.3, 0.05], dtype=torch.float64)
    beta = torch.tensor([0.9, 0.5, 0.0], dtype=torch.float64)
    decay = torch.tensor([0.01, 0.0, 0.1], dtype=torch.float64)
    ref_p, ref_v = [p.clone() for p in params], [torch.zeros_like(p) for p in params]
    opt = EuclideanMomentum(params, [True, False], lr, beta, decay)
    for active in ACTIVE:
        grads = [torch.randn(p.shape, generator=g, dtype=torch.float64) for p in params]
        opt.step(grads, torch.tensor(active))
        for i, flagged in enumerate([True, False]):
            for k in [k for k in range(3) if active[k]]:
                step = grads[i][k] + (decay[k] * ref_p[i][k] if flagged else 0.0)
                ref_v[i][k] = beta[k] * ref_v[i][k] + (1 - beta[k]) * step
                ref_p[i][k] = ref_p[i][k] - lr[k] * ref_v[i][k]
        for p, r, v, rv in zip(params, ref_p, opt.velocity, ref_v, strict=True):
            assert torch.allclose(p, r, rtol=0, atol=1e-14)
            assert torch.allclose(v, rv, rtol=0, atol=1e-14)


def test_reproject_restores_orthogonality_and_tangency():
    q = _stack(1, 2, 4, torch.float64) + 1e-3
    assert float(orthogonality_error(q).max()) > 1e-4
    v = torch.randn(q.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    q2, v2 = reproject(q, v)
    assert float(orthogonality_error(q2).max()) < 1e-13
    m = q2.transpose(-1, -2) @ v2
    assert torch.allclose(m, -m.transpose(-1, -2), atol=1e-13)
    assert torch.allclose(q2, q, atol=1e-2)
