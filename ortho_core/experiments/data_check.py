"""The dataset files a pack of configurations reads, and their check before any work starts.

An experiment that reads files defines ``data_files(config) -> tuple[DataFile, ...]`` (the
registry's contract, :mod:`ortho_core.experiments`); :func:`check_data` checks every file
the given configurations need, each once, as the loaders would: the data directory (the
config's ``data_dir``, else ``$ORTHO_DATA_DIR``, else the default) must exist and each file
must have its published size and md5 (:func:`ortho_core.data.checksums.verify`). So a sweep
refuses a missing or corrupt dataset before it starts anything, instead of every trial
failing on it. A check hashes each file (MNIST: about 0.1 s; CIFAR and SVHN: a second or
two), once per process.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ortho_core.data import paths
from ortho_core.data.checksums import CIFAR10, CIFAR100, MNIST, SVHN, Published, verify
from ortho_core.data.music import MUSIC, music_dataset
from ortho_core.data.music import how_to_get as music_how_to_get

__all__ = ["DataFile", "check_data", "image_files", "music_files"]


@dataclass(frozen=True)
class DataFile:
    """One published file a configuration reads."""

    dataset: str
    """The ``dataset`` it belongs to (named in the error's advice)."""
    published: Published
    """The file, relative to the data directory, with its md5."""


_IMAGES: dict[str, tuple[Published, ...]] = {
    "mnist": tuple(MNIST.values()),
    "cifar10": CIFAR10["train"] + CIFAR10["test"],
    "cifar100": CIFAR100["train"] + CIFAR100["test"],
    "svhn": tuple(SVHN.values()),
}


def image_files(dataset: str) -> tuple[DataFile, ...]:
    """The files of image dataset ``dataset`` (both splits), as its loader reads them."""
    return tuple(DataFile(dataset, p) for p in _IMAGES[dataset])


def music_files(dataset: str, data_format: str) -> tuple[DataFile, ...]:
    """The file of music dataset ``dataset`` in ``data_format`` (``pickle`` or ``mat``)."""
    info = music_dataset(dataset)
    return (DataFile(dataset, info.pickle if data_format == "pickle" else info.mat),)


def _how_to_get(file: DataFile, root: Path) -> str:
    """How to get ``file`` into the folder under ``root`` its loader reads: ``ortho data
    download`` where it fetches the dataset, the loader's own words for a music file."""
    published = file.published
    if published.urls or published.archive is not None:
        return paths.how_to_get(file.dataset, published, root)
    if file.dataset in MUSIC:
        return music_how_to_get(published, root)
    return f"the {file.dataset} file, placed in {(root / published.relpath).parent}"


def check_data(module: ModuleType, configs: Iterable[Any]) -> int:
    """Check every file ``configs`` of experiment ``module`` read; the number of files.

    Raises :class:`~ortho_core.errors.DataError` naming the first missing directory or
    missing, truncated or corrupt file, with its expected md5 and how to get it.
    """
    data_files = getattr(module, "data_files", None)
    if data_files is None:
        return 0
    seen: set[Path] = set()
    roots: dict[Any, Path] = {}
    for config in configs:
        named = getattr(config, "data_dir", None)
        if named not in roots:
            roots[named] = paths.data_dir(named)
        root = roots[named]
        for file in data_files(config):
            path = root / file.published.relpath
            if path not in seen:
                seen.add(path)
                verify(path, file.published, _how_to_get(file, root))
    return len(seen)
