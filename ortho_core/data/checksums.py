"""The published files of each dataset, their md5 checksums, and the check of a file.

Sources of the checksums (all equal to torchvision's lists):

- MNIST: the four IDX gzip files as distributed by LeCun, Cortes and Burges; md5s and sizes
  as in ``shared/data/README.md`` and torchvision ``torchvision/datasets/mnist.py``
  (``MNIST.resources``, pytorch/vision commit 1ec2509e).
- CIFAR-10 / CIFAR-100: Krizhevsky's python tarballs; the tarball md5s and the md5s of the
  extracted pickles are torchvision's ``torchvision/datasets/cifar.py`` (``tgz_md5``,
  ``train_list``, ``test_list``, pytorch/vision commit 5c2bb42d).
- SVHN: Netzer et al.'s cropped-digit .mat files; torchvision
  ``torchvision/datasets/svhn.py`` (``split_list``, pytorch/vision commit 212ff516).

A file is hashed at most once per process (keyed by its resolved path, size and mtime), so
repeated loads cost a ``stat`` only.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ortho_core.errors import DataError


@dataclass(frozen=True)
class Published:
    """A dataset file as its authors publish it."""

    relpath: str
    """Where the file lives, relative to the data directory."""
    md5: str
    """Its published md5 (hex)."""
    size: int | None = None
    """Its size in bytes where published, checked before hashing; ``None`` if not."""
    urls: tuple[str, ...] = ()
    """Where to fetch it, first choice first; empty for a file extracted from ``archive``."""
    archive: Published | None = None
    """The published tarball this file is extracted from, if any."""


_MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)


def _mnist(name: str, md5: str, size: int) -> Published:
    return Published(f"mnist/{name}", md5, size, tuple(m + name for m in _MNIST_MIRRORS))


MNIST = {
    "train-images": _mnist("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873",
                           9_912_422),
    "train-labels": _mnist("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432",
                           28_881),
    "test-images": _mnist("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3",
                          1_648_877),
    "test-labels": _mnist("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c",
                          4_542),
}
"""MNIST's four IDX gzip files under ``<data_dir>/mnist/``."""

CIFAR10_ARCHIVE = Published(
    "cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a",
    urls=("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",),
)
CIFAR100_ARCHIVE = Published(
    "cifar-100-python.tar.gz", "eb9058c3a382ffc7106e4002c42a8d85",
    urls=("https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",),
)


def _member(archive: Published, relpath: str, md5: str) -> Published:
    return Published(relpath, md5, archive=archive)


CIFAR10 = {
    "train": tuple(
        _member(CIFAR10_ARCHIVE, f"cifar-10-batches-py/data_batch_{i}", md5)
        for i, md5 in enumerate(
            ("c99cafc152244af753f735de768cd75f", "d4bba439e000b95fd0a9bffe97cbabec",
             "54ebc095f3ab1f0389bbae665268c751", "634d18415352ddfa80567beed471001a",
             "482c414d41f54cd18b22e5b47cb7c3cb"),
            start=1,
        )
    ),
    "test": (_member(CIFAR10_ARCHIVE, "cifar-10-batches-py/test_batch",
                     "40351d587109b95175f43aff81a1287e"),),
}
"""CIFAR-10's extracted pickle batches per split (five of 10,000 for train, one for test)."""

CIFAR100 = {
    "train": (_member(CIFAR100_ARCHIVE, "cifar-100-python/train",
                      "16019d7e3df5f24257cddd939b257f8d"),),
    "test": (_member(CIFAR100_ARCHIVE, "cifar-100-python/test",
                     "f0ef6b0ae62326f3e7ffdfab6717acfc"),),
}
"""CIFAR-100's extracted pickles per split (50,000 and 10,000 images)."""

SVHN = {
    "train": Published("svhn/train_32x32.mat", "e26dedcc434d2e4c54c9b2d4a06d8373",
                       urls=("http://ufldl.stanford.edu/housenumbers/train_32x32.mat",)),
    "test": Published("svhn/test_32x32.mat", "eb5a983be6a315427106f1b164d9cef3",
                      urls=("http://ufldl.stanford.edu/housenumbers/test_32x32.mat",)),
}
"""SVHN's cropped-digit .mat files (format 2) under ``<data_dir>/svhn/``."""

DOWNLOADS = {
    "mnist": tuple(MNIST.values()),
    "cifar10": (CIFAR10_ARCHIVE,),
    "cifar100": (CIFAR100_ARCHIVE,),
    "svhn": tuple(SVHN.values()),
}
"""What ``ortho data download NAME`` fetches for each dataset; the CIFAR tarballs are
extracted after their check."""

_verified: set[tuple[str, int, int, str]] = set()


def md5sum(path: Path) -> str:
    """The md5 of a file, read in 1 MiB blocks."""
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as stream:
        while block := stream.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def verify(path: Path, published: Published, how_to_get: str) -> None:
    """Check ``path`` against ``published`` (existence, size, md5), once per process.

    Raises :class:`~ortho_core.errors.DataError` whose ``field`` is the path and whose
    ``expected`` names the expected md5 (and size) and ``how_to_get`` the file.
    """
    expected = f"the published {path.name} with md5 {published.md5}"
    if published.size is not None:
        expected += f" ({published.size:,} bytes)"
    expected += f"; {how_to_get}"
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise DataError(str(path), expected, "no such file") from None
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, published.md5)
    if key in _verified:
        return
    if published.size is not None and stat.st_size != published.size:
        raise DataError(str(path), expected, f"{stat.st_size:,} bytes")
    actual = md5sum(path)
    if actual != published.md5:
        raise DataError(str(path), expected, f"md5 {actual}")
    _verified.add(key)
