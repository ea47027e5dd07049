"""Provenance: a checkout's commit and dirty flag read with git, and the environment's where
the code has no ``.git`` (a submitted job, the cluster image)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sweeps import provenance, tracking
from sweeps.provenance import DIRTY_ENV, SHA_ENV, UNKNOWN


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org",
                           *args], cwd=root, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git checkout with one commit of a pyproject (version 9.8.7) and an ignored folder."""
    root = tmp_path / "checkout"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "9.8.7"\n')
    (root / ".gitignore").write_text("ortho-runs/\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "first")
    return root


def test_a_clean_checkout_records_its_commit_and_version(checkout, monkeypatch):
    monkeypatch.setenv(SHA_ENV, "f" * 40)  # a checkout's own git wins over the environment
    found = provenance.current(checkout)
    assert found == provenance.Provenance(_git(checkout, "rev-parse", "HEAD"), "false", "9.8.7")
    assert found.tags() == {tracking.GIT_SHA: found.git_sha, tracking.GIT_DIRTY: "false",
                            tracking.VERSION: "9.8.7"}
    assert found.env() == {SHA_ENV: found.git_sha, DIRTY_ENV: "false"}


@pytest.mark.parametrize(("change", "dirty"), [
    ("modified", "true"), ("untracked", "true"), ("ignored", "false")])
def test_dirty_means_what_a_submitted_job_would_ship_differently(checkout, change, dirty):
    if change == "modified":
        (checkout / "pyproject.toml").write_text('[project]\nversion = "9.8.8"\n')
    elif change == "untracked":
        (checkout / "new_spec.yaml").write_text("name: new\n")
    else:
        (checkout / "ortho-runs").mkdir()
        (checkout / "ortho-runs" / "mlflow.db").write_text("")
    found = provenance.from_checkout(checkout)
    assert found is not None and found.git_dirty == dirty
    assert found.git_sha == _git(checkout, "rev-parse", "HEAD")


def test_without_git_the_environment_tells(tmp_path, monkeypatch):
    shipped = tmp_path / "working_dir"  # a checkout shipped without its .git
    shipped.mkdir()
    (shipped / "pyproject.toml").write_text('[project]\nversion = "1.2.3"\n')
    monkeypatch.setenv(SHA_ENV, "a" * 40)
    monkeypatch.setenv(DIRTY_ENV, "true")
    assert provenance.from_checkout(shipped) is None
    assert provenance.current(shipped) == provenance.Provenance("a" * 40, "true", "1.2.3")
    monkeypatch.setenv(DIRTY_ENV, "maybe")
    assert provenance.current(shipped).git_dirty == UNKNOWN
    monkeypatch.delenv(SHA_ENV)
    monkeypatch.delenv(DIRTY_ENV)
    assert provenance.current(shipped) == provenance.Provenance(UNKNOWN, UNKNOWN, "1.2.3")


def test_without_git_installed_nothing_is_guessed(checkout, monkeypatch):
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv(SHA_ENV, raising=False)
    assert provenance.from_checkout(checkout) is None
    assert provenance.current(checkout).git_sha == UNKNOWN


def test_an_installed_package_reports_its_distributions_version(tmp_path):
    """Outside a checkout (``tmp_path``): the version pyproject.toml gives the package."""
    import tomllib

    root = Path(__file__).resolve().parents[2]
    version = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    assert provenance.package_version(tmp_path) == version
