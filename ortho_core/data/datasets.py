"""One entry point for the image datasets, with the metadata a model needs to size itself.

``load_dataset("mnist" | "cifar10" | "cifar100" | "svhn", split)`` dispatches to the
loader of that dataset (``mnist.py``, ``cifar.py``, ``svhn.py``); :data:`DATASETS` gives
each one's input size, class count and split sizes without touching the files. Pixels are
``value / 255`` in [0, 1] (``preprocessing="unit"``); MNIST also offers M's per-pixel
standardisation (``"standardise"``, :mod:`ortho_core.data.mnist`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ortho_core.data.cifar import load_cifar
from ortho_core.data.mnist import Preprocessing, load_mnist
from ortho_core.data.paths import PathLike
from ortho_core.data.svhn import load_svhn
from ortho_core.errors import ConfigError


@dataclass(frozen=True)
class DatasetInfo:
    """What is known about a dataset before loading it."""

    name: str
    """The DESIGN.md ``dataset`` value."""
    image_shape: tuple[int, int, int]
    """(channels, height, width) of one image, which a loaded split holds flattened,
    channel-major, in :attr:`n_features` columns."""
    n_classes: int
    """Number of classes; labels are 0..n_classes-1."""
    n_train: int
    """Images in the published training split."""
    n_test: int
    """Images in the published test split."""

    @property
    def n_features(self) -> int:
        """Length of a flattened image (the input width of an MLP)."""
        channels, height, width = self.image_shape
        return channels * height * width


DATASETS = {
    "mnist": DatasetInfo("mnist", (1, 28, 28), 10, 60_000, 10_000),
    "cifar10": DatasetInfo("cifar10", (3, 32, 32), 10, 50_000, 10_000),
    "cifar100": DatasetInfo("cifar100", (3, 32, 32), 100, 50_000, 10_000),
    "svhn": DatasetInfo("svhn", (3, 32, 32), 10, 73_257, 26_032),
}
"""The image datasets by name."""


def dataset_info(name: str) -> DatasetInfo:
    """The metadata of ``name``; an unknown name raises ``ConfigError("dataset", ...)``."""
    if name not in DATASETS:
        raise ConfigError("dataset", "one of " + ", ".join(DATASETS), name)
    return DATASETS[name]


def load_dataset(name: str, split: str, *, preprocessing: Preprocessing = "unit",
                 data_dir: PathLike | None = None,
                 verify_md5: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, y)`` of dataset ``name``'s ``split`` (``"train"`` or ``"test"``).

    ``x`` is float32 of shape (N, n_features), each image flattened channel-major: in [0, 1]
    with ``preprocessing="unit"``, standardised per pixel over the split with
    ``"standardise"`` (MNIST only); ``y`` is int64 of shape (N,). ``data_dir`` defaults to
    ``$ORTHO_DATA_DIR``, then ``~/.cache/ortho-sweeps/data``. Errors: ``ConfigError`` for
    an unknown name, split or preprocessing, or ``standardise`` for a dataset other than
    MNIST; ``DataError`` for a missing directory or a missing, corrupt or malformed file
    (naming the file and its expected md5).
    """
    dataset_info(name)
    if name == "mnist":
        return load_mnist(split, preprocessing=preprocessing, data_dir=data_dir,
                          verify_md5=verify_md5)
    if preprocessing != "unit":
        raise ConfigError("preprocessing", f"unit for {name} (standardise is implemented "
                          "for mnist only, as M's code uses it)", preprocessing)
    if name == "svhn":
        return load_svhn(split, data_dir=data_dir, verify_md5=verify_md5)
    return load_cifar(name, split, data_dir=data_dir, verify_md5=verify_md5)
