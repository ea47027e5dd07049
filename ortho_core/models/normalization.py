"""Batch and weight normalisation for packed layers (K's baselines MLP_BN and MLP_WN, K §5).

PyTorch's ``nn.BatchNorm1d`` and ``parametrizations.weight_norm`` act on one network; here the
K members of a pack live in one tensor, so both are expressed through PyTorch's own kernels
over that layout instead:

- :class:`PackedBatchNorm` runs ``F.batch_norm`` once with the K·M preactivations of all
  members as channels. Batch normalisation is per channel, so this is exactly K independent
  ``nn.BatchNorm1d(M)`` (same defaults: γ = 1, β = 0, ε = 10⁻⁵, momentum 0.1, unbiased
  running variance).
- :class:`PackedWeightNorm` is a parametrisation w = g·v/‖v‖ of every row of a packed weight
  (K, out, in) (Salimans & Kingma 2016, eq. 2), with the parameters g (K, out, 1) and v
  (K, out, in) laid out as PyTorch's ``weight_norm(dim=0)`` lays them out for one matrix.

Salimans & Kingma's data-dependent initialisation of WN is in
:mod:`ortho_core.init.weight_norm_data`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class PackedBatchNorm(nn.Module):
    """Batch normalisation of preactivations z (K, B, M): K independent ``BatchNorm1d(M)``.

    In training mode each member's M features are normalised with the minibatch mean and
    biased variance and its running statistics are updated; in evaluation mode the running
    statistics are used (Ioffe & Szegedy 2015, Alg. 1-2).
    """

    def __init__(self, members: int, features: int, *, eps: float = 1e-5, momentum: float = 0.1,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None):
        super().__init__()
        self.eps = eps
        self.momentum = momentum
        kw = {"dtype": dtype, "device": device}
        self.weight = nn.Parameter(torch.ones(members, features, **kw))
        self.bias = nn.Parameter(torch.zeros(members, features, **kw))
        self.register_buffer("running_mean", torch.zeros(members, features, **kw))
        self.register_buffer("running_var", torch.ones(members, features, **kw))

    def forward(self, z: Tensor) -> Tensor:
        """Normalise z (K, B, M) per member and feature; returns (K, B, M). A one-member
        pack may pass (B, M)."""
        if z.dim() == 2:
            return F.batch_norm(z, self.running_mean.view(-1), self.running_var.view(-1),
                                self.weight.view(-1), self.bias.view(-1), self.training,
                                self.momentum, self.eps)
        k, b, m = z.shape
        flat = z.transpose(0, 1).reshape(b, k * m)
        out = F.batch_norm(flat, self.running_mean.view(-1), self.running_var.view(-1),
                           self.weight.reshape(-1), self.bias.reshape(-1), self.training,
                           self.momentum, self.eps)
        return out.view(b, k, m).transpose(0, 1)


class PackedWeightNorm(nn.Module):
    """The parametrisation w = g·v/‖v‖ of each row of a packed weight (K, out, in).

    Registered with ``torch.nn.utils.parametrize.register_parametrization`` it replaces the
    weight by ``original0`` = g (K, out, 1) and ``original1`` = v (K, out, in), the layout of
    PyTorch's ``weight_norm(dim=0)`` with the pack as a leading dimension.
    """

    def forward(self, g: Tensor, v: Tensor) -> Tensor:
        """w = g·v/‖v‖, the norm taken over each row (the input dimension)."""
        return v * (g / v.norm(dim=-1, keepdim=True))

    def right_inverse(self, w: Tensor) -> tuple[Tensor, Tensor]:
        """(g, v) = (‖w‖ per row, w): the parameters that reproduce ``w``."""
        return w.norm(dim=-1, keepdim=True), w
