"""SVHN (cropped digits, "format 2") from ``train_32x32.mat`` and ``test_32x32.mat``.

Reads ``<data_dir>/svhn/{train,test}_32x32.mat`` (MATLAB v5 files, read with
``scipy.io.loadmat``; scipy is imported here only, as torchvision does, because nothing
else in ``ortho_core`` needs it). ``X`` is (32, 32, 3, N) uint8 indexed (row, column,
channel, image); ``y`` is (N, 1) with labels 1..10, where 10 is the digit 0 and is mapped
to 0 (torchvision's convention). Each file is checked against its published md5 unless
``verify_md5=False``, and always for its variables, shapes, dtypes and label range.
"""

from __future__ import annotations

import numpy as np
import torch

from ortho_core.data import paths
from ortho_core.data.checksums import SVHN, verify
from ortho_core.data.paths import PathLike, how_to_get
from ortho_core.errors import ConfigError, DataError


def load_svhn(split: str, *, data_dir: PathLike | None = None,
              verify_md5: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """SVHN ``split`` (``"train"``: 73,257 digits, ``"test"``: 26,032) as tensors.

    Returns float32 images in [0, 1], ``value / 255``, of shape (N, 3072) channel-major (all
    red, then green, then blue, each row-major: the CIFAR layout), and int64 labels 0..9 of
    shape (N,). ``verify_md5=False`` skips the md5 check for files in the same format that
    are not the published ones.
    """
    import scipy.io
    from scipy.io.matlab import MatReadError

    if split not in ("train", "test"):
        raise ConfigError("split", "train or test", split)
    root = paths.data_dir(data_dir)
    published = SVHN[split]
    path = root / published.relpath
    hint = how_to_get("svhn", published, root)
    if verify_md5:
        verify(path, published, hint)
    elif not path.is_file():
        raise DataError(str(path), f"the SVHN file {path.name}; {hint}", "no such file")
    try:
        mat = scipy.io.loadmat(path, variable_names=("X", "y"))
    except (MatReadError, ValueError, TypeError, OSError, NotImplementedError) as error:
        raise DataError(str(path), "a MATLAB v5 .mat file with variables X and y",
                        str(error)) from None
    for key in ("X", "y"):
        if key not in mat:
            raise DataError(str(path), "variables X and y",
                            sorted(k for k in mat if not k.startswith("__")))
    images, labels = mat["X"], mat["y"]
    if not (images.dtype == np.uint8 and images.ndim == 4 and images.shape[:3] == (32, 32, 3)):
        raise DataError(str(path), "X as uint8 of shape (32, 32, 3, N)",
                        f"{images.dtype} {images.shape}")
    n = images.shape[3]
    if labels.shape != (n, 1) or not np.issubdtype(labels.dtype, np.integer):
        raise DataError(str(path), f"y as integers of shape ({n}, 1)",
                        f"{labels.dtype} {labels.shape}")
    labels = labels[:, 0].astype(np.int64)
    if n and (labels.min() < 1 or labels.max() > 10):
        raise DataError(str(path), "y in 1..10 (10 is the digit 0)",
                        f"{labels.min()}..{labels.max()}")
    labels[labels == 10] = 0
    pixels = np.ascontiguousarray(images.transpose(3, 2, 0, 1))
    x = torch.from_numpy(pixels).to(torch.float32).div_(255.0).reshape(n, -1)
    return x, torch.from_numpy(labels)
