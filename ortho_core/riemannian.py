"""Riemannian SGD with momentum on the orthogonal group, on packs of matrices (N §4, eqs. 6-9,
after Edelman, Arias & Smith).

For a square orthogonal Q and a direction Z = −∂J/∂Q:

- tangent projection (N eq. 6): π_T(Z) = Q A_Z + (I − QQᵀ)Z with A_Z = ½(QᵀZ − ZᵀQ); for a
  square orthogonal Q the second term is zero, so π_T(Z) = Q·skew(QᵀZ), and a tangent vector
  V is exactly one whose QᵀV is skew-symmetric;
- momentum (N §4): Z' = β Z₀ + (1 − β) π_T(Z), Z₀ the momentum carried from the last step;
- geodesic step (N eq. 7): Q(α) = Q·exp(αA) with A = QᵀZ' (skew), α the learning rate;
- parallel transport of the momentum along its own geodesic (N eq. 9): Z₀ := Z'·exp(αA), so
  that QᵀZ₀ = A again at the new point (A commutes with exp(αA)).

Everything runs on tensors (..., K, n, n) with per-member α and β of shape (K,): one batched
``torch.linalg.matrix_exp`` per step for all layers and members. Rounding makes QᵀQ drift from
I (measured on a (5, 3, 4, 4) pack with random gradients: float32 about 6·10⁻⁵ after 1,000
steps and 2·10⁻⁴ after 4,000; float64 below 10⁻¹³), so :func:`reproject` returns Q to the
nearest orthogonal matrix (polar factor, as geoopt's ``stabilize`` does) and the momentum to
its tangent space, and :class:`GeodesicMomentum` does so every ``reproject_every`` steps
(every 100: about 10⁻⁶ in float32).

Why not a library: none runs this algorithm. PyTorch's
``torch.nn.utils.parametrizations.orthogonal`` and geotorch's ``orthogonal`` are
reparametrisations Q = f(X) of an unconstrained X that a Euclidean optimiser moves: the
momentum lives in X's coordinates and is not parallel-transported (N eq. 9), and every step
recomputes f and back-propagates through it. geoopt's ``RiemannianSGD`` on ``Stiefel`` moves
along a retraction, not the geodesic Q·exp(αA) (N eq. 7), transports momentum by projection,
and takes one α and β per parameter group (a pack's per-member α, β need K groups).
``python benchmarks/riemannian_step.py --threads 1 --cpu-time`` (this machine, 2 shared
cores, torch 2.13 CPU, geoopt 0.5.1, geotorch 0.4.0), µs per step of (L, K, n × n) stacks,
ours against each:

=============  ======  ======  ===========  ========
(L, K, n)      ours    geoopt  torch-param  geotorch
=============  ======  ======  ===========  ========
(20, 8, 2)     144     113     439          452
(50, 8, 4)     519     275     1375         1402
(40, 8, 8)     880     559     4062         4151
=============  ======  ======  ===========  ========

The parametrisations are 2.7-4.7 times slower; geoopt's retraction step is 1.3-1.9 times
faster than our exact geodesic, but it is a different update (and a step is a small part of a
training iteration), so N's own is kept.
"""

from __future__ import annotations

import torch
from torch import Tensor


def skew(m: Tensor) -> Tensor:
    """The skew-symmetric part ½(M − Mᵀ) of every matrix of ``m`` (..., n, n)."""
    return 0.5 * (m - m.transpose(-1, -2))


def tangent_projection(q: Tensor, z: Tensor) -> Tensor:
    """π_T(Z) = Q·skew(QᵀZ) (N eq. 6 for a square orthogonal Q: (I − QQᵀ)Z vanishes)."""
    return q @ skew(q.transpose(-1, -2) @ z)


def geodesic(q: Tensor, v: Tensor, t: Tensor) -> tuple[Tensor, Tensor]:
    """(Q(t), V(t)): the point Q·exp(tA) along the geodesic from Q in direction V = QA (N
    eq. 7), and V parallel-transported to it, V·exp(tA) (N eq. 9).

    ``t`` broadcasts against (..., 1, 1) (a step size per member, shaped (K, 1, 1)); A is
    re-skewed from QᵀV so that exp(tA) is orthogonal to rounding even if V has drifted from
    the tangent space.
    """
    a = skew(q.transpose(-1, -2) @ v)
    e = torch.linalg.matrix_exp(t * a)
    return q @ e, v @ e


def reproject(q: Tensor, v: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
    """The nearest orthogonal matrix to each Q (the polar factor U Vᵀ of Q = U S Vᵀ) and V
    projected to the tangent space there (None stays None)."""
    u, _, vh = torch.linalg.svd(q)
    q = u @ vh
    return q, None if v is None else tangent_projection(q, v)


def orthogonality_error(q: Tensor) -> Tensor:
    """max |QᵀQ − I| over the entries of each matrix of ``q`` (..., n, n) -> (...)."""
    eye = torch.eye(q.shape[-1], dtype=q.dtype, device=q.device)
    return (q.transpose(-1, -2) @ q - eye).abs().amax(dim=(-1, -2))


class GeodesicMomentum:
    """N's optimiser for a stack of orthogonal matrices Q (L, K, n, n): per member k a rate
    α[k] and a momentum β[k]; the momentum Z₀ (L, K, n, n) starts at zero.

    ``reproject_every`` > 0 calls :func:`reproject` after every that many steps (0: never).
    """

    def __init__(self, q: Tensor, lr: Tensor, momentum: Tensor, reproject_every: int = 0):
        self.lr = lr.to(q).view(-1, 1, 1)
        self.beta = momentum.to(q).view(-1, 1, 1)
        self.velocity = torch.zeros_like(q)
        self.reproject_every = reproject_every
        self.steps = 0

    @torch.no_grad()
    def step(self, q: Tensor, grad: Tensor, active: Tensor) -> None:
        """One step of every member in ``active`` (K,), in place on ``q`` and the momentum;
        the others stay bit-identical. ``grad`` is ∂J/∂Q (L, K, n, n)."""
        direction = tangent_projection(q, -grad)
        blended = self.beta * self.velocity + (1.0 - self.beta) * direction
        new_q, new_v = geodesic(q, blended, self.lr)
        self.steps += 1
        if self.reproject_every and self.steps % self.reproject_every == 0:
            new_q, new_v = reproject(new_q, new_v)
        keep = active.view(-1, 1, 1)
        q.copy_(torch.where(keep, new_q, q))
        self.velocity = torch.where(keep, new_v, self.velocity)


class EuclideanMomentum:
    """The same momentum in Euclidean space for the unconstrained parameters (ReLU layers,
    the first and last matrices, biases): v := βv + (1 − β)(g + λp), p := p − αv, with the
    L2 weight λ[k] only on the parameters flagged ``decay`` (N §5: on ReLU layers only)."""

    def __init__(self, params: list[Tensor], decay: list[bool], lr: Tensor, momentum: Tensor,
                 weight_decay: Tensor):
        self.params, self.decay = params, decay
        self.lr, self.beta, self.weight_decay = lr, momentum, weight_decay
        self.velocity = [torch.zeros_like(p) for p in params]

    @staticmethod
    def _view(values: Tensor, like: Tensor) -> Tensor:
        return values.to(like).view((-1,) + (1,) * (like.dim() - 1))

    @torch.no_grad()
    def step(self, grads: list[Tensor], active: Tensor) -> None:
        """One step of every member in ``active`` (K,) for ``grads`` matching the params."""
        for i, (p, g) in enumerate(zip(self.params, grads, strict=True)):
            if self.decay[i]:
                g = g + self._view(self.weight_decay, p) * p
            beta = self._view(self.beta, p)
            v = beta * self.velocity[i] + (1.0 - beta) * g
            keep = active.view((-1,) + (1,) * (p.dim() - 1))
            p.copy_(torch.where(keep, p - self._view(self.lr, p) * v, p))
            self.velocity[i] = torch.where(keep, v, self.velocity[i])
