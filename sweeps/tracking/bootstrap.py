"""A new embedded store (SQLite) without running MLflow's migrations for it.

MLflow builds a new SQLite database by creating its first tables and then replaying every
schema migration (about a second of CPU, more on a busy machine), at the start of every
sweep in a new home. The result depends only on the MLflow release, so it is made once per
release, by MLflow itself, and kept as a template (:func:`template`); a new store is a copy
of it (:func:`create_sqlite_store`), made atomically, so that a process opening the path
sees either no database or a whole one.

The template is MLflow's own new database less one row: the ``Default`` experiment, whose
artifact location MLflow derives from the directory the process creating it runs in. MLflow
creates that experiment when it first opens the copy, as it does for a database of its own,
so a copy is what MLflow would have made in its place: same tables, columns, indexes and
``alembic_version`` (which MLflow checks on every open; the tests compare them).

Templates live in ``$ORTHO_CACHE_DIR``, else ``$XDG_CACHE_HOME/ortho``, else
``~/.cache/ortho``, named after the MLflow release and its schema's head revision. Where
that folder cannot be written, MLflow builds the store as before.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path

CACHE_ENV = "ORTHO_CACHE_DIR"
"""Where templates are kept (default ``$XDG_CACHE_HOME/ortho`` or ``~/.cache/ortho``)."""

DEFAULT_EXPERIMENT_ID = 0
"""The experiment MLflow creates in every store (``Default``), left out of the template."""


def cache_dir() -> Path:
    """The folder of the templates (see the module docstring)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "ortho"


def schema_revision() -> str:
    """The schema revision MLflow expects of a store (the head of its migrations)."""
    from mlflow.store.db.utils import _get_latest_schema_revision

    return str(_get_latest_schema_revision())


def template() -> Path:
    """The template of this MLflow release, built by MLflow the first time (see the module
    docstring). ``OSError`` when the cache folder cannot be written."""
    import mlflow

    path = cache_dir() / f"mlflow-{mlflow.__version__}-{schema_revision()}.db"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, raw = tempfile.mkstemp(prefix=path.stem + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.unlink(raw)  # MLflow creates a new database only where none exists
    draft = Path(raw)
    try:
        _build(draft)
        os.replace(draft, path)  # two processes racing here write the same content
    finally:
        draft.unlink(missing_ok=True)
    return path


def _build(db: Path) -> None:
    """Have MLflow create a store at ``db``, then drop its ``Default`` experiment."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    store = SqlAlchemyStore(f"sqlite:///{db}", str(db.parent / "unused-artifacts"))
    store.engine.dispose()
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM experiments WHERE experiment_id = ?",
                     (DEFAULT_EXPERIMENT_ID,))
    conn.close()


def create_sqlite_store(db: Path) -> bool:
    """Make ``db`` a new, empty store (a copy of :func:`template`) unless a file is there
    already; whether it made one. False also where the template cannot be kept (MLflow then
    builds the store when it first opens it)."""
    if db.exists():
        return False
    try:
        source = template()
    except OSError:
        return False
    db.parent.mkdir(parents=True, exist_ok=True)
    fd, raw = tempfile.mkstemp(prefix=db.name + ".", suffix=".tmp", dir=db.parent)
    draft = Path(raw)
    try:
        with os.fdopen(fd, "wb") as out, source.open("rb") as src:
            out.write(src.read())
        try:
            os.link(draft, db)  # fails where another process made the store meanwhile
        except FileExistsError:
            return False
    finally:
        draft.unlink(missing_ok=True)
    return True
