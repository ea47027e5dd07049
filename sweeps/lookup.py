"""Finding a sweep in the tracking store for ``ortho sweep status`` and ``resume``: sweep ids,
the latest (or latest unfinished) sweep, refusing to resume a sweep whose driver is alive,
and a sweep's progress as MLflow holds it.

A sweep id given by the user must have the form of :func:`new_sweep_id`; an unknown one is
a ``ConfigError`` (field ``sweep``) that lists the latest sweeps of the store. Tracking URIs
are printed with their credentials masked (:func:`sweeps.tracking.redact`). Nothing here
imports Ray: ``ortho sweep status`` reads MLflow only.
"""

from __future__ import annotations

import os
import re
import secrets
import time

from ortho_core.errors import ConfigError, OrthoError
from sweeps import tracking
from sweeps.contract import NO_STORE
from sweeps.status import Progress, duration, from_mlflow, state_of
from sweeps.tracking.liveness import check_server

SWEEP_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{4}")
"""The form of a sweep id (:func:`new_sweep_id`)."""

LISTED_SWEEPS = 5
"""Sweeps an unknown sweep id's error lists, and ``status`` without an id besides its own."""


class SweepNotFound(OrthoError):
    """``ortho sweep resume|status`` without an id found no sweep to show or resume."""


def new_sweep_id() -> str:
    """``<UTC date>-<time>-<4 hex>``: sortable, and short enough to type."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


def open_store(uri: str) -> tracking.Tracker:
    """The tracker of ``uri``. An embedded store that does not exist is not created: a
    ``ConfigError`` (field ``tracking_uri``, :data:`~sweeps.contract.NO_STORE`), as
    ``ortho report`` answers it."""
    check_server(uri)  # a server that does not answer: ConfigError within seconds
    db = tracking.sqlite_path(uri)
    if db is not None and not db.is_file():
        raise ConfigError("tracking_uri", NO_STORE, uri)
    return tracking.tracker(uri)


def find(tracker: tracking.Tracker, sweep_id: str | None, unfinished: bool = False,
         with_studies: bool = False) -> tracking.SweepRecord | None:
    """Sweep ``sweep_id``, or the latest one (the latest not FINISHED when ``unfinished``, the
    latest with Optuna studies when ``with_studies``). A ``sweep_id`` that does not have the
    form of :func:`new_sweep_id` (it is never put into a search) or that is unknown is a
    ``ConfigError`` listing the latest sweeps."""
    if sweep_id is None:
        return tracker.find_sweep(unfinished=unfinished, with_studies=with_studies)
    if SWEEP_ID.fullmatch(sweep_id):
        record = tracker.find_sweep(sweep_id)
        if record is not None:
            return record
        expected = f"the id of a sweep in {tracking.redact(tracker.uri)}"
    else:
        expected = "a sweep id (UTC date-time-4 hex digits, e.g. 20261121-070102-ab12)"
    known = [f"{r.ref.sweep_id} {r.spec}/{r.profile} {state_of(r)}"
             for r in tracker.list_sweeps(LISTED_SWEEPS)]
    held = f"the latest: {'; '.join(known)}" if known else "there are no sweeps yet"
    raise ConfigError("sweep", f"{expected} ({held})", sweep_id)


def refuse_alive(record: tracking.SweepRecord) -> None:
    """``ConfigError`` (field ``sweep``) if the sweep's driver is still alive."""
    if not record.alive:
        return
    beat = (f", heartbeat {duration(max(0.0, time.time() - record.heartbeat))} ago"
            if record.heartbeat is not None else "")
    raise ConfigError(
        "sweep", f"a sweep whose driver has stopped: {record.ref.sweep_id} "
        f"({record.spec}/{record.profile}) is still running (driver {record.driver}{beat}); "
        "wait for it or stop it, or pass --force to resume it anyway (its runs in flight "
        "are then deleted and trained again)", record.ref.sweep_id)


def sweep_status(sweep_id: str | None = None, *, tracking_uri: str | None = None,
                 home: str | os.PathLike[str] | None = None) -> Progress:
    """The progress of sweep ``sweep_id`` (default: the latest, then with the latest others
    the store holds) as MLflow holds it."""
    uri = tracking.tracking_uri(tracking_uri, tracking.home_dir(home))
    tracker = open_store(uri)
    record = find(tracker, sweep_id)
    if record is None:
        raise SweepNotFound(f"no sweep in {tracking.redact(uri)}")
    progress = from_mlflow(tracker, record)
    if sweep_id is None:
        others = [f"{r.ref.sweep_id} {r.spec}/{r.profile} {state_of(r)}"
                  for r in tracker.list_sweeps(LISTED_SWEEPS + 2)
                  if r.ref.sweep_id != record.ref.sweep_id]
        progress.others, progress.older = others[:LISTED_SWEEPS], len(others) > LISTED_SWEEPS
    return progress
