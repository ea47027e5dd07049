"""Tracking a sweep in MLflow: the public face of the modules below, one job each.

- :mod:`sweeps.contract` (outside this package): tag and artifact names, the store's
  location, the expected cells; all that ``analysis`` may use;
- :mod:`.uri`: artifact locations, credentials kept out of printed URIs, search quoting;
- :mod:`.liveness`: the driver's tag and heartbeat, :func:`driver_alive`, node tags;
- :mod:`.retry`: the SQLite store's file lock and retries of a locked database;
- :mod:`.records`: what is read back (:class:`SweepRef`, :class:`SweepRecord`,
  :class:`Claim`, :func:`stored_result`);
- :mod:`.metrics_csv`: the ``metrics.csv`` artifact;
- :mod:`.cells`: the expected cells of a resolved spec (imported when a sweep starts);
- :mod:`.tables`: a configuration run's rows written straight into a SQLite or PostgreSQL
  store's tables (as MLflow's client writes them, at a fraction of its cost);
- :mod:`.layout`: :class:`Tracker`, the one writer of the layout.

Importing this package imports neither MLflow nor the spec code: a :class:`Tracker` imports
MLflow when it is built, so that commands that track nothing start fast.
"""

from sweeps.contract import (
    ATTEMPT,
    BUDGET,
    CELL,
    DRIVER,
    EXPECTED_CELLS_ARTIFACT,
    GIT_DIRTY,
    GIT_SHA,
    HEARTBEAT,
    METRICS_CSV,
    NODE,
    NODE_IP,
    OPTUNA_PARAMS,
    OUTCOME,
    PARENT,
    PROFILE,
    RESOLVED_ARTIFACT,
    SPEC,
    SPEC_ARTIFACT_DIR,
    SPEC_SHA256,
    STOPPED_EARLY,
    SUMMARY,
    SWEEP_ID,
    TRACEBACK,
    TRIAL_KEY,
    TRIALS,
    VERSION,
)
from sweeps.tracking.layout import _TRACKERS as _TRACKERS  # tests replace its entries
from sweeps.tracking.layout import Tracker, sweep_tags, tracker
from sweeps.tracking.liveness import (
    ALIVE_SECONDS,
    HEARTBEAT_SECONDS,
    driver_alive,
    driver_tag,
    node_tags,
)
from sweeps.tracking.metrics_csv import metrics_csv
from sweeps.tracking.records import SweepRecord, SweepRef, metric_value, stored_result
from sweeps.tracking.tables import TaggedRun
from sweeps.tracking.uri import (
    artifact_location,
    home_dir,
    quote,
    redact,
    sqlite_path,
    tracking_uri,
)

__all__ = [
    "ALIVE_SECONDS",
    "ATTEMPT",
    "BUDGET",
    "CELL",
    "DRIVER",
    "EXPECTED_CELLS_ARTIFACT",
    "GIT_DIRTY",
    "GIT_SHA",
    "HEARTBEAT",
    "HEARTBEAT_SECONDS",
    "METRICS_CSV",
    "NODE",
    "NODE_IP",
    "OPTUNA_PARAMS",
    "OUTCOME",
    "PARENT",
    "PROFILE",
    "RESOLVED_ARTIFACT",
    "SPEC",
    "SPEC_ARTIFACT_DIR",
    "SPEC_SHA256",
    "STOPPED_EARLY",
    "SUMMARY",
    "SWEEP_ID",
    "TRACEBACK",
    "TRIALS",
    "TRIAL_KEY",
    "VERSION",
    "SweepRecord",
    "SweepRef",
    "TaggedRun",
    "Tracker",
    "artifact_location",
    "driver_alive",
    "driver_tag",
    "home_dir",
    "metric_value",
    "metrics_csv",
    "node_tags",
    "quote",
    "redact",
    "sqlite_path",
    "stored_result",
    "sweep_tags",
    "tracker",
    "tracking_uri",
]
