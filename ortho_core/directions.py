"""G's descent directions (G §3.3, §3.5): the gradient, the simplex direction and the simplex
direction with conditional switching (Alg. 3.2), per member of a pack.

The simplex direction combines the temporal gradients ∇_θ L|_t (:mod:`ortho_core.temporal`,
G eqs. 3.1-3.3) of θ, stacked over all parameters:

- normalise each one (eq. 3.4): g_t = ∇L|_t / ‖∇L|_t‖; a step whose temporal gradient is 0
  contributes nothing (G's code divides by 1 there);
- combine them with random convex weights (eq. 3.5): g = Σ_t β_t g_t, β_t > 0, Σ_t β_t = 1,
  drawn at every iteration as β = u / Σ u with u_t uniform on (0, 1] (G's code,
  ``SimplexCombination``: a normalised uniform vector);
- give the result the gradient's norm (eq. 3.6): d = ‖∇L‖ g / ‖g‖ (0 if g = 0).

This is the descent *direction* up to sign: the step is θ − α d, as for the gradient.
``simplex_switch`` (Alg. 3.2, lines 9-13) uses the gradient whenever ‖∇L‖ > ψ
(``switch_norm``) and the simplex direction otherwise. The step size of eq. 3.7 is
α = μ if ‖d‖ ≤ τ, μτ/‖d‖ otherwise, i.e. the learning rate times the clipping factor
min(1, τ/‖d‖) of :func:`ortho_core.optim.clip_factors`; the trainer applies it to d.

Normalisation is over the whole parameter vector θ, as in the text (Alg. 3.2 normalises
{∇_θ L|_t}; §3.6 treats x ∈ ℝⁿ) and in the final version of G's code (``RNNGradient``,
``'togheter'``); an earlier version of that code normalised and rescaled each parameter
separately.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ortho_core.metrics import member_norm
from ortho_core.models.srnn import Trace
from ortho_core.temporal import combine, temporal_sq_norms

DIRECTIONS = ("gradient", "simplex", "simplex_switch")
"""``direction`` values: the gradient, the simplex direction (G eqs. 3.4-3.6) and the simplex
direction with conditional switching (G Alg. 3.2)."""


def simplex_weights(steps: int, generator: torch.Generator) -> Tensor:
    """β (T,) float64 on the CPU: random convex weights, u / Σu with u uniform on (0, 1]
    (G eq. 3.5: β_t > 0, Σ_t β_t = 1)."""
    u = 1.0 - torch.rand(steps, generator=generator, dtype=torch.float64)
    return u / u.sum()


def simplex_direction(trace: Trace, beta: Tensor, grad_norm: Tensor) -> list[Tensor]:
    """The simplex direction of every member (G eqs. 3.4-3.6), one tensor per parameter.

    ``beta`` holds the convex weights, (T,) shared by the pack or (K, T); ``grad_norm`` (K,)
    is ‖∇L‖ of each member, the norm the direction is given.
    """
    norms = temporal_sq_norms(trace).sum(-1).sqrt()
    beta = beta.to(norms).expand_as(norms)
    weights = torch.where(norms > 0, beta / norms, torch.zeros_like(norms))
    combined = combine(trace, weights)
    length = member_norm(combined)
    scale = torch.where(length > 0, grad_norm / length, torch.zeros_like(length))
    return [g * scale.view(-1, *[1] * (g.dim() - 1)) for g in combined]


def uses_simplex(codes: Tensor, grad_norm: Tensor, switch_norm: Tensor) -> Tensor:
    """Which members step along the simplex direction: (K,) bool.

    ``codes`` (K,) index :data:`DIRECTIONS`; ``switch_norm`` (K,) is ψ (ignored unless the
    member's direction is ``simplex_switch``, which keeps the simplex direction while
    ‖∇L‖ ≤ ψ and takes the gradient once ‖∇L‖ > ψ, G Alg. 3.2 line 11).
    """
    return (codes == 1) | ((codes == 2) & (grad_norm <= switch_norm))


def descent_directions(trace: Trace, beta: Tensor, grad_norm: Tensor, codes: Tensor,
                       switch_norm: Tensor) -> list[Tensor]:
    """Each member's direction d (one tensor per parameter; the step is θ − α d): the gradient
    or the simplex direction as :func:`uses_simplex` decides."""
    chosen = uses_simplex(codes, grad_norm, switch_norm)
    if not bool(chosen.any()):
        return trace.grads
    simplex = simplex_direction(trace, beta, grad_norm)
    return [torch.where(chosen.view(-1, *[1] * (g.dim() - 1)), s, g)
            for s, g in zip(simplex, trace.grads, strict=True)]
