"""Which MLflow store a report reads, and where its cache lives.

The store is resolved exactly as ``ortho sweep run`` resolves it (by :mod:`sweeps.contract`,
the one module of ``sweeps`` that ``analysis`` uses): ``--tracking-uri`` if given (a relative
SQLite path made absolute), else the embedded default ``sqlite:///<home>/mlflow.db``, where
``home`` is ``--home``, else ``$ORTHO_HOME``, else ``./ortho-runs``. A SQLite store that does
not exist is an error here, never created: opening a missing file would make an empty store.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ortho_core.errors import ConfigError
from sweeps.contract import (
    NO_STORE,
    database_url,
    home_dir,
    redact,
    server_address,
    sqlite_path,
    tracking_uri,
    unreachable,
)

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient


def resolve_tracking_uri(uri: str | None = None, home: str | Path | None = None) -> str:
    """The absolute tracking URI ``ortho sweep run`` would use with the same flags."""
    return tracking_uri(uri, home_dir(home))


def open_store(uri: str) -> MlflowClient:
    """A client of the store at ``uri`` (MLflow is imported here, when a store is read);
    ``ConfigError`` (field ``tracking_uri``) when it is a SQLite file that does not exist,
    or a server (tracking or database) that takes no connection within seconds, rather than
    MLflow's minutes of retries. MLflow's progress bar per artifact read is off unless the
    environment turns it on: a report or a notebook reads many small artifacts."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    path = sqlite_path(uri)
    if path is not None and not path.is_file():
        raise ConfigError("tracking_uri", NO_STORE, uri)
    address = server_address(uri)
    why = None if address is None else unreachable(*address)
    if why is not None:
        raise ConfigError("tracking_uri", f"a server that answers ({why})", redact(uri))
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=database_url(uri))


USER_CACHE = Path("~/.cache/ortho-sweeps/analysis")
"""Where reports of a server's store cache what they read when no home is named (beside the
datasets' default folder, ``~/.cache/ortho-sweeps/data``)."""


def cache_dir(uri: str, home: str | Path | None = None) -> Path:
    """Where reports cache what they read: ``cache/analysis`` beside a SQLite store; for
    another store, ``<home>/cache/analysis/<hash of the URI>`` where a home is named
    (``--home``, ``$ORTHO_HOME``), else :data:`USER_CACHE`/``<hash>``, not a folder the
    command would make in the working directory."""
    path = sqlite_path(uri)
    if path is not None:
        return path.parent / "cache" / "analysis"
    named = home is not None or os.environ.get("ORTHO_HOME")
    base = home_dir(home) / "cache" / "analysis" if named else USER_CACHE.expanduser()
    return base / hashlib.sha256(uri.encode()).hexdigest()[:12]
