"""A sweep whose dataset is missing or corrupt stops before Ray starts, with exit status 2
naming the file (:mod:`sweeps.preflight`); a sweep on a cluster leaves the check to its
nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ortho_core.data.checksums import MNIST
from ortho_core.experiments import data_check
from sweeps import preflight, runner
from sweeps.cli import main
from sweeps.spec import load_spec, resolve
from tests.sweeps.helpers import DATA_DIR


@pytest.fixture
def no_ray(monkeypatch):
    """Fail the test if the sweep gets as far as starting Ray."""
    def ray_session(address):
        pytest.fail("Ray was started")

    monkeypatch.setattr(runner, "ray_session", ray_session)


def _mnist_copy(root: Path, truncate: str | None = None) -> Path:
    """MNIST's four files under ``root/mnist`` (links to the real ones), ``truncate`` a
    truncated copy instead."""
    folder = root / "mnist"
    folder.mkdir(parents=True)
    for published in MNIST.values():
        source = Path(DATA_DIR) / published.relpath
        target = root / published.relpath
        if target.name == truncate:
            target.write_bytes(source.read_bytes()[:1000])
        else:
            target.symlink_to(source)
    return folder


@pytest.mark.usefixtures("no_ray")
@pytest.mark.parametrize(("layout", "named", "got"), [
    ("no mnist folder", "data/mnist/train-images-idx3-ubyte.gz", "no such file"),
    ("truncated file", "data/mnist/t10k-labels-idx1-ubyte.gz", "1,000 bytes"),
    ("no data folder", "nowhere", "an existing directory holding the datasets"),
])
def test_a_missing_or_corrupt_dataset_exits_2_naming_the_file_before_ray(
        layout, named, got, tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    if layout == "no data folder":
        data = tmp_path / "nowhere"
    elif layout == "no mnist folder":
        data.mkdir()
    else:
        _mnist_copy(data, truncate="t10k-labels-idx1-ubyte.gz")
    monkeypatch.setenv("ORTHO_DATA_DIR", str(data))
    home = tmp_path / "home"
    assert main(["sweep", "run", "ff-mnist", "--profile", "smoke", "--home", str(home)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ortho sweep run: invalid {tmp_path / named}")
    assert got in err and len(err.strip().splitlines()) == 1
    assert not home.exists()  # nothing tracked


@pytest.mark.usefixtures("no_ray")
def test_data_dir_names_the_folder_the_sweep_reads(tmp_path, monkeypatch, capsys):
    """``--data-dir`` on the embedded Ray: the folder checked (and read) instead of
    ``$ORTHO_DATA_DIR``, relative to the working directory."""
    monkeypatch.setenv("ORTHO_DATA_DIR", DATA_DIR)  # intact: not the one read
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    home = tmp_path / "home"
    assert main(["sweep", "run", "ff-mnist", "--profile", "smoke", "--home", str(home),
                 "--data-dir", "empty"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ortho sweep run: invalid {tmp_path / 'empty' / 'mnist'}"), err
    assert not home.exists()


@pytest.mark.usefixtures("no_ray")
def test_missing_music_names_the_music_folder_and_no_workspace_file(tmp_path, monkeypatch,
                                                                    capsys):
    """It said "placed in DATA_DIR" (the loader reads DATA_DIR/music/) and pointed at
    shared/data/README.md, which a user outside this workspace lacks."""
    monkeypatch.setenv("ORTHO_DATA_DIR", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    home = tmp_path / "home"
    assert main(["sweep", "run", "polyphonic-music", "--profile", "smoke", "--home",
                 str(home)]) == 2
    err = capsys.readouterr().err
    music = tmp_path / "empty" / "music"
    assert err.startswith(f"ortho sweep run: invalid {music / 'JSB Chorales.pickle'}: "), err
    assert f"; put it in {music} (no `ortho data download` fetches it: " in err
    assert "README" not in err and len(err.strip().splitlines()) == 1
    assert not home.exists()  # nothing tracked


def test_intact_data_is_checked_once_per_file_and_a_cluster_is_left_to_its_nodes(
        tmp_path, monkeypatch):
    spec = resolve(load_spec("ff-mnist"), "smoke")
    monkeypatch.setenv("ORTHO_DATA_DIR", DATA_DIR)
    verified: list[Path] = []
    real_verify = data_check.verify

    def counted(path: Path, *args: object) -> None:
        verified.append(path)
        real_verify(path, *args)

    monkeypatch.setattr(data_check, "verify", counted)
    assert preflight.check_data(spec, None) == len(MNIST)
    assert len(spec.cells()) > 1  # many configurations, one check of each file
    assert sorted(p.name for p in verified) == sorted(
        Path(f.relpath).name for f in MNIST.values())
    monkeypatch.setenv("ORTHO_DATA_DIR", str(tmp_path / "nowhere"))
    assert preflight.check_data(spec, "auto") == 0  # the nodes' files, not this machine's
    synthetic = resolve(load_spec("synthetic-max-length"), "smoke")
    assert preflight.check_data(synthetic, None) == 0  # reads no file
