"""``ortho data download``: files served by a local HTTP server on 127.0.0.1 (no network)
land where the loaders read them, checked by md5; a corrupted file or an unknown name is
exit status 2 naming what is wrong."""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import io
import pickle
import struct
import tarfile
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import torch

from ortho_core.data import checksums
from ortho_core.data.checksums import DOWNLOADS, MNIST
from ortho_core.data.cifar import load_cifar
from ortho_core.data.mnist import load_mnist
from sweeps import cli, data_command
from tests.servers import free_port


class _QuietHandler(SimpleHTTPRequestHandler):
    """Serves files without logging every request to stderr."""

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A folder and the base URL of an HTTP server on 127.0.0.1 serving it."""
    folder = tmp_path / "served"
    folder.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def ortho():
    """``ortho ARGS...`` through the real ``cli.main`` (``data`` is a built-in command)."""
    return lambda *args: cli.main(list(args))


def md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def idx(magic: int, array: np.ndarray) -> bytes:
    """An IDX file of unsigned bytes, gzip-compressed, as LeCun publishes MNIST."""
    header = struct.pack(f">I{array.ndim}I", magic, *array.shape)
    return gzip.compress(header + array.astype(np.uint8).tobytes())


def serve_mnist(folder: Path, base: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """Tiny MNIST files (3 train, 2 test images) served under their published names; the
    published md5s and sizes are replaced by theirs, the paths are the loader's."""
    rng = np.random.default_rng(0)
    contents = {}
    for split, n in (("train", 3), ("test", 2)):
        contents[f"{split}-images"] = idx(0x803, rng.integers(0, 256, (n, 28, 28)))
        contents[f"{split}-labels"] = idx(0x801, rng.integers(0, 10, (n,)))
    for key, data in contents.items():
        name = Path(MNIST[key].relpath).name
        (folder / name).write_bytes(data)
        monkeypatch.setitem(MNIST, key, dataclasses.replace(
            MNIST[key], md5=md5(data), size=len(data), urls=(f"{base}/{name}",)))
    monkeypatch.setitem(DOWNLOADS, "mnist", tuple(MNIST.values()))
    return contents


def test_mnist_lands_where_the_loader_reads_it_with_its_md5(served, ortho, tmp_path,
                                                              monkeypatch, capsys):
    folder, base = served
    contents = serve_mnist(folder, base, monkeypatch)
    root = tmp_path / "data"
    assert ortho("data", "download", "mnist", "--data-dir", str(root)) == 0
    assert f"ready in {root}" in capsys.readouterr().err
    for key, data in contents.items():
        assert (root / MNIST[key].relpath).read_bytes() == data
    x, y = load_mnist("test", data_dir=root)
    pixels = np.frombuffer(gzip.decompress(contents["test-images"])[16:], np.uint8)
    torch.testing.assert_close(x, torch.from_numpy(pixels.reshape(2, 784) / 255.0).float())
    assert y.tolist() == list(gzip.decompress(contents["test-labels"])[8:])


def test_default_directory_is_ortho_data_dir(served, ortho, tmp_path, monkeypatch):
    folder, base = served
    serve_mnist(folder, base, monkeypatch)
    monkeypatch.setenv("ORTHO_DATA_DIR", str(tmp_path / "env"))
    assert ortho("data", "download", "mnist") == 0
    assert load_mnist("train", data_dir=tmp_path / "env")[0].shape == (3, 784)


def test_a_corrupted_download_fails_with_exit_2_and_is_not_kept(served, ortho, tmp_path,
                                                                  monkeypatch, capsys):
    folder, base = served
    contents = serve_mnist(folder, base, monkeypatch)
    name = Path(MNIST["train-labels"].relpath).name
    corrupted = bytearray(contents["train-labels"])
    corrupted[-1] ^= 0xFF
    (folder / name).write_bytes(bytes(corrupted))
    root = tmp_path / "data"
    assert ortho("data", "download", "mnist", "--data-dir", str(root)) == 2
    err = capsys.readouterr().err
    target = root / MNIST["train-labels"].relpath
    assert str(target) in err and MNIST["train-labels"].md5 in err and "hash" in err
    assert not target.exists()


def test_no_answer_is_a_failure_to_retry_saying_why_not_bad_input(ortho, tmp_path,
                                                                   monkeypatch, capsys):
    """Every URL of a file refuses the connection (as without a network): exit 1, one reason
    per URL, nothing kept."""
    closed = [f"http://127.0.0.1:{free_port()}/train-images-idx3-ubyte.gz" for _ in range(2)]
    monkeypatch.setitem(MNIST, "train-images", dataclasses.replace(MNIST["train-images"],
                                                                   urls=tuple(closed)))
    monkeypatch.setitem(DOWNLOADS, "mnist", tuple(MNIST.values()))
    root = tmp_path / "data"
    assert ortho("data", "download", "mnist", "--data-dir", str(root)) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    target = root / MNIST["train-images"].relpath
    assert last == (f"ortho data download: could not download {target}: {closed[0]}: "
                    f"connection refused; {closed[1]}: connection refused; try again once they "
                    "answer, or place the file there by hand")
    assert not target.exists()


def test_a_present_file_with_a_wrong_md5_is_fetched_again(served, ortho, tmp_path,
                                                           monkeypatch, capsys):
    """Saying so first; each URL is named once (pooch's own "Downloading data from" is
    not repeated beside it)."""
    folder, base = served
    contents = serve_mnist(folder, base, monkeypatch)
    target = tmp_path / "data" / MNIST["test-images"].relpath
    target.parent.mkdir(parents=True)
    target.write_bytes(b"not mnist")
    assert ortho("data", "download", "mnist", "--data-dir", str(tmp_path / "data")) == 0
    assert target.read_bytes() == contents["test-images"]
    err = capsys.readouterr().err
    assert (f"{target}: md5 {hashlib.md5(b'not mnist').hexdigest()}, not the published "
            f"{MNIST['test-images'].md5}: fetching it anew") in err
    assert "Downloading data from" not in err and err.count("fetching http") == len(MNIST)


def cifar_tarball(rng: np.random.Generator) -> tuple[bytes, dict[str, bytes]]:
    """A CIFAR-10 python tarball with two images per batch, and its pickles by path."""
    pickles = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rng.integers(0, 256, (2, 3072)).astype(np.uint8),
                 b"labels": rng.integers(0, 10, 2).tolist()}
        pickles[f"cifar-10-batches-py/{name}"] = pickle.dumps(batch)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path, data in pickles.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue(), pickles


def test_cifar_tarball_is_checked_and_extracted_into_the_loaders_folder(served, ortho,
                                                                        tmp_path, monkeypatch):
    folder, base = served
    tarball, pickles = cifar_tarball(np.random.default_rng(1))
    real = checksums.CIFAR10_ARCHIVE
    (folder / real.relpath).write_bytes(tarball)
    archive = dataclasses.replace(real, md5=md5(tarball), urls=(f"{base}/{real.relpath}",))
    members = tuple(dataclasses.replace(m, md5=md5(pickles[m.relpath]), archive=archive)
                    for m in checksums.CIFAR10["train"] + checksums.CIFAR10["test"])
    monkeypatch.setitem(DOWNLOADS, "cifar10", (archive,))
    monkeypatch.setitem(data_command.EXTRACTED, archive, members)
    root = tmp_path / "data"
    assert ortho("data", "download", "cifar10", "--data-dir", str(root)) == 0
    assert (root / real.relpath).read_bytes() == tarball
    x, y = load_cifar("cifar10", "test", data_dir=root, verify_md5=False)
    batch = pickle.loads(pickles["cifar-10-batches-py/test_batch"])
    torch.testing.assert_close(x, torch.from_numpy(batch[b"data"] / 255.0).float())
    assert y.tolist() == batch[b"labels"]
    assert load_cifar("cifar10", "train", data_dir=root, verify_md5=False)[0].shape == (10, 3072)


def test_a_corrupted_tarball_is_neither_kept_nor_extracted(served, ortho, tmp_path,
                                                           monkeypatch, capsys):
    folder, base = served
    tarball, _ = cifar_tarball(np.random.default_rng(2))
    real = checksums.CIFAR10_ARCHIVE
    (folder / real.relpath).write_bytes(tarball)
    archive = dataclasses.replace(real, urls=(f"{base}/{real.relpath}",))
    monkeypatch.setitem(DOWNLOADS, "cifar10", (archive,))
    root = tmp_path / "data"
    assert ortho("data", "download", "cifar10", "--data-dir", str(root)) == 2
    assert real.md5 in capsys.readouterr().err
    assert not (root / real.relpath).exists()
    assert not (root / "cifar-10-batches-py").exists()


def test_an_unknown_name_is_exit_2_naming_the_field(ortho, tmp_path, capsys):
    assert ortho("data", "download", "imagenet", "--data-dir", str(tmp_path)) == 2
    err = capsys.readouterr().err
    assert "dataset" in err and "imagenet" in err and "mnist" in err
    assert list(tmp_path.iterdir()) == []


def test_a_data_dir_that_cannot_be_made_is_exit_2_before_any_download(served, ortho, tmp_path,
                                                                       monkeypatch, capsys):
    folder, base = served
    serve_mnist(folder, base, monkeypatch)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert ortho("data", "download", "mnist", "--data-dir", str(blocker / "data")) == 2
    err = capsys.readouterr().err
    assert err == (f"ortho data download: invalid data_dir: expected a folder, or a path "
                   f"where one can be made (not a directory) (got '{blocker / 'data'}')\n")
