"""Run a sweep on Ray Tune, tracked in MLflow (DESIGN.md "The embedded default, and the
cluster").

Embedded default (no address): Ray starts with this process, every Ray process listening on
127.0.0.1 only; MLflow tracks into ``<home>/mlflow.db`` (SQLite) with artifacts in
``<home>/artifacts/``; Tune writes its state under ``<home>/ray/`` (``--storage`` moves it:
a local path, or an object store's URI such as ``s3://bucket/ray``, see :func:`storage_path`).
``home`` is ``--home``, else ``$ORTHO_HOME``, else ``./ortho-runs``; it and the tracking URI
are made absolute before any trial starts. With an ``address`` the driver joins a running
cluster (``auto`` inside a Ray job): its nodes need this package, as the cluster image has
it, or use ``ortho sweep submit``, which ships the checkout. ``tracking_uri`` (or
``$ORTHO_TRACKING_URI``) points the driver and every trial at a tracking server.

Each Tune trial trains one pack (:mod:`sweeps.plan`) with the spec's resources (fractional
GPUs allowed; ``device: auto`` becomes ``cuda`` in a trial that got a GPU), handed out by one
searcher for the whole sweep (:mod:`sweeps.searcher`: grid packs, then an Optuna study per
cell); an ASHA scheduler stops unpromising trials when the spec asks. Actors are reused
between trials, so a trial costs no fresh process and no re-import of torch. Tune asks Ray for
the resources of every grid trial at once (:func:`staged_trials`), so that a cluster starts
its actors together, on as many nodes as they need, and an autoscaler sees the whole demand;
Optuna's trials are staged one at a time (:mod:`sweeps.searcher`). A trial that
raises is retried up to the spec's ``max_failures`` and the sweep goes on. Tune's own output
is silenced; :class:`~sweeps.status.ProgressCallback` prints one line at a time instead.

Resume (:func:`resume_sweep`) reads the sweep back from MLflow, not from Tune's state (which
is kept for inspection only): the spec file stored with the parent run is resolved again
(its SHA-256 must match), runs that are not FINISHED are deleted, and a new Tune run trains
only the configurations without a FINISHED run; each Optuna cell's study is rebuilt from its
finished trials. So an interrupted configuration starts again from its beginning, a failed
one is retried, and it works the same for a sweep whose driver was killed or that ran on a
cluster (given the same tracking URI). A sweep whose driver is still alive (it runs on this
host, or its heartbeat is recent: :func:`sweeps.tracking.driver_alive`) is not resumed
unless forced, since a resume deletes the runs in flight.

A sweep id given by the user must have the form of :func:`new_sweep_id`; an unknown one is
a ``ConfigError`` (field ``sweep``) that lists the latest sweeps of the store. Tracking URIs
are printed with their credentials masked (:func:`sweeps.tracking.redact`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from ortho_core.errors import ConfigError, OrthoError
from sweeps import tracking
from sweeps.plan import PastTrial, Plan, build_plan
from sweeps.spec import ResolvedSpec, load_spec, resolve
from sweeps.status import (
    Progress,
    ProgressCallback,
    duration,
    format_line,
    from_mlflow,
    state_of,
)
from sweeps.trial import TrialContext, run_trial

PROJECT_ROOT = Path(__file__).resolve().parent.parent
"""The checkout the sweeps run from (for ``ortho.git_sha``)."""

QUIET_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AIR_NEW_OUTPUT": "0",
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
}
"""No usage-stats notice, no Tune tables, no per-trial CSV/JSON/TensorBoard files (MLflow
has everything), no MLflow telemetry or download bars. Set unless the user set them."""


PENDING_ENV = "TUNE_MAX_PENDING_TRIALS_PG"
"""Tune's setting of how many trials may wait for resources at once, read when ``fit()``
starts; for a searcher of its own Tune stages one trial (``max_concurrent_trials`` when set)."""

MAX_STAGED = 200
"""Most trials staged at once: Tune's own floor for a grid search (its basic variant
generator stages ``max(200, 1.1 * cluster CPUs)``)."""

URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
"""A URI's scheme (``s3://``, ``gs://``, ``file://``, ...), per RFC 3986."""


SWEEP_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{4}")
"""The form of a sweep id (:func:`new_sweep_id`)."""

LISTED_SWEEPS = 5
"""Sweeps an unknown sweep id's error lists."""

AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"
"""Where Ray warns, at every start of a local Ray, that it enabled token authentication."""


class SweepNotFound(OrthoError):
    """``ortho sweep resume|status`` without an id found no sweep to show or resume."""


def new_sweep_id() -> str:
    """``<UTC date>-<time>-<4 hex>``: sortable, and short enough to type."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


@contextmanager
def _loopback_only() -> Iterator[None]:
    """Make Ray's address detection answer 127.0.0.1 while a local node starts.

    ``ray.init(_node_ip_address="127.0.0.1")`` alone is not enough: Ray swaps a loopback
    address for the machine's outbound one, and its servers then listen on every interface.
    Ray skips that lookup where clusters are disabled (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``,
    read when ``ray`` is imported, hence the module constant too); every Ray process then
    binds to 127.0.0.1 (checked with ``ss -ltnp`` in the tests).
    """
    from ray._private import ray_constants

    name = ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR
    saved_env, saved_const = os.environ.get(name), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[name] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved_const
        if saved_env is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved_env


QUIET_LOGGERS = {
    "ray.tune.search.searcher": logging.ERROR,
    "ray.tune.analysis.experiment_analysis": logging.ERROR,
    "ray.tune.execution.tune_controller": logging.CRITICAL,
    "ray.tune.tune": logging.CRITICAL,
    "ray._private.runtime_env": logging.ERROR,
    "ray.dashboard.modules.dashboard_sdk": logging.WARNING,
    "ray.dashboard.modules.job.sdk": logging.WARNING,
    "mlflow.store.db.utils": logging.WARNING,
    "alembic": logging.WARNING,
}
"""Loggers whose messages would drown the progress lines or mislead: Tune's warnings that
the searcher keeps no checkpoint and that trials wrote no result files (results and resume
go through MLflow), its full traceback of every failed trial (the progress callback prints
one line; the traceback is the run's ``traceback.txt``) and its advice to resume with
``Tuner.restore`` (``ortho sweep resume`` is printed instead); Ray's notes while it packs
and uploads a job's working directory; MLflow's notes while it creates a database."""


def quiet_environment() -> None:
    """Set :data:`QUIET_ENV` (before Ray starts, so that its processes inherit it) and the
    levels of :data:`QUIET_LOGGERS`."""
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    for name, level in QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(level)
    data = os.environ.get("ORTHO_DATA_DIR")
    if data:
        os.environ["ORTHO_DATA_DIR"] = str(Path(data).expanduser().resolve())


def start_embedded_ray(num_cpus: int | None = None, num_gpus: int | None = None) -> None:
    """Start Ray in this process, on 127.0.0.1 only, without dashboard or driver logs.

    Ray turns token authentication on for the local Ray it starts (unless ``RAY_AUTH_MODE``
    says otherwise) and warns that it did; that warning (:data:`AUTH_LOGGER`) is silenced
    while it starts, authentication itself is left as Ray sets it, and connections to a
    cluster (:func:`ray_session` with an address) keep every warning.
    """
    import ray

    quiet_environment()
    auth_logger = logging.getLogger(AUTH_LOGGER)
    level = auth_logger.level
    auth_logger.setLevel(logging.ERROR)
    try:
        with _loopback_only():
            ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False,
                     log_to_driver=False, logging_level=logging.WARNING, num_cpus=num_cpus,
                     num_gpus=num_gpus)
    finally:
        auth_logger.setLevel(level)


@contextmanager
def ray_session(address: str | None) -> Iterator[bool]:
    """Ray for a sweep: the running instance if this process already has one, else an
    embedded one (``address`` None) or a connection to ``address``; shut down afterwards
    only if started here. Yields whether Ray is embedded here."""
    import ray

    if ray.is_initialized():
        yield address is None
        return
    if address is None:
        start_embedded_ray()
    else:
        quiet_environment()
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    try:
        yield address is None
    finally:
        ray.shutdown()


def _check_resources(spec: ResolvedSpec) -> None:
    """On the embedded Ray, a trial must fit the machine (a cluster may add nodes)."""
    import ray

    have = ray.cluster_resources()
    for field, want, name in (("resources.cpu", spec.resources.cpu, "CPU"),
                              ("resources.gpu", spec.resources.gpu, "GPU")):
        if want > have.get(name, 0):
            raise ConfigError(field, f"at most the {have.get(name, 0):g} {name}s of this "
                              "machine's Ray", want)


def storage_path(storage: str | None, home: Path) -> str:
    """Where Tune keeps a sweep's state: ``<home>/ray`` by default; ``storage`` unchanged
    when it is a URI (``s3://bucket/ray``, ``gs://...``: Ray opens it with pyarrow's file
    systems, which need the credentials of that store on every node), else the local path
    made absolute (``~`` expanded), so that every trial agrees on it."""
    if not storage:
        return str(home / "ray")
    if URI_SCHEME.match(storage):
        return storage
    return str(Path(storage).expanduser().resolve())


def staged_trials(n_trials: int, max_concurrent: int | None) -> int:
    """How many trials Tune may stage (ask Ray resources for) at once.

    Tune stages one trial at a time for a searcher of its own: the next trial's actor is
    asked for only once the previous trial runs, so a trial shorter than an actor's start
    hands its actor on, a cluster starts its actors one by one and an autoscaler sees one
    trial's demand. Every trial of the plan is staged instead, at most ``max_concurrent``
    and :data:`MAX_STAGED`; the searcher holds back Optuna's points so that they are still
    proposed one at a time (:class:`~sweeps.searcher.SweepSearcher`).
    """
    return max(1, min(n_trials, max_concurrent or n_trials, MAX_STAGED))


@contextmanager
def _staging(n: int) -> Iterator[None]:
    """:data:`PENDING_ENV` set to ``n`` while Tune runs, unless the user set it."""
    if PENDING_ENV in os.environ:
        yield
        return
    os.environ[PENDING_ENV] = str(n)
    try:
        yield
    finally:
        os.environ.pop(PENDING_ENV, None)


def _trial_dirname(trial: Any) -> str:
    return trial.trial_id


def _scheduler(spec: ResolvedSpec) -> Any:
    if spec.scheduler is None:
        return None
    from ray.tune.schedulers import ASHAScheduler

    s = spec.scheduler
    return ASHAScheduler(time_attr="step", metric=s.metric_step, mode=s.mode,
                         grace_period=s.grace_period, reduction_factor=s.reduction_factor,
                         max_t=s.max_t or 10**12)


def _execute(spec: ResolvedSpec, plan: Plan, ref: tracking.SweepRef, uri: str,
             storage: str, run_name: str, max_concurrent: int | None, progress: Progress,
             stream: TextIO) -> bool:
    """Run ``plan`` on Tune; whether it was interrupted before every trial ended."""
    from ray import tune

    from sweeps.searcher import SweepSearcher, TrialStarts

    context = TrialContext(
        tracking_uri=uri, sweep=ref, module=plan.module, metric=spec.metric, mode=spec.mode,
        cpus=spec.resources.cpu,
        step_metric=spec.scheduler.metric_step if spec.scheduler else None)
    trainable = tune.with_resources(tune.with_parameters(run_trial, context=context),
                                    {"cpu": spec.resources.cpu, "gpu": spec.resources.gpu})
    searcher = SweepSearcher(plan, spec.metric, spec.mode, spec.optuna)
    tracker = tracking.tracker(uri)
    callback = ProgressCallback(progress, stream, beat=lambda: tracker.heartbeat(ref))
    tuner = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(
            search_alg=searcher, scheduler=_scheduler(spec), num_samples=plan.n_tune_trials,
            max_concurrent_trials=max_concurrent, reuse_actors=True,
            trial_dirname_creator=_trial_dirname),
        run_config=tune.RunConfig(
            name=run_name, storage_path=storage, verbose=0,
            callbacks=[callback, TrialStarts(searcher)],
            failure_config=tune.FailureConfig(max_failures=spec.max_failures)))
    with _staging(staged_trials(plan.n_tune_trials, max_concurrent)):
        tuner.fit()
    end_stopped_runs(tracker, ref, callback.stopped_early)
    return not searcher.exhausted or callback.trials_ended < searcher.n_suggested


def end_stopped_runs(tracker: tracking.Tracker, ref: tracking.SweepRef,
                     keys: list[str]) -> None:
    """End the runs of configurations whose trials the scheduler stopped: outcome
    ``unsolved``, tag ``ortho.stopped_early``, the metrics CSV rebuilt from MLflow (the trial
    flushed every report before it could be stopped), FINISHED."""
    from ortho_core.reporting import Outcome, Result

    wanted = set(keys)
    for run in tracker.configurations(ref):
        if run.data.tags.get(tracking.TRIAL_KEY) in wanted and run.info.status == "RUNNING":
            rows = tracker.history_rows(run.info.run_id)
            tracker.finish(run.info.run_id, Result(Outcome.UNSOLVED),
                           rows[-1][0] if rows else 0, rows, {tracking.STOPPED_EARLY: "true"})


def _backfill_failures(tracker: tracking.Tracker, ref: tracking.SweepRef,
                       plan: Plan) -> None:
    """Give a ``failed`` run to every grid configuration of ``plan`` that has none after a
    completed Tune run (a trial that died outside the trainer, e.g. a lost actor)."""
    tracked = {r.data.tags.get(tracking.TRIAL_KEY) for r in tracker.configurations(ref)}
    for pack in plan.packs:
        for m in pack:
            if m.key not in tracked:
                claim = tracker.claim(ref, m.key, m.params, {tracking.CELL: str(m.cell)})
                tracker.fail(claim.run_id, "The trial ended without training this "
                             "configuration (its Ray actor failed); see the Ray logs.")


def _run(spec: ResolvedSpec, plan: Plan, ref: tracking.SweepRef, tracker: tracking.Tracker,
         home: Path, storage: str | None, run_name: str, max_concurrent: int | None,
         progress: Progress, stream: TextIO) -> Progress:
    """Run what ``plan`` leaves, end the parent run, and print the last line."""
    store = storage_path(storage, home)
    interrupted = False
    start = time.monotonic()
    if plan.n_tune_trials:
        interrupted = _execute(spec, plan, ref, tracker.uri, store, run_name, max_concurrent,
                               progress, stream)
    if interrupted:
        tracker.mark_killed(ref)
    else:
        _backfill_failures(tracker, ref, plan)
    record = tracker.find_sweep(ref.sweep_id)
    assert record is not None
    final = from_mlflow(tracker, record)
    final.elapsed = time.monotonic() - start
    final.running = 0
    final.state = "interrupted" if interrupted else "finished"
    tracker.end_sweep(ref, "KILLED" if interrupted else "FINISHED",
                      {"configs_done": final.done, "configs_failed": final.failed})
    print(format_line(final), file=stream, flush=True)
    if interrupted or final.failed:
        print(f"resume with: ortho sweep resume {ref.sweep_id}", file=stream, flush=True)
    return final


def run_sweep(spec_ref: str, profile: str, *, address: str | None = None,
              tracking_uri: str | None = None, home: str | os.PathLike[str] | None = None,
              storage: str | None = None, max_concurrent: int | None = None,
              stream: TextIO | None = None) -> Progress:
    """Run the sweep ``spec_ref`` (a shipped spec's name or a YAML path) with ``profile``.

    Everything the user can get wrong (the spec, the profile, a cell's values) raises
    ``ConfigError`` before Ray starts or MLflow is touched. Prints the sweep id first and
    one progress line at a time to ``stream`` (default stdout); returns the final
    :class:`Progress` (``state`` finished or interrupted).
    """
    stream = stream or sys.stdout
    spec = resolve(load_spec(spec_ref), profile)
    plan = build_plan(spec)
    home_path = tracking.home_dir(home)
    uri = tracking.tracking_uri(tracking_uri, home_path)
    with ray_session(address) as embedded:
        if embedded:
            _check_resources(spec)
        tracker = tracking.tracker(uri)
        sweep_id = new_sweep_id()
        source = Path(spec.source)
        tags = {tracking.SPEC: spec.name, tracking.PROFILE: profile,
                tracking.SPEC_SHA256: spec.sha256, tracking.GIT_SHA: tracking.git_sha(PROJECT_ROOT),
                tracking.N_CONFIGS: str(plan.n_configs), tracking.METRIC: spec.metric,
                tracking.MODE: spec.mode, "mlflow.note.content": spec.description}
        texts = {tracking.RESOLVED_ARTIFACT: spec.text,
                 f"{tracking.SPEC_ARTIFACT_DIR}/{source.name}": source.read_text()}
        ref = tracker.start_sweep(tracker.experiment_id(spec.name), sweep_id, tags, texts)
        print(f"sweep {sweep_id}: {spec.name}/{profile}, {plan.n_configs} configurations in "
              f"{plan.n_tune_trials} trials; tracking {tracking.redact(uri)}", file=stream,
              flush=True)
        progress = Progress(sweep_id=sweep_id, label=f"{spec.name}/{profile}",
                            metric=spec.metric, mode=spec.mode, total=plan.n_configs)
        return _run(spec, plan, ref, tracker, home_path, storage, sweep_id, max_concurrent,
                    progress, stream)


def _open_store(uri: str, sweep_id: str | None) -> tracking.Tracker:
    """The tracker of ``uri``. An embedded store that does not exist yet is not created:
    ``ConfigError`` when a sweep id was given, else :class:`SweepNotFound`."""
    db = tracking.sqlite_path(uri)
    if db is not None and not db.exists():
        if sweep_id is not None:
            raise ConfigError("sweep", f"the id of a sweep in {tracking.redact(uri)} (it holds "
                              "no sweeps yet)", sweep_id)
        raise SweepNotFound(f"no sweeps yet: {db} does not exist")
    return tracking.tracker(uri)


def _find(tracker: tracking.Tracker, sweep_id: str | None,
          unfinished: bool = False) -> tracking.SweepRecord | None:
    """Sweep ``sweep_id``, or the latest one (the latest not FINISHED when ``unfinished``).
    A ``sweep_id`` that does not have the form of :func:`new_sweep_id` (it is never put into
    a search) or that is unknown is a ``ConfigError`` listing the latest sweeps."""
    if sweep_id is None:
        return tracker.find_sweep(unfinished=unfinished)
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


def _refuse_alive(record: tracking.SweepRecord) -> None:
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


def resume_sweep(sweep_id: str | None = None, *, address: str | None = None,
                 tracking_uri: str | None = None, home: str | os.PathLike[str] | None = None,
                 storage: str | None = None, max_concurrent: int | None = None,
                 force: bool = False, stream: TextIO | None = None) -> Progress:
    """Continue sweep ``sweep_id`` (default: the latest one that did not finish).

    Configurations with a FINISHED run are not trained again; every other run of the sweep
    is deleted and its configuration trained anew, so each configuration ends with one run.
    A sweep whose driver is still alive is refused (``ConfigError``, field ``sweep``) unless
    ``force``.
    """
    stream = stream or sys.stdout
    home_path = tracking.home_dir(home)
    uri = tracking.tracking_uri(tracking_uri, home_path)
    tracker = _open_store(uri, sweep_id)
    record = _find(tracker, sweep_id, unfinished=True)
    if record is None:
        raise SweepNotFound(f"no unfinished sweep in {tracking.redact(uri)}")
    if not force:
        _refuse_alive(record)
    with tempfile.TemporaryDirectory() as tmp:
        spec = resolve(load_spec(str(tracker.download_spec(record.ref, Path(tmp)))),
                       record.profile)
    if spec.sha256 != record.spec_sha256:
        raise ConfigError("spec", f"the spec as sweep {record.ref.sweep_id} resolved it "
                          f"(sha256 {record.spec_sha256[:12]}); the code now resolves it "
                          "differently, so start a new sweep", spec.sha256[:12])
    tracker.discard_unfinished(record.ref)
    finished: dict[str, Any] = {}
    history: dict[int, list[PastTrial]] = {}
    for run in tracker.configurations(record.ref):
        tags = run.data.tags
        finished[tags[tracking.TRIAL_KEY]] = run
        if tracking.OPTUNA_PARAMS in tags:
            result = tracking.stored_result(run)
            history.setdefault(int(tags[tracking.CELL]), []).append(PastTrial(
                optuna=json.loads(tags[tracking.OPTUNA_PARAMS]),
                value=tracking.metric_value(result.summary, spec.metric)))
    plan = build_plan(spec, finished, history)
    progress = Progress(sweep_id=record.ref.sweep_id, label=f"{spec.name}/{spec.profile}",
                        metric=spec.metric, mode=spec.mode, total=plan.n_configs,
                        done=len(finished))
    for run in finished.values():
        progress.offer(tracking.metric_value(tracking.stored_result(run).summary, spec.metric))
    with ray_session(address) as embedded:
        if embedded:
            _check_resources(spec)
        tracker.reopen_sweep(record.ref)
        print(f"sweep {record.ref.sweep_id}: resuming {spec.name}/{spec.profile}, "
              f"{len(finished)} of {plan.n_configs} configurations done, {plan.n_todo} to run "
              f"in {plan.n_tune_trials} trials; tracking {tracking.redact(uri)}",
              file=stream, flush=True)
        run_name = f"{record.ref.sweep_id}-resume-{time.strftime('%H%M%S', time.gmtime())}"
        return _run(spec, plan, record.ref, tracker, home_path, storage, run_name,
                    max_concurrent, progress, stream)


def sweep_status(sweep_id: str | None = None, *, tracking_uri: str | None = None,
                 home: str | os.PathLike[str] | None = None) -> Progress:
    """The progress of sweep ``sweep_id`` (default: the latest) as MLflow holds it."""
    uri = tracking.tracking_uri(tracking_uri, tracking.home_dir(home))
    tracker = _open_store(uri, sweep_id)
    record = _find(tracker, sweep_id)
    if record is None:
        raise SweepNotFound(f"no sweep in {tracking.redact(uri)}")
    return from_mlflow(tracker, record)
