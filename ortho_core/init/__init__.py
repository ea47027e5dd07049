"""Initialisations of the weights: Glorot's normalised uniform, Gaussian, spectral-radius
rescaling (G Alg. 3.1) and orthogonal pre-training (OINIT, M eqs. 16-18)."""

from ortho_core.init.gaussian import gaussian
from ortho_core.init.normalised import normalised
from ortho_core.init.orthogonal_pretrain import (
    PretrainResult,
    orthogonal_pretrain,
    require_converged,
)
from ortho_core.init.spectral import rescale_spectral_radius

__all__ = [
    "PretrainResult",
    "gaussian",
    "normalised",
    "orthogonal_pretrain",
    "require_converged",
    "rescale_spectral_radius",
]
