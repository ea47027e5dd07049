"""The data check before any work (:mod:`ortho_core.experiments.data_check`): for every kind of
dataset, a missing file's message names the folder its loader reads and how to get the file
there, in words that hold outside this project's workspace."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from ortho_core.data.checksums import DOWNLOADS
from ortho_core.errors import DataError
from ortho_core.experiments.data_check import check_data, image_files, music_files

KINDS = {
    "mnist": (image_files("mnist"), "mnist"),
    "cifar10": (image_files("cifar10"), "cifar-10-batches-py"),
    "cifar100": (image_files("cifar100"), "cifar-100-python"),
    "svhn": (image_files("svhn"), "svhn"),
    "music pickle": (music_files("jsb_chorales", "pickle"), "music"),
    "music mat": (music_files("piano_midi", "mat"), "music"),
}


@pytest.mark.parametrize(("files", "folder"), KINDS.values(), ids=KINDS.keys())
def test_a_missing_file_names_the_folder_its_loader_reads(files, folder, tmp_path: Path):
    """With ``data_dir`` empty: the music file must go to ``data_dir/music/`` (it said "placed
    in data_dir"), a CIFAR tarball extracts to its own folder; ``ortho data download NAME``
    where it fetches the dataset, never the workspace's ``shared/data/README.md``."""
    experiment = SimpleNamespace(data_files=lambda config: files)
    with pytest.raises(DataError) as info:
        check_data(experiment, [SimpleNamespace(data_dir=str(tmp_path))])
    message = str(info.value)
    path = tmp_path / files[0].published.relpath
    assert info.value.field == str(path)
    assert path.parent == tmp_path / folder  # the loader's folder...
    assert f" {tmp_path / folder}," in message or f" {tmp_path / folder} (" in message  # ...named
    assert "README" not in message and "shared/data" not in message
    dataset = files[0].dataset
    if dataset in DOWNLOADS:
        assert f"`ortho data download {dataset} --data-dir {tmp_path}`" in message
    else:
        assert "no `ortho data download` fetches it" in message
