"""Spectral-radius initialisation of the recurrent matrix (G Alg. 3.1).

G draws W_rec ~ N(0, σ²) (line 1) and rescales it to a chosen spectral radius ρ (lines 2-3):
ρ slightly above 1 keeps the temporal gradients of distant steps from vanishing at the start
of training (G §3.2, Fig. 3.1).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ortho_core.metrics import spectral_radius


def rescale_spectral_radius(w: Tensor, rho: float | Tensor) -> Tensor:
    """``w · ρ / ρ(w)`` for each square matrix in ``w`` (..., n, n) (G Alg. 3.1, lines 2-3).

    ``rho`` is a float or a tensor of shape (...) giving each member its own target radius.
    The current radius is computed in float64 (:func:`~ortho_core.metrics.spectral_radius`)
    and the scale applied in ``w``'s dtype. A matrix whose eigenvalues are all zero (nilpotent)
    has no direction to rescale and raises ``ValueError``.
    """
    current = spectral_radius(w)
    if bool((current == 0).any()):
        raise ValueError("rescale_spectral_radius: a matrix has spectral radius 0")
    target = torch.as_tensor(rho, dtype=torch.float64, device=w.device)
    scale = (target / current).to(w.dtype)
    return w * scale[..., None, None]
