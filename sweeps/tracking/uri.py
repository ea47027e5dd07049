"""Where a sweep's store is, and how a URI is shown and searched for.

Resolution (:func:`home_dir`, :func:`tracking_uri`, :func:`sqlite_path`) and masking
(:func:`redact`, which ``analysis`` needs too) are part of the contract with ``analysis`` and
defined in :mod:`sweeps.contract`; this module adds what only ``sweeps`` needs: where a new
experiment keeps its artifacts, and how a value enters a search filter safely. No environment
variables or credentials are ever logged: a URI printed by ``sweeps`` goes through
:func:`redact` first, and values put into a search filter through :func:`quote`.
"""

from __future__ import annotations

from pathlib import Path

from sweeps.contract import home_dir, redact, sqlite_path, tracking_uri

__all__ = ["artifact_location", "home_dir", "quote", "redact", "sqlite_path", "tracking_uri"]


def quote(value: str) -> str:
    """``value`` as a string literal of an MLflow search filter.

    MLflow strips the quotes of a literal and unescapes nothing, so a value is quoted with
    the quote it does not contain; one with both quotes or a backslash cannot be written
    (``ValueError``)."""
    if "\\" in value or ("'" in value and '"' in value):
        raise ValueError(f"cannot search MLflow for {value!r}: quotes of both kinds or a "
                         "backslash")
    return f'"{value}"' if "'" in value else f"'{value}'"


DATABASES = ("postgresql", "postgres", "mysql", "mssql")
"""Schemes of the databases MLflow tracks into directly (besides SQLite), any driver named."""


def local_folder(artifact_uri: str) -> Path | None:
    """The folder an artifact URI names on this machine (a ``file://`` URI or a plain path,
    which MLflow's local artifact repository writes), else None (``s3://``, ``gs://``, a
    server's ``mlflow-artifacts:``...)."""
    scheme, sep, _ = artifact_uri.partition(":")
    if sep and len(scheme) > 1 and scheme != "file":  # one letter: a Windows drive
        return None
    from mlflow.utils.file_utils import local_file_uri_to_path

    return Path(local_file_uri_to_path(artifact_uri)).absolute()


def artifact_location(uri: str, experiment: str, home: Path | None = None) -> str | None:
    """Where a new experiment keeps its artifacts: beside a SQLite database
    (``<dir>/artifacts/<experiment>``); for another database tracked directly (MLflow would
    take ``./mlruns`` of whatever directory the driver runs in) under the sweeps' ``home``
    (``<home>/artifacts/<experiment>``); a server or a file store decides for itself (None)."""
    db = sqlite_path(uri)
    if db is not None:
        return (db.parent / "artifacts" / experiment).as_uri()
    scheme = uri.partition("://")[0].partition("+")[0]
    if home is not None and scheme in DATABASES:
        return (home / "artifacts" / experiment).as_uri()
    return None
