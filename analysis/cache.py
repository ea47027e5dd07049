"""A parquet cache of what a report reads from MLflow, so that a sweep of tens of thousands
of runs is read once.

Per sweep, under ``<directory>/<spec>/``:

- ``<sweep_id>.parquet``: the sweep's runs as MLflow holds them (params as strings), and
  ``<sweep_id>.json``: the fingerprint they were read under plus the run count, the
  resolved spec text and the expected cells;
- ``<sweep_id>.history.parquet``: metric histories (``run_id``, ``key``, ``step``, ``value``)
  fetched so far, added to as figures need more.

A cached frame is used only while the sweep's fingerprint is unchanged (see
``analysis.load.fingerprint``: the latest start and end time of its runs). No cache is
written while any run of the sweep is still running, so a live sweep is always read fresh.
Limitation: editing a finished run in place (re-tagging it, deleting a run other than the
newest) does not change the fingerprint; ``ortho report --refresh`` reads everything anew.

Every file is written under a hidden name beside its own and renamed over it
(:func:`_replace`), so that a report interrupted while it writes (Ctrl-C, a full disk) leaves
the entry it had, and one that reads while another writes (two reports, or a report and
``ortho ui``, on one home) never reads half of a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

_SAFE = re.compile(r"[A-Za-z0-9._-]{1,100}")


def safe_name(name: str) -> str:
    """``name`` if it is a safe file name, else a hash of it."""
    return name if _SAFE.fullmatch(name) and name not in (".", "..") else (
        "h" + hashlib.sha256(name.encode()).hexdigest()[:16])


def _replace(path: Path, write: Callable[[Path], object]) -> None:
    """Give ``path`` the content ``write`` puts into the path it is passed: a hidden file
    beside ``path``, renamed over it once complete (removed if ``write`` fails)."""
    staged = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        write(staged)
        os.replace(staged, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            staged.unlink()
        raise


def _parquet(frame: pd.DataFrame) -> Callable[[Path], None]:
    """A writer of ``frame`` as parquet, for :func:`_replace`."""
    return lambda path: frame.to_parquet(path, index=False)


class RunCache:
    """Parquet files of runs and metric histories, one set per sweep."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def _base(self, spec: str, sweep_id: str) -> Path:
        return self.directory / safe_name(spec) / safe_name(sweep_id)

    def get_runs(self, spec: str, sweep_id: str,
                 fingerprint: str) -> tuple[pd.DataFrame, dict[str, Any]] | None:
        """The cached runs and metadata of a sweep, if cached under ``fingerprint``."""
        base = self._base(spec, sweep_id)
        meta_path, data_path = base.with_suffix(".json"), base.with_suffix(".parquet")
        if not (meta_path.is_file() and data_path.is_file()):
            return None
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("fingerprint") != fingerprint:
            return None
        return pd.read_parquet(data_path), meta

    def put_runs(self, spec: str, sweep_id: str, fingerprint: str, frame: pd.DataFrame,
                 meta: dict[str, Any]) -> None:
        """Store a sweep's runs; the metadata is written last, so a half-written entry never
        matches. Cached histories of the sweep are dropped when the fingerprint changed."""
        base = self._base(spec, sweep_id)
        base.parent.mkdir(parents=True, exist_ok=True)
        meta_path = base.with_suffix(".json")
        if meta_path.is_file():
            old = json.loads(meta_path.read_text(encoding="utf-8")).get("fingerprint")
            if old != fingerprint:
                Path(f"{base}.history.parquet").unlink(missing_ok=True)
        meta_path.unlink(missing_ok=True)
        _replace(base.with_suffix(".parquet"), _parquet(frame))
        text = json.dumps({**meta, "fingerprint": fingerprint})
        _replace(meta_path, lambda path: path.write_text(text, encoding="utf-8"))

    def get_history(self, spec: str, sweep_id: str, run_id: str, key: str) -> pd.DataFrame | None:
        """A cached metric history (``step``, ``value``), or None."""
        path = Path(f"{self._base(spec, sweep_id)}.history.parquet")
        if not path.is_file():
            return None
        table = pd.read_parquet(path)
        rows = table[(table["run_id"] == run_id) & (table["key"] == key)]
        if rows.empty:
            return None
        rows = rows[["step", "value"]].dropna(subset=["step"])
        return rows.astype({"step": "int64", "value": "float64"}).reset_index(drop=True)

    def put_history(self, spec: str, sweep_id: str, run_id: str, key: str,
                    history: pd.DataFrame) -> None:
        """Add one metric history of a finished run to the sweep's history file (an empty
        history is stored as one row with a null step, so it is not fetched again)."""
        path = Path(f"{self._base(spec, sweep_id)}.history.parquet")
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = history[["step", "value"]].assign(run_id=run_id, key=key)
        if rows.empty:
            rows = pd.DataFrame({"step": [pd.NA], "value": [float("nan")], "run_id": [run_id],
                                 "key": [key]})
        rows = rows.astype({"step": "Int64", "value": "float64"})
        if path.is_file():
            old = pd.read_parquet(path)
            old = old[~((old["run_id"] == run_id) & (old["key"] == key))]
            rows = pd.concat([old, rows], ignore_index=True)
        _replace(path, _parquet(rows))
