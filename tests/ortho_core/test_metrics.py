"""Spectral radius and per-member norms."""

from __future__ import annotations

import math
import os
import signal

import numpy as np
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


def test_spectral_radius_of_matrices_with_known_eigenvalues() -> None:
    """S·D·S⁻¹ has D's eigenvalues for any invertible S: a far-from-normal matrix whose
    spectral radius (here 1.2, from the complex pair 0.72 ± 0.96i) is much below its norm."""
    g = torch.Generator().manual_seed(0)
    n = 8
    d = torch.zeros(n, n, dtype=torch.float64)
    d[:6, :6] = torch.diag(torch.tensor([1.1, -0.9, 0.5, -0.3, 0.2, 0.0], dtype=torch.float64))
    d[6:, 6:] = torch.tensor([[0.72, -0.96], [0.96, 0.72]], dtype=torch.float64)
    s = torch.randn(n, n, generator=g, dtype=torch.float64) + 3.0 * torch.eye(n)
    w = s @ d @ torch.linalg.inv(s)
    assert float(torch.linalg.matrix_norm(w, ord=2)) > 1.5
    assert spectral_radius(w).item() == pytest.approx(1.2, rel=1e-9)
    # Companion matrix of (x − 2)(x + 3)(x − 0.5) = x³ + 0.5x² − 6.5x + 3: ρ = 3.
    companion = torch.tensor([[-0.5, 6.5, -3.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    assert spectral_radius(companion).item() == pytest.approx(3.0, rel=1e-6)


def test_spectral_radius_of_float32_random_matrices_matches_numpy() -> None:
    """Computed in float64 from a float32 input, per member: numpy's eigvals of the same
    (float64-cast) matrices agree to float64 rounding."""
    g = torch.Generator().manual_seed(1)
    w = torch.randn(3, 40, 40, generator=g)
    expected = [np.abs(np.linalg.eigvals(m.double().numpy())).max() for m in w]
    radius = spectral_radius(w)
    assert radius.dtype == torch.float64
    np.testing.assert_allclose(radius.numpy(), expected, rtol=1e-10)


def test_member_norm_over_several_tensors() -> None:
    g = torch.Generator().manual_seed(1)
    a = torch.randn(4, 3, 5, generator=g)
    b = torch.randn(4, 7, generator=g)
    expected = torch.stack([torch.cat([a[k].flatten(), b[k]]).norm() for k in range(4)])
    torch.testing.assert_close(member_norm([a, b]), expected)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_spectral_radius_of_a_cuda_pack_is_the_cpus_on_the_cuda_device() -> None:
    """ρ of matrices on a GPU is computed on the CPU (MAGMA's eigvals is far slower there)
    and handed back on the GPU, equal to ρ of the same matrices on the CPU."""
    w = torch.randn(4, 30, 30, generator=torch.Generator().manual_seed(2))
    radius = spectral_radius(w.cuda())
    assert radius.device.type == "cuda" and radius.dtype == torch.float64
    assert torch.equal(radius.cpu(), spectral_radius(w))


def test_spectral_radius_split_over_threads_gives_each_matrix_its_own_value(monkeypatch) -> None:
    """A batch is split into ``threads`` near-equal parts computed side by side (default:
    torch's thread count), and each matrix's ρ is the one-thread value bit for bit, whatever
    the leading dimensions."""
    from ortho_core import metrics

    parts: list[int] = []
    radii = metrics._radii
    monkeypatch.setattr(metrics, "_radii", lambda w: parts.append(len(w)) or radii(w))
    w = torch.randn(2, 7, 30, 30, generator=torch.Generator().manual_seed(3))
    alone = spectral_radius(w, threads=1)
    assert parts == [14]
    parts.clear()
    split = spectral_radius(w, threads=3)
    assert sorted(parts) == [4, 5, 5] and split.shape == (2, 7)
    assert torch.equal(split, alone)
    parts.clear()
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    assert torch.equal(spectral_radius(w[0, :2]), alone[0, :2])
    assert parts == [1, 1]
    with pytest.raises(ValueError, match="threads must be at least 1, got 0"):
        spectral_radius(w, threads=0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:.*fork:DeprecationWarning")
def test_a_forked_child_splits_over_threads_of_its_own() -> None:
    """A process forked after a split (a data loader's worker) starts its own threads: the
    parent's pool has none behind it in the child, where a split would wait forever."""
    w = torch.randn(8, 20, 20, generator=torch.Generator().manual_seed(4))
    expected = spectral_radius(w, threads=2)
    pid = os.fork()
    if pid == 0:
        signal.alarm(20)
        os._exit(0 if torch.equal(spectral_radius(w, threads=2), expected) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
