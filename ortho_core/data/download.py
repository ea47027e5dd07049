"""Fetch a dataset's published files for users with a network, checking their md5s.

Opt-in only: no loader calls this module implicitly, and the tests never do. Usage::

    python -m ortho_core.data.download mnist cifar10 [--data-dir DIR]

Each file is fetched from its official URL (``checksums.DOWNLOADS``) with :mod:`urllib`,
written to ``<name>.part``, checked against its published md5 and only then renamed into
place; a file already present with the right md5 is not fetched again. CIFAR tarballs are
extracted into the data directory after their check, giving the ``cifar-10-batches-py/``
and ``cifar-100-python/`` folders the loaders read.
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import urllib.request
from pathlib import Path
from urllib.error import URLError

from ortho_core.data import paths
from ortho_core.data.checksums import (
    CIFAR10,
    CIFAR10_ARCHIVE,
    CIFAR100,
    CIFAR100_ARCHIVE,
    DOWNLOADS,
    Published,
    md5sum,
    verify,
)
from ortho_core.data.paths import PathLike
from ortho_core.errors import ConfigError, DataError

_MEMBERS = {
    CIFAR10_ARCHIVE: CIFAR10["train"] + CIFAR10["test"],
    CIFAR100_ARCHIVE: CIFAR100["train"] + CIFAR100["test"],
}


def how_to_get(dataset: str, published: Published, root: Path) -> str:
    """Words telling a user how to obtain ``published`` (used in the loaders' errors)."""
    command = f"`python -m ortho_core.data.download {dataset} --data-dir {root}`"
    archive = published.archive
    if archive is not None:
        return (f"download and extract {archive.urls[0]} (md5 {archive.md5}) into {root}, "
                f"or run {command} (downloads, checks and extracts it)")
    folder = (root / published.relpath).parent
    return f"download {published.urls[0]} into {folder}, or run {command}"


def _is_intact(path: Path, published: Published) -> bool:
    return path.is_file() and md5sum(path) == published.md5


def _fetch(published: Published, target: Path) -> None:
    """Download ``published`` to ``target`` via ``target.part``, trying each URL in turn."""
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    failures = []
    for url in published.urls:
        print(f"downloading {url}", file=sys.stderr)
        try:
            with urllib.request.urlopen(url, timeout=60) as response, part.open("wb") as out:
                while block := response.read(1 << 20):
                    out.write(block)
        except (URLError, OSError) as error:
            failures.append(f"{url}: {error}")
            continue
        actual = md5sum(part)
        if actual == published.md5:
            part.replace(target)
            return
        failures.append(f"{url}: md5 {actual}")
    part.unlink(missing_ok=True)
    raise DataError(str(target), f"a download with md5 {published.md5}", "; ".join(failures))


def _extract(archive: Path, root: Path) -> None:
    """Extract a checked tarball into ``root`` (with tarfile's safe ``data`` filter)."""
    print(f"extracting {archive}", file=sys.stderr)
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(root, filter="data")


def download(dataset: str, data_dir: PathLike | None = None) -> Path:
    """Fetch and check ``dataset``'s published files into the data directory; return it.

    ``dataset`` is ``mnist``, ``cifar10``, ``cifar100`` or ``svhn``; ``data_dir`` defaults
    as in :func:`ortho_core.data.paths.data_dir` and is created if missing.
    """
    if dataset not in DOWNLOADS:
        raise ConfigError("dataset", "one of " + ", ".join(DOWNLOADS), dataset)
    root = paths.data_dir(data_dir, must_exist=False)
    for published in DOWNLOADS[dataset]:
        target = root / published.relpath
        if not _is_intact(target, published):
            _fetch(published, target)
        members = _MEMBERS.get(published, ())
        if members and not all(_is_intact(root / m.relpath, m) for m in members):
            _extract(target, root)
        for member in members:
            verify(root / member.relpath, member, f"re-extract {target}")
    return root


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: download the named datasets."""
    parser = argparse.ArgumentParser(prog="python -m ortho_core.data.download",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="+", choices=sorted(DOWNLOADS))
    parser.add_argument("--data-dir", default=None,
                        help="target directory (default: $ORTHO_DATA_DIR, else "
                             "~/.cache/ortho-sweeps/data)")
    args = parser.parse_args(argv)
    try:
        for name in args.datasets:
            print(f"{name}: ready in {download(name, args.data_dir)}", file=sys.stderr)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
