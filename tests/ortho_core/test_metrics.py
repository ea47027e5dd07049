"""Spectral radius and per-member norms."""

from __future__ import annotations

import math

import pytest
import torch

from ortho_core.metrics import member_norm, spectral_radius


def test_spectral_radius_of_scaled_rotations_and_diagonals() -> None:
    c, s = math.cos(0.3), math.sin(0.3)
    rotation = torch.tensor([[c, -s], [s, c]])
    w = torch.stack([
        torch.stack([1.5 * rotation, torch.diag(torch.tensor([0.2, -0.7]))]),
        torch.stack([torch.tensor([[0.0, 1.0], [0.0, 0.0]]), torch.eye(2) * 3]),
    ])
    radius = spectral_radius(w)
    assert radius.dtype == torch.float64 and radius.shape == (2, 2)
    torch.testing.assert_close(radius, torch.tensor([[1.5, 0.7], [0.0, 3.0]],
                                                    dtype=torch.float64))


def test_spectral_radius_matches_eigenvalues_of_random_matrix() -> None:
    g = torch.Generator().manual_seed(0)
    w = torch.randn(40, 40, generator=g, dtype=torch.float64)
    eig = torch.linalg.eigvals(w)
    assert spectral_radius(w.float()).item() == pytest.approx(eig.abs().max().item(), rel=1e-6)


def test_member_norm_over_several_tensors() -> None:
    g = torch.Generator().manual_seed(1)
    a = torch.randn(4, 3, 5, generator=g)
    b = torch.randn(4, 7, generator=g)
    expected = torch.stack([torch.cat([a[k].flatten(), b[k]]).norm() for k in range(4)])
    torch.testing.assert_close(member_norm([a, b]), expected)
