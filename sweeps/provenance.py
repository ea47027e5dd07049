"""Which code a sweep ran: the commit, whether the tree differed from it, the package version.

Every run of a sweep, parent and children, carries :data:`~sweeps.contract.GIT_SHA`,
:data:`~sweeps.contract.GIT_DIRTY` and :data:`~sweeps.contract.VERSION`
(:meth:`Provenance.tags`). They are read where the code is a git checkout; where it is not,
from :data:`SHA_ENV` and :data:`DIRTY_ENV`, which two things set:

- ``ortho sweep submit`` ships a checkout without its ``.git`` as the job's working
  directory, so it reads the submitting checkout here and passes the result in the job's
  environment (:meth:`Provenance.env`);
- the cluster image installs the package without a checkout, and records the commit it was
  built from in the same variables (``docker build --build-arg ORTHO_GIT_SHA=...``,
  cluster/Dockerfile).

"Dirty" means ``git status --porcelain`` lists anything: a modified tracked file or an
untracked one that is not ignored, either of which a submitted job would ship.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

from sweeps.contract import GIT_DIRTY, GIT_SHA, VERSION

SHA_ENV = "ORTHO_GIT_SHA"
"""The commit of code that runs outside its checkout (a submitted job, the image)."""
DIRTY_ENV = "ORTHO_GIT_DIRTY"
"""``true`` or ``false``: whether that code differed from :data:`SHA_ENV`."""
UNKNOWN = "unknown"
"""What a tag holds when nothing tells."""
DISTRIBUTION = "ortho-sweeps"
"""The package's name on PyPI (its installed metadata holds the version)."""


@dataclass(frozen=True)
class Provenance:
    """The code a process runs."""

    git_sha: str
    """The commit, or :data:`UNKNOWN`."""
    git_dirty: str
    """``true``, ``false`` or :data:`UNKNOWN`."""
    version: str
    """The package's version (``project.version`` of pyproject.toml)."""

    def tags(self) -> dict[str, str]:
        """The run tags that record it."""
        return {GIT_SHA: self.git_sha, GIT_DIRTY: self.git_dirty, VERSION: self.version}

    def env(self) -> dict[str, str]:
        """The environment that hands it to a process running a copy without ``.git``."""
        return {SHA_ENV: self.git_sha, DIRTY_ENV: self.git_dirty}


def _git(root: Path, *args: str) -> str | None:
    """``git args`` in ``root``: its output, or None where git fails or is missing."""
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                             timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def package_version(root: Path) -> str:
    """The version of the code under ``root``: its ``pyproject.toml`` (a checkout, shipped or
    not), else the installed distribution's, else :data:`UNKNOWN`."""
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        version = tomllib.loads(pyproject.read_text()).get("project", {}).get("version")
        if isinstance(version, str):
            return version
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN


def from_checkout(root: Path) -> Provenance | None:
    """The provenance of the git checkout ``root``; None if it is none (or has no commit)."""
    sha = _git(root, "rev-parse", "HEAD")
    status = _git(root, "status", "--porcelain")
    if not sha or not sha.strip() or status is None:
        return None
    return Provenance(sha.strip(), "true" if status.strip() else "false",
                      package_version(root))


def current(root: Path) -> Provenance:
    """The provenance of the code under ``root``: from git where it is a checkout, else from
    :data:`SHA_ENV` and :data:`DIRTY_ENV`, else :data:`UNKNOWN`."""
    found = from_checkout(root)
    if found is not None:
        return found
    sha = os.environ.get(SHA_ENV) or UNKNOWN
    dirty = os.environ.get(DIRTY_ENV, "").lower()
    return Provenance(sha, dirty if dirty in ("true", "false") else UNKNOWN,
                      package_version(root))
