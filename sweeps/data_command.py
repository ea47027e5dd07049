"""``ortho data download NAME [--data-dir D]``: fetch a dataset's published files, checked by md5.

NAME is ``mnist``, ``cifar10``, ``cifar100`` or ``svhn``; D defaults to the directory the
loaders read (``$ORTHO_DATA_DIR``, else ``~/.cache/ortho-sweeps/data``, as
:func:`ortho_core.data.paths.data_dir` resolves it) and is created if missing. Opt-in only:
no loader downloads anything, and the tests never reach the network.

Each file is fetched with ``pooch.retrieve`` from its official URLs in turn
(:data:`ortho_core.data.checksums.DOWNLOADS`) and checked against its published md5 before it
is moved into place; a file already present with the right md5 is not fetched again, one with
a wrong md5 is fetched anew. The layout is the loaders': ``mnist/*.gz`` and ``svhn/*.mat``
under D, and the CIFAR tarballs in D, extracted there (tarfile's ``data`` filter, which
refuses links and paths that leave D) into ``cifar-10-batches-py/`` and
``cifar-100-python/``, whose files are checked against their own md5s. A file that a URL
delivers with a wrong md5 (and none intact) raises :class:`~ortho_core.errors.DataError`
(exit status 2) naming it; one that no URL answers with (no network, servers down) raises
:class:`DownloadError` (exit status 1), saying why for each URL.
"""

from __future__ import annotations

import argparse
import sys
import tarfile
from pathlib import Path

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
from ortho_core.errors import ConfigError, DataError, OrthoError
from sweeps.contract import given

EXTRACTED: dict[Published, tuple[Published, ...]] = {
    CIFAR10_ARCHIVE: CIFAR10["train"] + CIFAR10["test"],
    CIFAR100_ARCHIVE: CIFAR100["train"] + CIFAR100["test"],
}
"""The checked files each tarball holds, extracted into the data directory."""


DOWNLOAD_HELP = """\
Download one dataset's published files into the data folder, check each against its
published md5 sum, and unpack the CIFAR archives. Files already there and intact are not
fetched again; a damaged one is fetched anew. The experiments read the same folder as
--data-dir's default.

Exit status: 0 when the dataset is ready; 1 when no source answers (no network, servers
down: try again later); 2 when a source delivers a file whose md5 is wrong."""
"""What ``ortho data download --help`` says (user text)."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ortho data download NAME [--data-dir D]`` to the ``ortho`` sub-commands."""
    data = sub.add_parser("data", help="fetch the datasets",
                          description="Fetch the datasets the experiments read (MNIST, "
                          "CIFAR-10, CIFAR-100, SVHN). Nothing is ever downloaded unless you "
                          "ask for it here.", epilog="Example:\n  ortho data download mnist",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = data.add_subparsers(dest="data_action", required=True, metavar="ACTION")
    fetch = actions.add_parser("download", help="download and check one dataset",
                               description=DOWNLOAD_HELP,
                               epilog="Example:\n  ortho data download mnist --data-dir ~/data",
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    fetch.add_argument("name", metavar="NAME",
                       help="the dataset: " + ", ".join(DOWNLOADS))
    fetch.add_argument("--data-dir", type=given, dest="dir", metavar="D", default=None,
                       help="target directory (default: $ORTHO_DATA_DIR, else "
                            "~/.cache/ortho-sweeps/data)")
    fetch.set_defaults(func=_run_download)


def _run_download(args: argparse.Namespace) -> int:
    """The ``download`` action: fetch ``args.name`` into ``args.dir``."""
    root = download(args.name, args.dir)
    print(f"{args.name}: ready in {root}", file=sys.stderr)
    return 0


def download(name: str, data_dir: str | Path | None = None) -> Path:
    """Fetch and check dataset ``name``'s published files into the data directory; return it.

    ``ConfigError`` naming ``dataset`` for an unknown name; ``DataError`` naming the file
    when no URL gives it with its published md5, or an extracted file fails its check.
    """
    if name not in DOWNLOADS:
        raise ConfigError("dataset", "one of " + ", ".join(DOWNLOADS), name)
    root = paths.data_dir(data_dir, must_exist=False)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # a file on the way, or no permission: before any download
        raise ConfigError("data_dir", "a folder, or a path where one can be made "
                          f"({(err.strerror or str(err)).lower()})", str(root)) from None
    for published in DOWNLOADS[name]:
        target = root / published.relpath
        _fetch(published, target)
        members = EXTRACTED.get(published, ())
        if members and not all(_is_intact(root / m.relpath, m) for m in members):
            _extract(target, root)
        for member in members:
            verify(root / member.relpath, member, f"remove it and run `ortho data download {name}`")
    return root


def _fetch(published: Published, target: Path) -> None:
    """Bring ``published`` to ``target`` with pooch, trying each URL in turn."""
    import pooch

    if _is_intact(target, published):
        return
    if target.is_file():
        print(f"{target}: md5 {md5sum(target)}, not the published {published.md5}: fetching "
              "it anew", file=sys.stderr)
    pooch.get_logger().setLevel("WARNING")  # its "Downloading data from URL": said below
    failures: list[str] = []
    unreachable = True
    for url in published.urls:
        try:
            print(f"fetching {url}", file=sys.stderr)
            pooch.retrieve(url, known_hash=f"md5:{published.md5}", fname=target.name,
                           path=target.parent, progressbar=sys.stderr.isatty())
            return
        except OSError as error:  # requests' errors: no answer, or an HTTP error status
            failures.append(f"{url}: {_why(error)}")
        except ValueError as error:  # pooch: a wrong checksum
            unreachable = False
            failures.append(f"{url}: {error}")
    if unreachable:
        raise DownloadError(f"could not download {target}: " + "; ".join(failures)
                            + "; try again once they answer, or place the file there by hand")
    raise DataError(str(target), f"a download with md5 {published.md5}", "; ".join(failures))


class DownloadError(OrthoError):
    """No URL of a file answered with it (no network, servers down): a failure to retry, not
    bad input (exit status 1)."""


def _why(error: OSError) -> str:
    """Why a URL gave nothing, in a few words where requests' message is a paragraph."""
    text = str(error)
    for needle, why in (("NameResolution", "its host does not resolve (no network?)"),
                        ("Connection refused", "connection refused"),
                        ("timed out", "no answer (timed out)")):
        if needle in text:
            return why
    return text


def _is_intact(path: Path, published: Published) -> bool:
    """Whether ``path`` exists with ``published``'s md5."""
    return path.is_file() and md5sum(path) == published.md5


def _extract(archive: Path, root: Path) -> None:
    """Extract a checked tarball into ``root`` with tarfile's safe ``data`` filter."""
    print(f"extracting {archive}", file=sys.stderr)
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(root, filter="data")
