"""CIFAR-10/100 and SVHN loaders on small files written in the real formats: Python 2
pickle batches with Krizhevsky's keys and channel-major rows, and MATLAB v5 .mat files with
SVHN's (32, 32, 3, N) layout and label-10-is-zero convention. Checks exact pixel values,
labels and channel order against independent indexing, and errors on malformed files."""

from __future__ import annotations

import collections
import io
import pickle
import struct
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import scipy.io
import torch

from ortho_core.data.cifar import load_cifar
from ortho_core.data.datasets import DATASETS, dataset_info, load_dataset
from ortho_core.data.svhn import load_svhn
from ortho_core.errors import ConfigError, DataError

_RECONSTRUCT = np.ndarray((0,), np.uint8).__reduce__()[0]


def as_images(x: torch.Tensor, name: str) -> torch.Tensor:
    """A loaded split's flat rows as (N, channels, height, width), read channel-major as the
    loaders flatten them."""
    return x.reshape(len(x), *DATASETS[name].image_shape)


class Py2Pickler(pickle._Pickler):
    """Pickles as Python 2's cPickle wrote the CIFAR batches: every str and bytes (keys,
    file names, the arrays' raw data) as a py2 ``str`` (BINSTRING opcodes), and numpy's
    array constructor under its Python 2 module name ``numpy.core.multiarray``."""

    dispatch: ClassVar[dict] = dict(pickle._Pickler.dispatch)

    def save_py2_str(self, obj: str | bytes) -> None:
        raw = obj.encode("latin1") if isinstance(obj, str) else obj
        if len(raw) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(raw)]) + raw)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(raw)) + raw)
        self.memoize(obj)

    dispatch[bytes] = save_py2_str
    dispatch[str] = save_py2_str

    def save_global(self, obj: object, name: str | None = None) -> None:
        if obj is _RECONSTRUCT:
            self.write(pickle.GLOBAL + b"numpy.core.multiarray\n_reconstruct\n")
            self.memoize(obj)
        else:
            super().save_global(obj, name)


def write_py2_pickle(path: Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    Py2Pickler(buffer, protocol=2).dump(obj)
    path.write_bytes(buffer.getvalue())


def batch(rng: np.random.Generator, n: int, label_keys: dict[str, int], tag: str) -> dict:
    """A batch dict with the real keys: data (n, 3072) uint8, labels, batch_label, filenames."""
    entry = {"batch_label": tag, "data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
             "filenames": [f"{tag}_{i}.png" for i in range(n)]}
    for key, classes in label_keys.items():
        entry[key] = [int(v) for v in rng.integers(0, classes, n)]
    return entry


CIFAR10_TRAIN = [f"data_batch_{i}" for i in range(1, 6)]


@pytest.fixture
def cifar10(tmp_path: Path) -> tuple[Path, dict[str, dict]]:
    rng = np.random.default_rng(0)
    batches = {}
    for name, n in zip([*CIFAR10_TRAIN, "test_batch"], (3, 4, 2, 5, 1, 6), strict=True):
        batches[name] = batch(rng, n, {"labels": 10}, name)
        write_py2_pickle(tmp_path / "cifar-10-batches-py" / name, batches[name])
    return tmp_path, batches


@pytest.fixture
def cifar100(tmp_path: Path) -> tuple[Path, dict[str, dict]]:
    rng = np.random.default_rng(1)
    batches = {}
    for name, n in (("train", 7), ("test", 3)):
        batches[name] = batch(rng, n, {"fine_labels": 100, "coarse_labels": 20}, name)
        write_py2_pickle(tmp_path / "cifar-100-python" / name, batches[name])
    return tmp_path, batches


def test_cifar10_reproduces_pixels_labels_and_channel_order(cifar10):
    root, batches = cifar10
    flat, y = load_cifar("cifar10", "train", data_dir=root, verify_md5=False)
    data = np.concatenate([batches[name]["data"] for name in CIFAR10_TRAIN])
    labels = [label for name in CIFAR10_TRAIN for label in batches[name]["labels"]]
    assert flat.shape == (15, 3072) and flat.dtype == torch.float32
    assert y.dtype == torch.int64 and y.tolist() == labels
    x = as_images(flat, "cifar10")
    for i in range(len(data)):
        for channel in range(3):
            for row, col in ((0, 0), (0, 31), (17, 5), (31, 31)):
                value = data[i, channel * 1024 + row * 32 + col]
                assert x[i, channel, row, col] == torch.tensor(value / 255, dtype=torch.float32)
    assert torch.equal(flat, torch.tensor(data, dtype=torch.float32) / 255)
    x_test, y_test = load_cifar("cifar10", "test", data_dir=root, verify_md5=False)
    assert x_test.shape == (6, 3072) and y_test.tolist() == batches["test_batch"]["labels"]


def test_red_image_lands_in_channel_zero(tmp_path):
    pixels = np.zeros((1, 3072), np.uint8)
    pixels[0, :1024] = 255
    for name in CIFAR10_TRAIN:
        write_py2_pickle(tmp_path / "cifar-10-batches-py" / name, {"data": pixels, "labels": [3]})
    flat, y = load_cifar("cifar10", "train", data_dir=tmp_path, verify_md5=False)
    x = as_images(flat, "cifar10")
    assert bool((x[:, 0] == 1).all()) and bool((x[:, 1:] == 0).all())
    assert y.tolist() == [3] * 5


def test_cifar100_uses_the_fine_labels(cifar100):
    root, batches = cifar100
    x, y = load_cifar("cifar100", "train", data_dir=root, verify_md5=False)
    assert x.shape == (7, 3072)
    assert y.tolist() == batches["train"]["fine_labels"]
    expected = torch.tensor(batches["train"]["data"], dtype=torch.float32)
    assert torch.equal(x, expected / 255)
    x_test, y_test = load_dataset("cifar100", "test", data_dir=root, verify_md5=False)
    assert x_test.shape == (3, DATASETS["cifar100"].n_features)
    assert y_test.tolist() == batches["test"]["fine_labels"]


def test_python3_pickles_with_bytes_keys_load_too(tmp_path):
    rng = np.random.default_rng(2)
    data = rng.integers(0, 256, (2, 3072), dtype=np.uint8)
    path = tmp_path / "cifar-100-python" / "test"
    path.parent.mkdir()
    path.write_bytes(pickle.dumps({b"data": data, b"fine_labels": [99, 0]}, protocol=2))
    x, y = load_cifar("cifar100", "test", data_dir=tmp_path, verify_md5=False)
    assert torch.equal(x, torch.tensor(data, dtype=torch.float32) / 255)
    assert y.tolist() == [99, 0]


def test_cifar_md5_is_checked_by_default(cifar10):
    root, _ = cifar10
    with pytest.raises(DataError) as info:
        load_cifar("cifar10", "train", data_dir=root)
    assert info.value.field == str(root / "cifar-10-batches-py" / "data_batch_1")
    assert "c99cafc152244af753f735de768cd75f" in str(info.value)


def test_missing_batch_tells_how_to_get_the_archive(cifar10):
    root, _ = cifar10
    missing = root / "cifar-10-batches-py" / "data_batch_3"
    missing.unlink()
    for verify_md5 in (False, True):
        with pytest.raises(DataError) as info:
            load_cifar("cifar10", "train", data_dir=root, verify_md5=verify_md5)
        if verify_md5:
            assert info.value.field == str(root / "cifar-10-batches-py" / "data_batch_1")
        else:
            assert info.value.field == str(missing)
        assert "cifar-10-python.tar.gz" in str(info.value)
        assert "ortho data download cifar10" in str(info.value)


def _bad_batches() -> list[tuple[object, str]]:
    good = np.zeros((2, 3072), np.uint8)
    return [
        ({"labels": [0, 1]}, "keys 'data' and 'labels'"),
        ({"data": good}, "keys 'data' and 'labels'"),
        ({"data": np.zeros((2, 3000), np.uint8), "labels": [0, 1]}, "(n, 3072)"),
        ({"data": good.astype(np.float32), "labels": [0, 1]}, "uint8"),
        ({"data": good, "labels": [0, 1, 2]}, "2 integers, one per image"),
        ({"data": good, "labels": [0, 10]}, "in 0..9"),
        ({"data": good, "labels": [0, -1]}, "in 0..9"),
        ([good, [0, 1]], "a pickled dict"),
    ]


@pytest.mark.parametrize(("entry", "expected"), _bad_batches())
def test_malformed_batches_are_refused(tmp_path, entry, expected):
    path = tmp_path / "cifar-10-batches-py" / "test_batch"
    write_py2_pickle(path, entry)
    with pytest.raises(DataError) as info:
        load_cifar("cifar10", "test", data_dir=tmp_path, verify_md5=False)
    assert info.value.field == str(path) and expected in str(info.value)


def test_garbage_and_foreign_pickles_are_refused(tmp_path):
    path = tmp_path / "cifar-10-batches-py" / "test_batch"
    path.parent.mkdir()
    path.write_bytes(b"\x00 this is no pickle")
    with pytest.raises(DataError, match="CIFAR python pickle batch"):
        load_cifar("cifar10", "test", data_dir=tmp_path, verify_md5=False)
    path.write_bytes(pickle.dumps(collections.OrderedDict(data=1), protocol=2))
    with pytest.raises(DataError, match=r"collections\.OrderedDict is not allowed"):
        load_cifar("cifar10", "test", data_dir=tmp_path, verify_md5=False)


def write_svhn(path: Path, images: np.ndarray, labels: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    scipy.io.savemat(path, {"X": images, "y": labels})


@pytest.fixture
def svhn(tmp_path: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, (32, 32, 3, 9), dtype=np.uint8)
    labels = np.array([[10], [1], [2], [3], [4], [5], [10], [9], [7]], dtype=np.uint8)
    write_svhn(tmp_path / "svhn" / "test_32x32.mat", images, labels)
    return tmp_path, images, labels


def test_svhn_reproduces_pixels_layout_and_maps_label_10_to_0(svhn):
    root, images, labels = svhn
    flat, y = load_svhn("test", data_dir=root, verify_md5=False)
    assert flat.shape == (9, 3072) and flat.dtype == torch.float32
    x = as_images(flat, "svhn")
    assert y.dtype == torch.int64 and y.tolist() == [0, 1, 2, 3, 4, 5, 0, 9, 7]
    assert y.tolist() == [int(label) % 10 for label in labels[:, 0]]
    for i in range(9):
        for channel in range(3):
            plane = torch.tensor(images[:, :, channel, i], dtype=torch.float32) / 255
            assert torch.equal(x[i, channel], plane)
    via_dataset, _ = load_dataset("svhn", "test", data_dir=root, verify_md5=False)
    assert torch.equal(via_dataset, flat)
    assert flat[4, 2 * 1024 + 7 * 32 + 30] == torch.tensor(images[7, 30, 2, 4] / 255,
                                                           dtype=torch.float32)


def test_svhn_md5_is_checked_by_default(svhn):
    root, _, _ = svhn
    with pytest.raises(DataError) as info:
        load_svhn("test", data_dir=root)
    assert info.value.field == str(root / "svhn" / "test_32x32.mat")
    assert "eb5a983be6a315427106f1b164d9cef3" in str(info.value)


def test_missing_svhn_file_tells_how_to_get_it(tmp_path):
    for verify_md5 in (False, True):
        with pytest.raises(DataError) as info:
            load_svhn("train", data_dir=tmp_path, verify_md5=verify_md5)
        assert info.value.field == str(tmp_path / "svhn" / "train_32x32.mat")
        assert "http://ufldl.stanford.edu/housenumbers/train_32x32.mat" in str(info.value)


def _bad_mats() -> list[tuple[dict, str]]:
    images = np.zeros((32, 32, 3, 2), np.uint8)
    labels = np.array([[1], [10]], np.uint8)
    return [
        ({"X": images}, "variables X and y"),
        ({"X": np.zeros((32, 32, 1, 2), np.uint8), "y": labels}, "(32, 32, 3, N)"),
        ({"X": images.astype(np.float64), "y": labels}, "uint8"),
        ({"X": images, "y": np.array([[1], [2], [3]], np.uint8)}, "shape (2, 1)"),
        ({"X": images, "y": labels.astype(np.float64)}, "integers"),
        ({"X": images, "y": np.array([[0], [1]], np.uint8)}, "1..10"),
        ({"X": images, "y": np.array([[11], [1]], np.uint8)}, "1..10"),
    ]


@pytest.mark.parametrize(("variables", "expected"), _bad_mats())
def test_malformed_mat_files_are_refused(tmp_path, variables, expected):
    path = tmp_path / "svhn" / "train_32x32.mat"
    path.parent.mkdir()
    scipy.io.savemat(path, variables)
    with pytest.raises(DataError) as info:
        load_svhn("train", data_dir=tmp_path, verify_md5=False)
    assert info.value.field == str(path) and expected in str(info.value)


def test_garbage_mat_file_is_refused(tmp_path):
    path = tmp_path / "svhn" / "train_32x32.mat"
    path.parent.mkdir()
    path.write_bytes(b"MATLAB? no.")
    with pytest.raises(DataError, match="MATLAB v5"):
        load_svhn("train", data_dir=tmp_path, verify_md5=False)


def test_unknown_names_and_splits_name_the_field(tmp_path):
    for call in (lambda: load_dataset("imagenet", "train"), lambda: dataset_info("imagenet"),
                 lambda: load_cifar("cifar20", "train", data_dir=tmp_path)):
        with pytest.raises(ConfigError) as info:
            call()
        assert info.value.field == "dataset"
    for call in (lambda: load_cifar("cifar10", "valid", data_dir=tmp_path),
                 lambda: load_svhn("extra", data_dir=tmp_path)):
        with pytest.raises(ConfigError) as info:
            call()
        assert info.value.field == "split"


def test_metadata():
    assert {name: (info.n_features, info.n_classes) for name, info in DATASETS.items()} == {
        "mnist": (784, 10), "cifar10": (3072, 10), "cifar100": (3072, 100), "svhn": (3072, 10)}
    assert (DATASETS["svhn"].n_train, DATASETS["svhn"].n_test) == (73_257, 26_032)
