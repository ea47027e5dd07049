"""CIFAR-10 and CIFAR-100 from Krizhevsky's python pickle batches.

Reads the extracted tarballs: ``<data_dir>/cifar-10-batches-py/`` (``data_batch_1`` ..
``data_batch_5`` for train, ``test_batch``) and ``<data_dir>/cifar-100-python/`` (``train``,
``test``). Each batch is a Python 2 pickle (read with ``encoding="latin1"``) of a dict whose
``data`` is an (n, 3072) uint8 array, one image per row, channel-major: 1024 red, then 1024
green, then 1024 blue values, each 32 x 32 in row-major order; the labels are ``labels``
(CIFAR-10, 0..9) or ``fine_labels`` (CIFAR-100, 0..99). Keys are accepted as ``str`` or
``bytes``.

Each batch is checked against the md5 torchvision publishes for it (``checksums.py``) unless
``verify_md5=False``, and always for its keys, shapes, dtype and label range. Unpickling
admits only numpy arrays and builtins, so a foreign pickle cannot run code.
"""

from __future__ import annotations

import codecs
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ortho_core.data import paths
from ortho_core.data.checksums import CIFAR10, CIFAR100, Published, verify
from ortho_core.data.paths import PathLike, how_to_get
from ortho_core.errors import ConfigError, DataError

_FILES = {"cifar10": CIFAR10, "cifar100": CIFAR100}
_LABEL_KEY = {"cifar10": "labels", "cifar100": "fine_labels"}
_N_CLASSES = {"cifar10": 10, "cifar100": 100}
_ROW = 3 * 32 * 32

_RECONSTRUCT = np.ndarray((0,), np.uint8).__reduce__()[0]
_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): codecs.encode,
}


class _ArrayUnpickler(pickle.Unpickler):
    """An unpickler that builds numpy arrays and builtins and refuses every other global."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed") from None


def _read_batch(path: Path, label_key: str, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """One checked batch: (n, 3072) uint8 pixels and (n,) int64 labels."""
    try:
        with path.open("rb") as stream:
            entry = _ArrayUnpickler(stream, encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError,
            AttributeError) as error:
        raise DataError(str(path), "a CIFAR python pickle batch", str(error)) from None
    if not isinstance(entry, dict):
        raise DataError(str(path), "a pickled dict", type(entry).__name__)
    entry = {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in entry.items()}
    for key in ("data", label_key):
        if key not in entry:
            raise DataError(str(path), f"a batch with keys 'data' and {label_key!r}",
                            sorted(entry))
    data = entry["data"]
    if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 2
            and data.shape[1] == _ROW):
        shape = getattr(data, "shape", None)
        raise DataError(str(path), f"'data' as a uint8 array of shape (n, {_ROW})",
                        f"{type(data).__name__} {getattr(data, 'dtype', '')} {shape}")
    try:
        labels = np.asarray(entry[label_key])
    except (TypeError, ValueError) as error:
        raise DataError(str(path), f"{label_key!r} as a list of integers", str(error)) from None
    if labels.shape != (len(data),) or not np.issubdtype(labels.dtype, np.integer):
        raise DataError(str(path), f"{label_key!r}: {len(data)} integers, one per image",
                        f"{labels.dtype} {labels.shape}")
    if len(labels) and (labels.min() < 0 or labels.max() >= n_classes):
        raise DataError(str(path), f"{label_key!r} in 0..{n_classes - 1}",
                        f"{labels.min()}..{labels.max()}")
    return data, labels.astype(np.int64)


def _check_present(path: Path, published: Published, dataset: str, root: Path,
                   verify_md5: bool) -> None:
    hint = how_to_get(dataset, published, root)
    if verify_md5:
        verify(path, published, hint)
    elif not path.is_file():
        raise DataError(str(path), f"the {dataset} batch {path.name}; {hint}", "no such file")


def load_cifar(name: str, split: str, *, data_dir: PathLike | None = None,
               verify_md5: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """CIFAR-10 or CIFAR-100 ``split`` (``"train"``: 50,000 images, ``"test"``: 10,000).

    ``name`` is ``"cifar10"`` or ``"cifar100"`` (fine labels). Returns float32 images in
    [0, 1], ``value / 255``, of shape (N, 3072) in the files' channel-major order; and int64
    labels of shape (N,). Batches are concatenated in file order. ``verify_md5=False`` skips
    the md5 check for files in the same format that are not the published ones (the
    structure is always checked).
    """
    if name not in _FILES:
        raise ConfigError("dataset", "cifar10 or cifar100", name)
    if split not in ("train", "test"):
        raise ConfigError("split", "train or test", split)
    root = paths.data_dir(data_dir)
    pixels, labels = [], []
    for published in _FILES[name][split]:
        path = root / published.relpath
        _check_present(path, published, name, root, verify_md5)
        data, batch_labels = _read_batch(path, _LABEL_KEY[name], _N_CLASSES[name])
        pixels.append(data)
        labels.append(batch_labels)
    x = torch.from_numpy(np.concatenate(pixels)).to(torch.float32).div_(255.0)
    return x, torch.from_numpy(np.concatenate(labels))
