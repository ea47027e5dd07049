"""Read a sweep back from MLflow into pandas (DESIGN.md, "What MLflow holds"; the layout is
written by ``sweeps.tracking``, and its names come from :mod:`sweeps.contract`).

A sweep is a parent run (tag ``ortho.role = sweep``) of its spec's experiment, tagged with
its ``ortho.sweep_id``; its configurations are the runs tagged ``ortho.role =
configuration`` with the same sweep id (and ``mlflow.parentRunId``), one per trial key
(``ortho.trial_key``). :func:`load_sweep` returns one row per configuration:

- when a trial key was tracked more than once (an interrupted or failed run not yet
  replaced), the latest ``FINISHED`` run wins, and when none finished the latest run stands
  for the key;
- failed and diverged configurations are kept; their outcome says so and they are counted;
- params come back as numbers where MLflow stored the string of a number.

Only ``mlflow`` (through the client passed in) and ``pandas`` are used: nothing here imports
Ray, training code or any of ``sweeps`` but its contract.

In a notebook or a script, :func:`read` is the one call (README "Analysing in Python"):

    >>> runs, histories = read("synthetic-max-length", home="ortho-runs")  # doctest: +SKIP
    >>> runs.runs[["run_name", "outcome", "metrics.max_seq_len_solved"]]  # doctest: +SKIP
    >>> histories.get(runs.runs.run_id[0], "val_error")  # step, value  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from analysis.cache import RunCache
from analysis.store import open_store, resolve_tracking_uri
from ortho_core.errors import ConfigError
from sweeps import contract

_SWEEPS = f"tags.`{contract.ROLE}` = '{contract.ROLE_SWEEP}'"
"""The search filter for the parent runs of sweeps."""

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

DONE = ("solved", "unsolved", "diverged")
"""Outcomes of a configuration that trained to its end."""
OUTCOMES = (*DONE, "failed", "incomplete")
"""Every outcome a loaded configuration can have; ``incomplete`` = running, killed or
interrupted without an ``ortho.outcome`` tag."""

RAW_COLUMNS = ["run_id", "trial_key", "status", "outcome_tag", "start_time", "end_time",
               "node", "parent_run_id", "hostname", "run_name", "optuna_params", "attempt",
               "stopped_early"]
"""Columns of :func:`raw_frame` before the ``params.*`` and ``metrics.*`` ones."""

_INT = re.compile(r"[+-]?\d+")
_PAGE = 10_000


@dataclass(frozen=True)
class Sweep:
    """One sweep of a spec: its parent run and that run's tags."""

    spec: str
    """Spec name (= experiment name)."""
    sweep_id: str
    """Tag ``ortho.sweep_id``."""
    profile: str
    """Tag ``ortho.profile``."""
    spec_sha256: str
    """Tag ``ortho.spec_sha256``: the hash of the resolved spec text."""
    git_sha: str
    """Tag ``ortho.git_sha``."""
    n_configs: int | None
    """Tag ``ortho.n_configs``: configurations the sweep has in all, when tagged."""
    parent_run_id: str
    """The parent run."""
    status: str
    """The parent run's status (``RUNNING`` while the sweep runs or after its driver died)."""
    experiment_id: str
    """MLflow experiment id."""
    start_time: int
    """Start of the parent run (ms since the epoch)."""
    per_hour: float | None = None
    """Metric ``configs_per_hour`` of the parent run: configurations finished per hour by
    the run of the driver that last ended the sweep (None while it runs, or never ended)."""
    run_seconds: float | None = None
    """Metric ``run_seconds`` of the parent run: the wall time of that run of the driver,
    which :attr:`per_hour` is over (shorter than the sweep's span once it was resumed)."""
    repeats: int = 0
    """Metric ``optuna_repeats`` of the parent run: Optuna points proposed again, each a
    trial of its cell's budget told a known value instead of trained, with no run of its
    own (counted in :attr:`n_configs`)."""
    metric: str = ""
    """Tag ``ortho.metric``: the summary metric the spec ranks configurations by."""
    mode: str = "max"
    """Tag ``ortho.mode``: whether a larger (``max``) or smaller (``min``) metric is better."""
    optuna_storage: str = ""
    """Tag ``ortho.optuna_storage``: the Optuna storage of the sweep's studies (credentials
    masked); empty for a grid sweep."""
    optuna_sampler: str = ""
    """Tag ``ortho.optuna_sampler``: the sampler of those studies (empty for a grid sweep, or
    one tracked before the tag)."""
    git_dirty: bool = False
    """Tag ``ortho.git_dirty`` is ``true``: the checkout had uncommitted changes."""


@dataclass
class SweepRuns:
    """A sweep's configurations as a frame, with the counts a report states."""

    sweep: Sweep
    """The sweep the rows belong to."""
    runs: pd.DataFrame
    """One row per configuration: ``run_id``, ``trial_key``, ``status``, ``outcome``,
    ``attempts`` (tries of the configuration: its runs' ``ortho.attempt``, or the runs
    tracked for the key where more), ``stopped_early`` (the sweep's early-stopping scheduler
    ended it: its metrics are those of the step it reached, not a summary), ``start_time``,
    ``end_time``, ``node``,
    ``parent_run_id``, ``optuna_params`` (the JSON of the point an Optuna cell chose, None
    for a grid configuration), ``params.<key>`` (parsed) and ``metrics.<name>`` (latest
    value)."""
    n_runs: int
    """Configuration runs read, superseded ones included."""
    tracking_uri: str = ""
    """Store the runs were read from."""
    expected_cells: list[dict[str, Any]] | None = field(default=None, repr=False)
    """The cells the sweep's spec defines (``expected_cells.json`` of the parent run, see
    :mod:`analysis.expected`); None for a sweep tracked without it."""

    @property
    def outcomes(self) -> dict[str, int]:
        """Configurations per outcome, in the order of :data:`OUTCOMES`."""
        counts = self.runs["outcome"].value_counts()
        return {k: int(counts.get(k, 0)) for k in OUTCOMES}


def parse_param(text: str | None) -> Any:
    """An MLflow param string back as the value it was logged from: ``"10"`` -> 10,
    ``"1e-05"`` -> 1e-05, ``"True"`` -> True, ``"None"`` -> None; other text stays text
    (``sweeps.tracking`` logs a list as its comma-joined items)."""
    if text is None:
        return None
    s = text.strip()
    if _INT.fullmatch(s):
        return int(s)
    try:
        return float(s)
    except ValueError:
        pass
    if s in ("True", "False", "true", "false"):
        return s in ("True", "true")
    if s in ("None", "null"):
        return None
    return text


def outcome_of(status: str, tag: str | None) -> str:
    """The configuration's outcome: the ``ortho.outcome`` tag, else ``failed`` for an MLflow
    ``FAILED`` run, else ``incomplete``."""
    if tag in OUTCOMES:
        return tag
    return "failed" if status == "FAILED" else "incomplete"


def _search(client: MlflowClient, experiment_ids: list[str], query: str) -> Iterator[Run]:
    """Every run matching ``query``, page by page."""
    token = None
    while True:
        page = client.search_runs(experiment_ids, filter_string=query, max_results=_PAGE,
                                  page_token=token)
        yield from page
        token = page.token
        if not token:
            return


def _sweep_of(spec: str, run: Run) -> Sweep:
    tags = run.data.tags
    n = tags.get(contract.N_CONFIGS)
    return Sweep(spec=spec, sweep_id=tags[contract.SWEEP_ID],
                 profile=tags.get(contract.PROFILE, ""),
                 spec_sha256=tags.get(contract.SPEC_SHA256, ""),
                 git_sha=tags.get(contract.GIT_SHA, ""),
                 git_dirty=tags.get(contract.GIT_DIRTY) == "true",
                 n_configs=int(n) if n and n.isdigit() else None,
                 parent_run_id=run.info.run_id, status=run.info.status,
                 experiment_id=run.info.experiment_id, start_time=run.info.start_time,
                 per_hour=run.data.metrics.get(contract.CONFIGS_PER_HOUR)
                 if run.info.status != "RUNNING" else None,
                 run_seconds=run.data.metrics.get(contract.RUN_SECONDS)
                 if run.info.status != "RUNNING" else None,
                 repeats=int(run.data.metrics.get(contract.OPTUNA_REPEATS, 0)),
                 metric=tags.get(contract.METRIC, ""), mode=tags.get(contract.MODE, "max"),
                 optuna_storage=tags.get(contract.OPTUNA_STORAGE, ""),
                 optuna_sampler=tags.get(contract.OPTUNA_SAMPLER, ""))


def list_specs(client: MlflowClient) -> list[str]:
    """Names of the experiments in the store that hold at least one sweep."""
    return sorted(e.name for e in client.search_experiments()
                  if client.search_runs([e.experiment_id], _SWEEPS, max_results=1))


def list_sweeps(client: MlflowClient, spec: str) -> list[Sweep]:
    """The sweeps of ``spec``, newest first; ``ConfigError`` naming the specs the store holds
    when it has none of this one (field ``spec``), or saying that it holds no sweep at all
    (field ``tracking_uri``)."""
    experiment = client.get_experiment_by_name(spec)
    parents = [] if experiment is None else list(
        _search(client, [experiment.experiment_id], _SWEEPS))
    if not parents:
        known = list_specs(client)
        if not known:
            raise ConfigError("tracking_uri", "an MLflow store holding sweeps (this one holds "
                              "none: run `ortho sweep run SPEC` first)",
                              contract.redact(client.tracking_uri))
        raise ConfigError("spec", "a spec with sweeps in this store: " + ", ".join(known), spec)
    sweeps = [_sweep_of(spec, run) for run in parents if contract.SWEEP_ID in run.data.tags]
    return sorted(sweeps, key=lambda s: s.start_time, reverse=True)


def find_sweep(client: MlflowClient, spec: str, sweep_id: str | None = None) -> Sweep:
    """Sweep ``sweep_id`` of ``spec``, or its latest sweep when ``sweep_id`` is None;
    ``ConfigError`` (field ``sweep``) listing the sweeps that exist when it is unknown."""
    sweeps = list_sweeps(client, spec)
    if sweep_id is None:
        return sweeps[0]
    for sweep in sweeps:
        if sweep.sweep_id == sweep_id:
            return sweep
    known = ", ".join(f"{s.sweep_id} ({s.profile})" for s in sweeps)
    raise ConfigError("sweep", f"a sweep of {spec}: {known}", sweep_id)


def _children(sweep: Sweep) -> str:
    return (f"tags.`{contract.SWEEP_ID}` = '{sweep.sweep_id}' and "
            f"tags.`{contract.ROLE}` = '{contract.ROLE_CONFIGURATION}'")


def child_runs(client: MlflowClient, sweep: Sweep) -> Iterator[Run]:
    """Every configuration run of the sweep."""
    return _search(client, [sweep.experiment_id], _children(sweep))


def raw_frame(runs: Iterable[Run]) -> pd.DataFrame:
    """One row per MLflow run, params as the strings MLflow holds (the cached form)."""
    records = []
    for run in runs:
        tags = run.data.tags
        record: dict[str, Any] = {
            "run_id": run.info.run_id, "trial_key": tags.get(contract.TRIAL_KEY, run.info.run_id),
            "status": run.info.status, "outcome_tag": tags.get(contract.OUTCOME),
            "start_time": run.info.start_time, "end_time": run.info.end_time,
            "node": tags.get(contract.NODE), "parent_run_id": tags.get(contract.PARENT),
            "hostname": tags.get(contract.HOSTNAME), "run_name": run.info.run_name,
            "optuna_params": tags.get(contract.OPTUNA_PARAMS),
            "attempt": tags.get(contract.ATTEMPT),
            "stopped_early": tags.get(contract.STOPPED_EARLY) == "true"}
        record.update({f"params.{k}": v for k, v in run.data.params.items()})
        record.update({f"metrics.{k}": v for k, v in run.data.metrics.items()})
        records.append(record)
    frame = pd.DataFrame.from_records(records) if records else pd.DataFrame(
        {c: pd.Series(dtype=object) for c in RAW_COLUMNS})
    for col in ("start_time", "end_time"):
        frame[col] = pd.to_numeric(frame[col]).astype("float64")
    return frame


def no_runs(spec: str, profile: str) -> SweepRuns:
    """A sweep of ``spec`` under ``profile`` that holds no runs: what the report of a spec
    that did not run is built from (its claims then all not measured)."""
    sweep = Sweep(spec=spec, sweep_id="", profile=profile, spec_sha256="", git_sha="",
                  n_configs=None, parent_run_id="", status="", experiment_id="", start_time=0)
    return SweepRuns(sweep=sweep, runs=select_latest(raw_frame([])), n_runs=0)


def infinite(values: pd.Series) -> pd.Series:
    """``values`` with ±:data:`sweeps.contract.STORED_INFINITY` as ±inf again: MLflow stores
    an infinite metric (a diverged loss) as the largest float, which a table would print as
    1.79769e+308 and a mean would take for a number."""
    numbers = pd.to_numeric(values, errors="coerce")
    held = numbers.abs() >= contract.STORED_INFINITY
    if not held.any():
        return values
    out = values.copy()
    out[held] = [math.copysign(math.inf, v) for v in numbers[held]]
    return out


def select_latest(raw: pd.DataFrame) -> pd.DataFrame:
    """One row per trial key: its latest ``FINISHED`` run, else its latest run.

    "Latest" orders by end time, then start time (a run that has not ended counts as older
    than any that has). Adds ``attempts`` (the most of the runs tracked for the key and
    their ``ortho.attempt``: a resume deletes the runs it replaces) and ``outcome``
    (:func:`outcome_of`); params are parsed with :func:`parse_param`, and metrics MLflow
    holds as the largest float are infinite again (:func:`infinite`).
    """
    order = raw.assign(_finished=raw["status"].eq("FINISHED"),
                       _end=raw["end_time"].fillna(-math.inf))
    order = order.sort_values(["trial_key", "_finished", "_end", "start_time"], kind="stable")
    best = order.groupby("trial_key", sort=False).tail(1).drop(columns=["_finished", "_end"])
    best = best.sort_values(["start_time", "run_id"], kind="stable").reset_index(drop=True)
    tries = pd.to_numeric(raw.get("attempt", pd.Series(index=raw.index, dtype=object)),
                          errors="coerce").groupby(raw["trial_key"]).max()
    attempts = raw.groupby("trial_key").size().combine(tries, max, fill_value=0)
    best.insert(3, "outcome", pd.Series(
        [outcome_of(s, t) for s, t in zip(best["status"], best["outcome_tag"], strict=True)],
        index=best.index, dtype=object))
    best.insert(4, "attempts", best["trial_key"].map(attempts).astype("int64"))
    best = best.drop(columns=["outcome_tag", "attempt"], errors="ignore")
    best["stopped_early"] = (best["stopped_early"].fillna(False).astype(bool)
                             if "stopped_early" in best else False)  # a frame cached before
    for col in [c for c in best.columns if c.startswith("params.")]:
        parsed = pd.Series([parse_param(v if isinstance(v, str) else None) for v in best[col]],
                           index=best.index, dtype=object)
        best[col] = parsed.infer_objects()
    for col in [c for c in best.columns if c.startswith("metrics.")]:
        best[col] = infinite(best[col])
    return best


def artifact_text(client: MlflowClient, run_id: str, name: str) -> str | None:
    """The text of run ``run_id``'s top-level artifact ``name``, or None when it has none (a
    store that cannot be read raises, rather than passing for a missing artifact)."""
    names = {a.path for a in client.list_artifacts(run_id)}
    if name not in names:
        return None
    path = client.download_artifacts(run_id, name)
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def read_expected(client: MlflowClient, sweep: Sweep) -> list[dict[str, Any]] | None:
    """The cells the sweep should hold (``expected_cells.json``), or None for a sweep
    tracked without that artifact."""
    text = artifact_text(client, sweep.parent_run_id, contract.EXPECTED_CELLS_ARTIFACT)
    return None if text is None else contract.read_expected_cells(text)


def metric_history(client: MlflowClient, run_id: str, key: str) -> pd.DataFrame:
    """The stepwise values of metric ``key`` of run ``run_id``: columns ``step``, ``value``,
    sorted by step (a step logged twice keeps its last value: ``sweeps.tracking`` logs a
    final summary of the same name at the run's last step)."""
    history = client.get_metric_history(run_id, key)
    frame = pd.DataFrame({"step": [m.step for m in history],
                          "value": [m.value for m in history],
                          "timestamp": [m.timestamp for m in history]})
    frame = frame.sort_values(["step", "timestamp"], kind="stable")
    frame = frame.drop_duplicates("step", keep="last").drop(columns="timestamp")
    return frame.astype({"step": "int64", "value": "float64"}).reset_index(drop=True)


def fingerprint(client: MlflowClient, sweep: Sweep) -> str | None:
    """A key that changes when the sweep gains a run or a run ends: the latest start and end
    time among its configuration runs. None while any of them is still running (nothing of
    a live sweep is cached)."""
    query, ids = _children(sweep), [sweep.experiment_id]
    if client.search_runs(ids, query + " and attributes.status = 'RUNNING'", max_results=1):
        return None
    latest = [client.search_runs(ids, query, order_by=[f"attributes.{t} DESC"], max_results=1)
              for t in ("start_time", "end_time")]
    started = latest[0][0].info.start_time if latest[0] else None
    ended = latest[1][0].info.end_time if latest[1] else None
    return f"{sweep.parent_run_id}:{started}:{ended}"


def load_sweep(client: MlflowClient, spec: str, sweep_id: str | None = None,
               cache: RunCache | None = None, tracking_uri: str = "") -> SweepRuns:
    """The configurations of sweep ``sweep_id`` of ``spec`` (default: its latest sweep).

    With a ``cache``, an unchanged sweep is read from parquet instead of MLflow. Unknown spec
    or sweep: ``ConfigError`` naming what exists (see :func:`find_sweep`).
    """
    sweep = find_sweep(client, spec, sweep_id)
    key = fingerprint(client, sweep) if cache is not None else None
    hit = cache.get_runs(spec, sweep.sweep_id, key) if cache is not None and key else None
    if hit is not None and "expected_cells" in hit[1] and set(RAW_COLUMNS) <= set(hit[0]):
        # else cached before the cells or one of the columns were kept
        raw, meta = hit
    else:
        raw = raw_frame(child_runs(client, sweep))
        meta = {"expected_cells": read_expected(client, sweep)}
        if cache is not None and key:
            cache.put_runs(spec, sweep.sweep_id, key, raw, meta)
    return SweepRuns(sweep=sweep, runs=select_latest(raw), n_runs=len(raw),
                     tracking_uri=tracking_uri, expected_cells=meta["expected_cells"])


def param_values(frame: pd.DataFrame, name: str) -> pd.Series:
    """Column ``params.<name>`` of a loaded frame, or a column of None when no run logged it."""
    col = f"params.{name}"
    if col in frame:
        return frame[col]
    return pd.Series([None] * len(frame), index=frame.index, dtype=object)


def numeric_values(frame: pd.DataFrame, name: str, kind: type = float) -> list[Any]:
    """The distinct numbers param ``name`` takes in ``frame``, as ``kind``, ascending (runs
    that did not log it, or logged something else, are left out)."""
    return sorted({kind(v) for v in param_values(frame, name)
                   if isinstance(v, (int, float)) and v == v})


class Histories:
    """Metric histories of a sweep's runs, fetched from MLflow on first use and cached (for
    runs that have ended) in the sweep's history file."""

    def __init__(self, client: MlflowClient, runs: SweepRuns, cache: RunCache | None = None):
        self.client = client
        self.runs = runs
        self.cache = cache
        self._ended = set(runs.runs.loc[runs.runs["status"] != "RUNNING", "run_id"])

    def artifact_json(self, run_id: str, name: str) -> Any:
        """Run ``run_id``'s JSON artifact ``<name>.json`` parsed (None when it has none)."""
        text = artifact_text(self.client, run_id, f"{name}.json")
        return None if text is None else json.loads(text)

    def get(self, run_id: str, key: str) -> pd.DataFrame:
        """Metric ``key`` of run ``run_id`` over steps (columns ``step``, ``value``; an
        infinite value as inf, not as MLflow's largest float: :func:`infinite`)."""
        spec, sweep_id = self.runs.sweep.spec, self.runs.sweep.sweep_id
        history = None
        if self.cache is not None:
            history = self.cache.get_history(spec, sweep_id, run_id, key)
        if history is None:
            history = metric_history(self.client, run_id, key)
            if self.cache is not None and run_id in self._ended:
                self.cache.put_history(spec, sweep_id, run_id, key, history)
        return history.assign(value=infinite(history["value"]))


def read(spec: str, sweep_id: str | None = None, *, tracking_uri: str | None = None,
         home: str | Path | None = None) -> tuple[SweepRuns, Histories]:
    """Sweep ``sweep_id`` of ``spec`` (a spec's name or its file; default: its latest) from
    the store ``ortho`` would use with the same ``--tracking-uri`` and ``--home`` (default:
    ``$ORTHO_TRACKING_URI``, else ``./ortho-runs``), as :func:`load_sweep`'s frame of its
    configurations and their metric :class:`Histories`, read from MLflow as they are asked
    for. ``ConfigError`` for a store, spec or sweep that is not there, naming what exists.
    Like every reader of a store
    here (:func:`~analysis.store.open_store`), it turns MLflow's artifact progress bars off
    for the process unless ``$MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR`` is set."""
    uri = resolve_tracking_uri(tracking_uri, home)
    client = open_store(uri)
    runs = load_sweep(client, contract.spec_named(spec), sweep_id, tracking_uri=uri)
    return runs, Histories(client, runs)
