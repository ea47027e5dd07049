"""MNIST from the shipped IDX files: counts, checksums, label histogram and pixel mean as
published (shared/data/README.md), the pixel layouts, the fixed permutation, M's per-pixel
standardisation against an independent numpy float64 computation, strict IDX parsing, and the
errors for a corrupt file, a missing file and a missing directory."""

from __future__ import annotations

import gzip
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from ortho_core.data import checksums
from ortho_core.data.checksums import MNIST, md5sum
from ortho_core.data.datasets import DATASETS, load_dataset
from ortho_core.data.mnist import load_mnist, pixel_permutation, standardise
from ortho_core.data.paths import DEFAULT_DIR, ENV_VAR, data_dir
from ortho_core.errors import ConfigError, DataError

pytestmark = pytest.mark.usefixtures("shared_data")

# shared/data/README.md, the published values.
README_MD5 = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
TRAIN_LABEL_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]


@pytest.fixture
def test_copy(tmp_path: Path, shared_data: Path) -> Path:
    """A data directory holding copies of the two (small) test-split files."""
    (tmp_path / "mnist").mkdir()
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        shutil.copy(shared_data / "mnist" / name, tmp_path / "mnist" / name)
    return tmp_path


def test_checksums_are_the_published_ones(shared_data):
    assert {Path(p.relpath).name: p.md5 for p in MNIST.values()} == README_MD5
    for published in MNIST.values():
        path = shared_data / published.relpath
        assert path.stat().st_size == published.size
        assert md5sum(path) == published.md5


def test_train_split_as_published():
    x, y = load_mnist("train")
    assert x.shape == (60_000, 784) and x.dtype == torch.float32
    assert y.shape == (60_000,) and y.dtype == torch.int64
    assert torch.bincount(y).tolist() == TRAIN_LABEL_COUNTS
    assert float(x.double().mean()) == pytest.approx(0.1307, abs=5e-5)
    assert float(x.min()) == 0.0 and float(x.max()) == 1.0
    assert y[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]


def test_test_split_matches_an_independent_parse(shared_data):
    x, y = load_mnist("test")
    assert x.shape == (10_000, 784) and y.shape == (10_000,)
    raw = gzip.decompress((shared_data / "mnist" / "t10k-images-idx3-ubyte.gz").read_bytes())
    labels = gzip.decompress((shared_data / "mnist" / "t10k-labels-idx1-ubyte.gz").read_bytes())
    for i in (0, 1, 4321, 9999):
        pixels = torch.tensor(list(raw[16 + 784 * i: 16 + 784 * (i + 1)]), dtype=torch.float32)
        assert torch.equal(x[i], pixels / 255)
        assert int(y[i]) == labels[8 + i]


def test_layouts_and_fresh_tensors():
    flat, labels = load_mnist("test")
    seq, _ = load_mnist("test", sequence=True)
    assert flat.shape == (10_000, 784)
    assert seq.shape == (10_000, 784, 1) and torch.equal(seq[..., 0], flat)
    reference = flat.clone(), labels.clone()
    flat.zero_()
    labels.fill_(-1)
    again, labels_again = load_mnist("test")
    assert torch.equal(again, reference[0]) and torch.equal(labels_again, reference[1])


def test_permutation_is_one_fixed_bijection_applied_to_every_image():
    perm = pixel_permutation(3)
    assert perm.dtype == torch.int64
    assert torch.equal(torch.sort(perm).values, torch.arange(784))
    assert torch.equal(perm, pixel_permutation(3))
    assert not torch.equal(perm, pixel_permutation(4))
    assert not torch.equal(perm, torch.arange(784))
    x, y = load_mnist("test")
    xp, yp = load_mnist("test", permutation_seed=3)
    assert torch.equal(xp, x[:, perm]) and torch.equal(yp, y)
    seq, _ = load_mnist("test", sequence=True, permutation_seed=3)
    assert torch.equal(seq[..., 0], xp)


def raw_pixels(shared_data: Path, split: str) -> np.ndarray:
    """The (N, 784) pixel values of ``split`` as float64, parsed here with numpy alone."""
    prefix = "train" if split == "train" else "t10k"
    raw = gzip.decompress((shared_data / "mnist" / f"{prefix}-images-idx3-ubyte.gz").read_bytes())
    return np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(-1, 784).astype(np.float64)


def test_standardised_train_split_has_zero_mean_and_unit_std_per_pixel(shared_data):
    x, y = load_mnist("train", preprocessing="standardise")
    assert x.shape == (60_000, 784) and x.dtype == torch.float32
    assert torch.bincount(y).tolist() == TRAIN_LABEL_COUNTS
    raw = raw_pixels(shared_data, "train")
    varying = raw.std(axis=0) > 0
    assert int((~varying).sum()) == 67  # border pixels that are 0 in every training image
    out = x.numpy().astype(np.float64)
    np.testing.assert_allclose(out.mean(axis=0), 0.0, rtol=0, atol=1e-6)
    np.testing.assert_allclose(out.std(axis=0)[varying], 1.0, rtol=0, atol=1e-5)
    # A constant pixel is only centred: all 0 (sklearn divides by 1 there).
    assert not out[:, ~varying].any() and not varying[0]
    # Elementwise: (v − mean) / std with the split's own population statistics.
    mean, std = raw.mean(axis=0), np.where(varying, raw.std(axis=0), 1.0)
    np.testing.assert_allclose(out[:2000], (raw[:2000] - mean) / std, rtol=1e-6, atol=1e-6)


def test_standardised_test_split_uses_its_own_statistics(shared_data):
    x, _ = load_mnist("test", preprocessing="standardise")
    train, test = raw_pixels(shared_data, "train"), raw_pixels(shared_data, "test")
    out = x.numpy().astype(np.float64)
    np.testing.assert_allclose(out.mean(axis=0), 0.0, rtol=0, atol=1e-6)
    varying = test.std(axis=0) > 0
    np.testing.assert_allclose(out.std(axis=0)[varying], 1.0, rtol=0, atol=1e-5)
    # Pixels that vary in the training set but not in the test set are 0 here.
    test_only_constant = ~varying & (train.std(axis=0) > 0)
    assert test_only_constant.sum() > 0 and not out[:, test_only_constant].any()
    # With the training statistics instead, the test set's per-pixel means are not 0.
    train_std = np.where(train.std(axis=0) > 0, train.std(axis=0), 1.0)
    with_train_stats = (test - train.mean(axis=0)) / train_std
    assert np.abs(with_train_stats.mean(axis=0)).max() > 0.05
    assert np.abs(out - with_train_stats).max() > 0.05


def test_standardisation_equals_m_codes_sklearn_scale(shared_data):
    from sklearn.preprocessing import scale

    x, _ = load_mnist("test", preprocessing="standardise")
    torch.testing.assert_close(x, torch.from_numpy(scale(raw_pixels(shared_data, "test"))),
                               check_dtype=False, rtol=1e-6, atol=1e-6)


def test_permutation_and_standardisation_commute():
    perm = pixel_permutation(5)
    unit, _ = load_mnist("test")
    pixels = (unit * 255).round().to(torch.uint8)
    permuted_first = standardise(pixels[:, perm])
    loaded, _ = load_mnist("test", preprocessing="standardise", permutation_seed=5)
    torch.testing.assert_close(loaded, permuted_first, rtol=0, atol=1e-6)
    standardised, _ = load_mnist("test", preprocessing="standardise")
    assert torch.equal(loaded, standardised[:, perm])
    assert not torch.equal(loaded, standardised)
    seq, _ = load_mnist("test", sequence=True, preprocessing="standardise", permutation_seed=5)
    assert seq.shape == (10_000, 784, 1) and torch.equal(seq[..., 0], loaded)


def test_standardise_centres_a_constant_column_and_scales_by_population_std():
    pixels = torch.tensor([[0, 7, 1], [0, 7, 3], [0, 7, 8]], dtype=torch.uint8)
    column = np.array([1.0, 3.0, 8.0])
    expected = (column - 4.0) / np.sqrt(((column - 4.0) ** 2).mean())  # ddof = 0
    out = standardise(pixels)
    assert out.dtype == torch.float32
    assert torch.equal(out[:, :2], torch.zeros(3, 2))
    torch.testing.assert_close(out[:, 2], torch.tensor(expected, dtype=torch.float32))


def test_load_dataset_dispatches_to_mnist():
    x, y = load_dataset("mnist", "test")
    assert x.shape == (10_000, DATASETS["mnist"].n_features) and DATASETS["mnist"].n_classes == 10
    assert torch.equal(x, load_mnist("test")[0]) and torch.equal(y, load_mnist("test")[1])
    standardised, _ = load_dataset("mnist", "test", preprocessing="standardise")
    assert torch.equal(standardised, load_mnist("test", preprocessing="standardise")[0])


def test_each_file_is_hashed_once_per_process(test_copy, monkeypatch):
    calls = []

    def counting(path):
        calls.append(path.name)
        return md5sum(path)

    monkeypatch.setattr(checksums, "md5sum", counting)
    first = load_mnist("test", data_dir=test_copy)
    second = load_mnist("test", data_dir=test_copy)
    assert sorted(calls) == ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
    assert torch.equal(first[0], second[0])


def test_corrupt_file_names_the_file_and_the_expected_md5(test_copy):
    path = test_copy / "mnist" / "t10k-images-idx3-ubyte.gz"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(DataError) as info:
        load_mnist("test", data_dir=test_copy)
    assert info.value.field == str(path)
    assert "9fb629c4189551a2d022fa330f9573f3" in str(info.value)
    assert md5sum(path) in str(info.value)


def test_missing_file_tells_how_to_get_it(test_copy):
    path = test_copy / "mnist" / "t10k-labels-idx1-ubyte.gz"
    path.unlink()
    with pytest.raises(DataError) as info:
        load_mnist("test", data_dir=test_copy)
    assert info.value.field == str(path)
    message = str(info.value)
    assert "ec29112dd5afa0611ce80d1b7f02629c" in message
    assert "ortho data download mnist" in message
    assert "https://ossci-datasets.s3.amazonaws.com/mnist/t10k-labels-idx1-ubyte.gz" in message


def test_missing_directory_names_the_variable_and_the_path(tmp_path, monkeypatch):
    missing = tmp_path / "nowhere"
    monkeypatch.setenv(ENV_VAR, str(missing))
    with pytest.raises(DataError) as info:
        load_mnist("test")
    assert info.value.field == str(missing) and ENV_VAR in str(info.value)
    with pytest.raises(DataError) as info:
        load_dataset("mnist", "train")
    assert info.value.field == str(missing)


def test_data_dir_precedence(tmp_path, monkeypatch, shared_data):
    assert data_dir() == shared_data
    assert data_dir(tmp_path) == tmp_path
    monkeypatch.delenv(ENV_VAR)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert data_dir(must_exist=False) == tmp_path / ".cache" / "ortho-sweeps" / "data"
    with pytest.raises(DataError) as info:
        data_dir()
    assert info.value.field == str(DEFAULT_DIR.expanduser())


def _idx(path: Path, magic: int, dims: tuple[int, ...], payload: int) -> None:
    header = struct.pack(f">I{len(dims)}I", magic, *dims)
    path.write_bytes(gzip.compress(header + bytes(payload)))


@pytest.mark.parametrize(("magic", "dims", "payload", "expected"), [
    (0x00000801, (2, 28, 28), 2 * 784, "magic 0x00000803"),
    (0x00000803, (2, 27, 28), 2 * 27 * 28, "dims (N, 28, 28)"),
    (0x00000803, (2, 28, 28), 2 * 784 - 1, "payload bytes"),
])
def test_idx_structure_is_checked_strictly(tmp_path, magic, dims, payload, expected):
    (tmp_path / "mnist").mkdir()
    images = tmp_path / "mnist" / "t10k-images-idx3-ubyte.gz"
    _idx(images, magic, dims, payload)
    _idx(tmp_path / "mnist" / "t10k-labels-idx1-ubyte.gz", 0x00000801, (2,), 2)
    with pytest.raises(DataError) as info:
        load_mnist("test", data_dir=tmp_path, verify_md5=False)
    assert info.value.field == str(images) and expected in str(info.value)


def test_unverified_idx_files_load_and_are_checked_for_consistency(tmp_path):
    (tmp_path / "mnist").mkdir()
    _idx(tmp_path / "mnist" / "t10k-images-idx3-ubyte.gz", 0x00000803, (2, 28, 28), 2 * 784)
    labels = tmp_path / "mnist" / "t10k-labels-idx1-ubyte.gz"
    _idx(labels, 0x00000801, (2,), 2)
    x, y = load_mnist("test", data_dir=tmp_path, verify_md5=False)
    assert x.shape == (2, 784) and y.tolist() == [0, 0]
    _idx(labels, 0x00000801, (3,), 3)
    with pytest.raises(DataError, match="as many labels as images"):
        load_mnist("test", data_dir=tmp_path, verify_md5=False)
    labels.write_bytes(b"not gzip")
    with pytest.raises(DataError, match="gzip"):
        load_mnist("test", data_dir=tmp_path, verify_md5=False)


def test_bad_arguments_name_the_field():
    with pytest.raises(ConfigError) as info:
        load_mnist("valid")
    assert info.value.field == "split"
    for call in (lambda: load_mnist("test", preprocessing="bogus"),
                 lambda: load_dataset("mnist", "test", preprocessing="bogus"),
                 lambda: load_dataset("cifar10", "test", preprocessing="standardise")):
        with pytest.raises(ConfigError) as info:
            call()
        assert info.value.field == "preprocessing"
    assert "mnist only" in str(info.value)
