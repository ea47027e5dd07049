"""Where the datasets live: ``$ORTHO_DATA_DIR``, else ``~/.cache/ortho-sweeps/data``, and
how a user gets them there.

Every loader takes an optional ``data_dir`` argument that wins over both (DESIGN.md,
"The embedded default"); the tests point the variable at ``../shared/data``. The files are
fetched by the ``ortho data download NAME`` command (``sweeps.data_command``), which is
infrastructure, not science: the loaders only name it in their errors.
"""

from __future__ import annotations

import os
from pathlib import Path

from ortho_core.data.checksums import Published
from ortho_core.errors import DataError

ENV_VAR = "ORTHO_DATA_DIR"
"""The environment variable that names the data directory."""

DEFAULT_DIR = Path("~/.cache/ortho-sweeps/data")
"""The data directory when neither an argument nor ``$ORTHO_DATA_DIR`` names one."""

PathLike = str | os.PathLike[str]


def data_dir(path: PathLike | None = None, *, must_exist: bool = True) -> Path:
    """The data directory: ``path`` if given, else ``$ORTHO_DATA_DIR``, else the default.

    With ``must_exist`` (the loaders' case) a missing directory raises
    :class:`~ortho_core.errors.DataError` naming the directory and the variable; the
    download command passes ``must_exist=False`` because it creates the directory.
    """
    if path is not None:
        source = "chosen by the data_dir argument"
        chosen = Path(path)
    elif os.environ.get(ENV_VAR):
        source = f"named by ${ENV_VAR}"
        chosen = Path(os.environ[ENV_VAR])
    else:
        source = f"the default, as ${ENV_VAR} is not set"
        chosen = DEFAULT_DIR
    chosen = chosen.expanduser()
    if must_exist and not chosen.is_dir():
        raise DataError(
            str(chosen),
            f"an existing directory holding the datasets ({source}); set {ENV_VAR} "
            f"to the directory that holds mnist/, cifar-10-batches-py/, ..., or create this "
            f"one with `ortho data download NAME --data-dir {chosen}`",
        )
    return chosen


def how_to_get(dataset: str, published: Published, root: Path) -> str:
    """Words telling a user how to obtain ``published`` (used in the loaders' errors)."""
    command = f"`ortho data download {dataset} --data-dir {root}`"
    archive = published.archive
    if archive is not None:  # it holds the folder the loader reads, e.g. cifar-10-batches-py
        made = root / Path(published.relpath).parts[0]
        return (f"download {archive.urls[0]} (md5 {archive.md5}) and extract it into {root}, "
                f"making {made}, or run {command} (downloads, checks and extracts it)")
    folder = (root / published.relpath).parent
    return f"download {published.urls[0]} into {folder}, or run {command}"
