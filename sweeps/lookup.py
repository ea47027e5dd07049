"""Finding a sweep in the tracking store for ``ortho sweep status``, ``resume`` and
``studies``: by id, a spec's latest sweep, the store's latest (or latest unfinished) sweep;
refusing to resume a sweep whose driver is alive; a sweep's progress as MLflow holds it.

A sweep the user names is a sweep id, of the form of :func:`new_sweep_id`, or a spec's name;
one the store does not hold is a ``ConfigError`` (field ``sweep``) that lists its latest
sweeps. Tracking URIs are printed with their credentials masked
(:func:`sweeps.tracking.redact`). Nothing here imports Ray: ``ortho sweep status`` reads
MLflow only.
"""

from __future__ import annotations

import os
import re
import secrets
import time

from ortho_core.errors import ConfigError, OrthoError
from sweeps import tracking
from sweeps.contract import NO_STORE, could_name_a_spec, spec_named
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


def find(tracker: tracking.Tracker, sweep: str | None, unfinished: bool = False,
         with_studies: bool = False) -> tracking.SweepRecord | None:
    """The sweep ``sweep`` names: a sweep id (:func:`new_sweep_id`), or a spec's name (or its
    file) for that spec's latest sweep (the latest not FINISHED when ``unfinished``, the latest
    with Optuna studies when ``with_studies``, else its latest). With ``sweep`` None, the
    store's latest sweep so filtered, or None. An id that is unknown, or a name no sweep of the
    store has, is a ``ConfigError`` (field ``sweep``) listing the latest sweeps; a text of
    neither form is never put into a search."""
    if sweep is None:
        return tracker.find_sweep(unfinished=unfinished, with_studies=with_studies)
    if SWEEP_ID.fullmatch(sweep):
        record = tracker.find_sweep(sweep)
    elif could_name_a_spec(name := spec_named(sweep)):
        record = (tracker.find_sweep(spec=name, unfinished=unfinished,
                                     with_studies=with_studies)
                  or tracker.find_sweep(spec=name))
    else:
        record = None
    if record is not None:
        return record
    known = [f"{r.ref.sweep_id} {r.spec}/{r.profile} {state_of(r)}"
             for r in tracker.list_sweeps(LISTED_SWEEPS)]
    held = f"the latest: {'; '.join(known)}" if known else "there are no sweeps yet"
    store = tracking.redact(tracker.uri)
    expected = (f"the id of a sweep in {store}" if SWEEP_ID.fullmatch(sweep) else
                "a sweep id (UTC date-time-4 hex digits, e.g. 20261121-070102-ab12) or the "
                f"name of a spec with sweeps in {store}")
    raise ConfigError("sweep", f"{expected} ({held})", sweep)


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


def sweep_status(sweep: str | None = None, *, tracking_uri: str | None = None,
                 home: str | os.PathLike[str] | None = None) -> Progress:
    """The progress of the sweep ``sweep`` names (:func:`find`; default: the latest, then
    with the latest others the store holds) as MLflow holds it."""
    uri = tracking.tracking_uri(tracking_uri, tracking.home_dir(home))
    tracker = open_store(uri)
    record = find(tracker, sweep)
    if record is None:
        raise SweepNotFound(f"no sweep in {tracking.redact(uri)}")
    progress = from_mlflow(tracker, record)
    if sweep is None:
        others = [f"{r.ref.sweep_id} {r.spec}/{r.profile} {state_of(r)}"
                  for r in tracker.list_sweeps(LISTED_SWEEPS + 2)
                  if r.ref.sweep_id != record.ref.sweep_id]
        progress.others, progress.older = others[:LISTED_SWEEPS], len(others) > LISTED_SWEEPS
    return progress
