"""Linearly constrained weights (LCW, K §3): every weight vector sums to zero.

A weight vector w ∈ R^m in W_LC = {w : w₁ + … + w_m = 0} (K eq. 6) has zero expected dot
product with any input whose mean is γ·1_m (K Prop. 3), which removes the angle bias that makes
deep sigmoid MLPs untrainable (K §2). LCW is learnt without constraints by reparameterising
w = B_m v with v ∈ R^{m-1} trainable and B_m a fixed basis of W_LC (K §3.2):

- ``basis="eq7"`` (the default): K eq. 7, B_m = [I_{m-1}; −1ᵀ_{m-1}], i.e. w = (v, −Σv),
  which K's experiments used (K §3.2). SGD on v moves w by −α B_m B_mᵀ ∇_w: B_mᵀB_m =
  I + 11ᵀ, so within W_LC the step is the projected gradient's except along
  (1, …, 1, −(m − 1)) (the weight of the last input against the others), where it is m times
  longer.
- ``basis="orthonormal"``: the first m − 1 columns of the Householder reflection H that maps
  e_m to 1_m/√m. H is symmetric and orthogonal and H e_m spans 1_m, so its other columns are
  an orthonormal basis of W_LC; B_m v costs O(m) per vector (no m × (m−1) matrix product) and
  SGD on v is exactly projected SGD on w (B_m B_mᵀ = I − 1_m 1_mᵀ/m). K "also tried" it and
  reports "little difference in accuracy" (K §3.2).

K's initialisation on a minibatch (K §3.3, App. A) is in
:mod:`ortho_core.init.lcw_minibatch`.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize

from ortho_core.models.mlp import PackedMLP

Basis = Literal["orthonormal", "eq7"]
BASES: tuple[str, ...] = ("orthonormal", "eq7")
"""The bases B_m of W_LC that :class:`ZeroSumBasis` implements."""


class ZeroSumBasis(nn.Module):
    """The parametrisation w = B_m v of vectors in W_LC (K §3.2), applied to the last dimension.

    ``forward`` maps v (..., m−1) to w (..., m); ``right_inverse`` maps a w in W_LC back to
    the v that reproduces it (for eq. 7 "the first m − 1 elements", K §3.3).
    """

    def __init__(self, m: int, basis: Basis = "eq7"):
        super().__init__()
        if m < 2:
            raise ValueError(f"ZeroSumBasis: needs m >= 2 inputs, got {m}")
        if basis not in BASES:
            raise ValueError(f"ZeroSumBasis: basis must be one of {BASES}, got {basis!r}")
        self.m = m
        self.basis = basis
        root = math.sqrt(m)
        self._c = 1.0 / (root - 1.0)
        self._inv_root = 1.0 / root

    def forward(self, v: Tensor) -> Tensor:
        """w = B_m v."""
        total = v.sum(dim=-1, keepdim=True)
        if self.basis == "eq7":
            return torch.cat([v, -total], dim=-1)
        # H [v; 0] with H = I − 2uuᵀ/‖u‖², u = 1_m/√m − e_m: w_i = v_i − Σv/(m − √m) for i < m,
        # w_m = Σv/√m.
        head = v - total * (self._c * self._inv_root)
        return torch.cat([head, total * self._inv_root], dim=-1)

    def right_inverse(self, w: Tensor) -> Tensor:
        """v = B_mᵀ w for the orthonormal basis (exact for w in W_LC), w[..., :m−1] for eq. 7."""
        if self.basis == "eq7":
            return w[..., :-1].clone()
        # (H w)[:m-1] with uᵀw = Σw/√m − w_m.
        proj = w.sum(dim=-1, keepdim=True) * self._inv_root - w[..., -1:]
        return w[..., :-1] - proj * self._c

    def matrix(self, dtype: torch.dtype = torch.float64) -> Tensor:
        """B_m as an explicit m × (m−1) matrix (for tests and explanation, never in training)."""
        return self.forward(torch.eye(self.m - 1, dtype=dtype)).T


def apply_lcw(model: PackedMLP, basis: Basis = "eq7") -> None:
    """Replace every weight vector of ``model`` by LCW (K's MLP_LCW: all layers, output included).

    Each layer's weight (K, out, in) becomes ``ZeroSumBasis(in)`` applied to a trainable
    ``parametrizations.weight.original`` v (K, out, in − 1); the current weights are projected
    onto W_LC first (they are replaced by
    :func:`~ortho_core.init.lcw_minibatch.lcw_minibatch_init` anyway).
    """
    for layer in model.layers:
        with torch.no_grad():
            layer.weight.sub_(layer.weight.mean(dim=-1, keepdim=True))
        parametrize.register_parametrization(layer, "weight", ZeroSumBasis(layer.weight.shape[-1],
                                                                           basis))
