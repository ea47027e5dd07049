"""Calls to a store that survive concurrent writers, and what a failed call to a server says.

Every call of :class:`~sweeps.tracking.layout.Tracker` goes through :func:`call`, which
retries "database is locked" with exponential backoff and, for a SQLite store, also holds an
exclusive lock on ``<db>.lock`` (:func:`store_lock`, a ``filelock.FileLock``: re-entrant,
exclusive between the processes of a machine and, being per thread, between the threads of
one), so that the trial processes of one machine write one at a time (SQLite has a single
writer anyway).

A tracking server's failures are told apart by :func:`unreachable` (the server could not be
reached or could not answer now: worth sending again later, :mod:`sweeps.tracking.outbox`)
and :func:`maybe_applied` (whether the request may have reached the server all the same,
so that sending it again could apply it twice).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
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


TRANSIENT_HTTP = frozenset({408, 429, 500, 502, 503, 504})
"""HTTP statuses of a server that cannot answer now (MLflow's own retry codes)."""


def causes(err: BaseException) -> Iterator[BaseException]:
    """``err`` and the exceptions it was raised from or while handling, outermost first
    (MLflow wraps a ``requests`` error in an ``MlflowException`` without ``from``)."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def http_status(err: BaseException) -> int | None:
    """The HTTP status a server answered with, as MLflow's exception carries it (None for
    an error of no answer, or of no server)."""
    from mlflow.exceptions import MlflowException, RestException

    for cause in causes(err):
        if isinstance(cause, RestException) or (
                isinstance(cause, MlflowException) and "failed with error code" in str(cause)):
            return int(cause.get_http_status_code())
    return None


def unreachable(err: BaseException) -> bool:
    """Whether ``err`` of a call to a tracking server says it could not be reached or could
    not answer now (connection refused, reset or timed out; HTTP 408, 429 or 5xx): the call
    may succeed later. Errors of a request the server refused on its merits (a run that does
    not exist, bad input: HTTP 4xx) are not."""
    import requests

    if any(isinstance(c, (requests.ConnectionError, requests.Timeout, ConnectionError,
                          TimeoutError)) for c in causes(err)):
        return True
    return http_status(err) in TRANSIENT_HTTP


def maybe_applied(err: BaseException) -> bool:
    """Whether the failed request may have been applied by the server all the same: every
    failure but a connection that was never made (refused, or not made in time). A lost
    answer (reset, read timeout, a 5xx after the work was done) cannot be told from a lost
    request."""
    import requests
    from urllib3.exceptions import NewConnectionError

    never_sent = (NewConnectionError, ConnectionRefusedError, requests.ConnectTimeout)
    return not any(isinstance(c, never_sent) for c in causes(err))
