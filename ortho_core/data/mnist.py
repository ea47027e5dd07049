"""MNIST from the original IDX gzip files, for feedforward nets and as pixel sequences.

Reads ``<data_dir>/mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``, checks each
file's size and published md5 (once per process), parses the IDX headers strictly (magic
0x00000803 with dims (N, 28, 28) for images, 0x00000801 with dims (N,) for labels) and
keeps the parsed uint8 arrays in a per-process cache, so a second load only converts to
float.

Preprocessing (``preprocessing``, float32 either way):

- ``"unit"``: ``value / 255``, in [0, 1] (this project's default since its first runs).
- ``"standardise"``: M's (nmanchev/OO-INIT-ANN, ``loadMNIST(rescaling=True)`` in
  ``FF_MNIST.py`` and ``SRNN_MNIST.py``: ``sklearn.preprocessing.scale(X.astype("float64"))``
  on the (N, 784) training and test matrices separately): each pixel (column) minus its
  mean over the split, divided by its population standard deviation (ddof = 0) over the
  split, in float64; a pixel constant over the split (std 0) is only centred, to 0. The
  statistics are those of the whole split as loaded: a caller that subsamples afterwards
  (``train_size``, ``test_size``) keeps the full split's statistics. (M's ``SRNN_MNIST.py``
  can subsample before scaling, but M's runs load the whole splits.)

Layouts: (N, 784) in row-major pixel order; ``sequence=True`` gives (N, 784, 1), one pixel
per time step (M's pixel-by-pixel MNIST, EXPERIMENTS.md M-T2). ``permutation_seed`` applies
one fixed pixel permutation to every image (permuted MNIST): pixel ``j`` of the output is
pixel ``pixel_permutation(seed)[j]`` of the original.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from ortho_core.data import paths
from ortho_core.data.checksums import MNIST, Published, verify
from ortho_core.data.paths import PathLike, how_to_get
from ortho_core.errors import ConfigError, DataError

N_PIXELS = 28 * 28
"""Pixels per image, the length of a pixel sequence."""

Preprocessing = Literal["unit", "standardise"]
"""How pixel values become inputs: ``unit`` (value / 255) or ``standardise`` (M's code)."""

PREPROCESSINGS: tuple[str, ...] = ("unit", "standardise")
"""The values of :data:`Preprocessing`."""

_IMAGES_MAGIC = 0x00000803
_LABELS_MAGIC = 0x00000801

_parsed: dict[tuple[str, int, int], torch.Tensor] = {}


def _parse_idx(path: Path, magic: int, tail_dims: tuple[int, ...]) -> torch.Tensor:
    """Decompress and parse one IDX file of unsigned bytes into a uint8 tensor.

    The header is a big-endian int32 magic (0x0000 08 ndim: unsigned bytes, ndim dims),
    then ndim big-endian uint32 sizes; the payload must hold exactly their product bytes.
    """
    name = path.name
    try:
        raw = bytearray(gzip.decompress(path.read_bytes()))
    except (OSError, EOFError, zlib.error) as error:
        raise DataError(str(path), f"a gzip-compressed IDX file ({name})", str(error)) from None
    ndim = 1 + len(tail_dims)
    header_len = 4 + 4 * ndim
    if len(raw) < header_len:
        raise DataError(str(path), f"an IDX header of {header_len} bytes", f"{len(raw)} bytes")
    (found,) = struct.unpack_from(">I", raw, 0)
    if found != magic:
        raise DataError(str(path), f"IDX magic 0x{magic:08x}", f"0x{found:08x}")
    dims = struct.unpack_from(f">{ndim}I", raw, 4)
    if dims[1:] != tail_dims:
        raise DataError(str(path), f"IDX dims (N, {', '.join(map(str, tail_dims))})", dims)
    payload = len(raw) - header_len
    if payload != int(np.prod(dims)):
        raise DataError(str(path), f"{int(np.prod(dims)):,} payload bytes for dims {dims}",
                        f"{payload:,} bytes")
    array = np.frombuffer(raw, dtype=np.uint8, offset=header_len).reshape(dims)
    return torch.from_numpy(array)


def _load_idx(path: Path, published: Published, tail_dims: tuple[int, ...], magic: int,
              root: Path, check_md5: bool) -> torch.Tensor:
    """The parsed file from the process cache, parsing (and checking) it on first use."""
    if check_md5:
        verify(path, published, how_to_get("mnist", published, root))
    elif not path.is_file():
        raise DataError(str(path), f"the MNIST file {path.name}; "
                        + how_to_get("mnist", published, root), "no such file")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _parsed:
        _parsed[key] = _parse_idx(path, magic, tail_dims)
    return _parsed[key]


def pixel_permutation(seed: int) -> torch.Tensor:
    """The fixed pixel permutation of permuted MNIST for ``seed``: int64, shape (784,).

    ``torch.randperm`` on a CPU generator seeded with ``seed``, so every process and
    every member of a pack sees the same permutation for the same seed.
    """
    generator = torch.Generator().manual_seed(seed)
    return torch.randperm(N_PIXELS, generator=generator)


def standardise(pixels: torch.Tensor) -> torch.Tensor:
    """M's per-pixel standardisation of an (N, D) matrix, as float32 (module docstring).

    ``sklearn.preprocessing.scale`` in float64: every column minus its mean, divided by its
    population standard deviation, or by 1 where that is 0.
    """
    x = pixels.to(torch.float64)
    mean = x.mean(dim=0)
    std = x.std(dim=0, correction=0)
    return x.sub_(mean).div_(torch.where(std > 0, std, 1.0)).to(torch.float32)


def load_mnist(split: str, *, sequence: bool = False, permutation_seed: int | None = None,
               preprocessing: Preprocessing = "unit", data_dir: PathLike | None = None,
               verify_md5: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """MNIST ``split`` (``"train"``: 60,000 images, ``"test"``: 10,000) as tensors.

    Returns ``(images, labels)``: float32 images of shape (N, 784), or (N, 784, 1) with
    ``sequence``, and int64 labels 0..9 of shape (N,). Both are fresh tensors the caller may
    modify. ``preprocessing`` is ``"unit"`` (values in [0, 1]) or ``"standardise"`` (M's:
    zero mean and unit variance per pixel over this split); the permutation of
    ``permutation_seed`` is applied after it (per-pixel statistics move with their pixel, so
    the order does not change the result). ``verify_md5=False`` skips the md5 check (for IDX
    files that are not the published ones); the IDX structure is always checked. A missing
    or corrupt file raises :class:`~ortho_core.errors.DataError` naming the file and its
    expected md5; a bad argument raises :class:`~ortho_core.errors.ConfigError` naming it.
    """
    if split not in ("train", "test"):
        raise ConfigError("split", "train or test", split)
    if preprocessing not in PREPROCESSINGS:
        raise ConfigError("preprocessing", "one of " + ", ".join(PREPROCESSINGS),
                          preprocessing)
    root = paths.data_dir(data_dir)
    image_file, label_file = MNIST[f"{split}-images"], MNIST[f"{split}-labels"]
    images = _load_idx(root / image_file.relpath, image_file, (28, 28), _IMAGES_MAGIC, root,
                       verify_md5)
    labels = _load_idx(root / label_file.relpath, label_file, (), _LABELS_MAGIC, root,
                       verify_md5)
    if len(images) != len(labels):
        raise DataError(str(root / label_file.relpath),
                        f"as many labels as images in {image_file.relpath} ({len(images):,})",
                        f"{len(labels):,}")
    if len(labels) and int(labels.max()) > 9:
        raise DataError(str(root / label_file.relpath), "labels 0..9", int(labels.max()))
    pixels = images.reshape(len(images), N_PIXELS)
    if preprocessing == "standardise":
        x = standardise(pixels)
    else:
        x = pixels.to(torch.float32).div_(255.0)
    if permutation_seed is not None:
        x = x[:, pixel_permutation(permutation_seed)]
    if sequence:
        x = x.unsqueeze(-1)
    return x, labels.to(torch.int64)
