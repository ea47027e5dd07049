"""Calls to a store that survive concurrent writers.

Every call of :class:`~sweeps.tracking.layout.Tracker` goes through :func:`call`, which
retries "database is locked" with exponential backoff and, for a SQLite store, also holds an
exclusive lock on ``<db>.lock`` (:func:`store_lock`, a ``filelock.FileLock``: re-entrant,
exclusive between the processes of a machine and, being per thread, between the threads of
one), so that the trial processes of one machine write one at a time (SQLite has a single
writer anyway).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

from filelock import FileLock

from sweeps.contract import sqlite_path

T = TypeVar("T")

RETRIES = 12
"""Attempts of one call on a locked database: backoff 0.05 s doubling to 2 s, about 15 s."""
POLL_SECONDS = 0.01
"""How often a process waiting for the store's lock tries it again."""


def store_lock(uri: str) -> FileLock | None:
    """The lock of the SQLite store at ``uri`` (``<db>.lock``, beside the database, whose
    directory is created), or None for a server, which serialises its writers itself."""
    db = sqlite_path(uri)
    if db is None:
        return None
    db.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(db.with_name(db.name + ".lock"), poll_interval=POLL_SECONDS)


def held(lock: FileLock | None) -> AbstractContextManager[Any]:
    """A context holding ``lock`` (nothing for None)."""
    return lock if lock is not None else nullcontext()


def is_transient(err: Exception) -> bool:
    """Whether ``err`` is a store that is busy now and may answer a retry."""
    text = str(err).lower()
    return "database is locked" in text or "database is busy" in text


def call(lock: FileLock | None, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` holding ``lock``, retried while the database is locked
    (backoff with jitter, :data:`RETRIES` attempts)."""
    delay = 0.05
    for attempt in range(RETRIES):
        try:
            with held(lock):
                return fn(*args, **kwargs)
        except Exception as err:
            if not is_transient(err) or attempt == RETRIES - 1:
                raise
        time.sleep(delay * (1 + random.random()))
        delay = min(2 * delay, 2.0)
    raise AssertionError("unreachable")
