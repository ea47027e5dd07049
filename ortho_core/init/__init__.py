"""Initialisations of the weights: Glorot's normalised uniform, Gaussian, spectral-radius
rescaling (G Alg. 3.1), orthogonal pre-training (OINIT, M eqs. 16-18), and the two
data-dependent ones of K's MLPs: LCW's minibatch initialisation (K §3.3) and Salimans &
Kingma's for weight normalisation (§3)."""

from ortho_core.init.gaussian import gaussian
from ortho_core.init.lcw_minibatch import lcw_minibatch_init, sample_zero_sum_ball
from ortho_core.init.normalised import normalised
from ortho_core.init.orthogonal_pretrain import (
    PretrainResult,
    orthogonal_pretrain,
    require_converged,
)
from ortho_core.init.spectral import rescale_spectral_radius
from ortho_core.init.weight_norm_data import weight_norm_data_init

__all__ = [
    "PretrainResult",
    "gaussian",
    "lcw_minibatch_init",
    "normalised",
    "orthogonal_pretrain",
    "require_converged",
    "rescale_spectral_radius",
    "sample_zero_sum_ball",
    "weight_norm_data_init",
]
