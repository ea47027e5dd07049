"""One Tune run of a sweep's plan: the trainable, the searcher, the scheduler, how many trials
are staged at once, where Tune keeps its state, and the runs left to end afterwards.

Each Tune trial trains one pack (:mod:`sweeps.plan`) with the spec's resources (fractional
GPUs allowed; ``device: auto`` becomes ``cuda`` in a trial that got a GPU), handed out by one
searcher for the whole sweep (:mod:`sweeps.searcher`: grid packs, then an Optuna study per
cell); an ASHA scheduler stops unpromising trials when the spec asks. Actors are reused
between trials, so a trial costs no fresh process and no re-import of torch. Tune asks Ray for
the resources of every grid trial at once (:func:`staged_trials`), so that a cluster starts
its actors together, on as many nodes as they need, and an autoscaler sees the whole demand;
Optuna's packs are staged one at a time (:mod:`sweeps.searcher`). A trial that raises is
retried up to the spec's ``max_failures`` and the sweep goes on. Tune's own output is
silenced; :class:`~sweeps.tune_progress.ProgressCallback` shows the progress instead.

Ray is imported only when a run starts (:func:`execute`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ortho_core.errors import ConfigError
from sweeps import tracking
from sweeps.plan import Member, Plan
from sweeps.ray_session import trial_environment
from sweeps.spec import ResolvedSpec
from sweeps.status import Progress
from sweeps.trial import TrialContext, member_tags, run_trial
from sweeps.writer import StartingWriter, drain_writer, launch_writer

if TYPE_CHECKING:
    from sweeps.studies import Studies

PENDING_ENV = "TUNE_MAX_PENDING_TRIALS_PG"
"""Tune's setting of how many trials may wait for resources at once, read when ``fit()``
starts; for a searcher of its own Tune stages one trial (``max_concurrent_trials`` when set)."""

MAX_STAGED = 200
"""Most trials staged at once: Tune's own floor for a grid search (its basic variant
generator stages ``max(200, 1.1 * cluster CPUs)``)."""

URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
"""A URI's scheme (``s3://``, ``gs://``, ``file://``, ...), per RFC 3986."""


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


STORAGE_TIMEOUT_S = 20.0
"""Seconds :func:`check_storage` waits for pyarrow to open an object store (an S3 URI asks
the bucket's region of the network; a host that cannot be resolved answers in about 7 s)."""
SCHEME_TIMEOUT_S = 2.0
"""Seconds it waits where only the URI's form is checked (a cluster's storage): pyarrow
refuses an unknown scheme or a malformed URI at once, before any network."""


def check_storage(storage: str | None, home: Path, here: bool = True) -> None:
    """Refuse, before Ray starts, a ``storage`` (:func:`storage_path`) Tune could not write:
    ``ConfigError`` naming ``storage``.

    The driver is the only writer of Tune's state, on the embedded Ray and on a cluster it
    joins (``--address``; cluster/README.md: Tune's storage need not be shared), so with
    ``here`` (this process is the driver) the check is complete: a local path (``HOME/ray``
    by default) must be a folder this process can make and write in
    (:func:`sweeps.contract.unwritable`); a URI must be one pyarrow opens here
    (``pyarrow.fs.FileSystem.from_uri``, as Tune does) within :data:`STORAGE_TIMEOUT_S`
    (an object store this machine cannot reach would fail the sweep once Ray runs). Where
    Tune runs on the cluster (through Ray Client, ``ray://``, or a job ``ortho sweep
    submit`` starts), which sees other disks and may reach stores this machine does not,
    only a URI's form is checked: an unknown scheme, a malformed URI."""
    from sweeps.contract import unwritable

    path = storage_path(storage, home)
    if not URI_SCHEME.match(path):
        why = unwritable(path) if here else None
        if why is not None:
            raise ConfigError("storage", "a folder this user can write in or a path where "
                              "one can be made, or an object store's URI such as "
                              f"s3://bucket/ray ({why})", storage or path)
        return
    timeout = STORAGE_TIMEOUT_S if here else SCHEME_TIMEOUT_S
    opened = _opened(path, timeout)
    if path.lower().startswith("file://"):
        if not isinstance(opened, tuple):
            raise ConfigError("storage", f"a file URI of an absolute path "
                              f"({_why(opened, timeout)})", storage)
        why = unwritable(opened[1]) if here else None
        if why is not None:
            raise ConfigError("storage", f"a folder this user can write in or a path where "
                              f"one can be made ({why})", storage)
    elif isinstance(opened, ValueError) or (here and not isinstance(opened, tuple)):
        raise ConfigError("storage", f"a folder, or the URI of an object store pyarrow can "
                          f"open {'here' if here else 'there'}, such as s3://bucket/ray or "
                          f"gs://bucket/ray ({_why(opened, timeout)})", storage)


def _opened(uri: str, timeout: float) -> tuple[Any, str] | Exception | None:
    """``pyarrow.fs.FileSystem.from_uri(uri)`` (file system, path), the exception it raised,
    or None when it did not answer within ``timeout`` seconds (it is left to finish in a
    thread of its own: it cannot be interrupted)."""
    import threading

    from pyarrow import fs

    answer: list[Any] = []

    def open_it() -> None:
        try:
            answer.append(fs.FileSystem.from_uri(uri))
        except Exception as err:  # pyarrow's ArrowInvalid is a ValueError; others OSError
            answer.append(err)

    opener = threading.Thread(target=open_it, name="ortho-storage-check", daemon=True)
    opener.start()
    opener.join(timeout)
    return answer[0] if answer else None


def _why(answer: Exception | None, timeout: float) -> str:
    """What pyarrow said (its first line), or that it said nothing within ``timeout``."""
    if answer is None:
        return f"no answer within {timeout:g} s"
    text = next((line.strip() for line in str(answer).splitlines() if line.strip()),
                type(answer).__name__)
    return text[0].lower() + text[1:]


def staged_trials(n_trials: int, max_concurrent: int | None) -> int:
    """How many trials Tune may stage (ask Ray resources for) at once.

    Tune stages one trial at a time for a searcher of its own: the next trial's actor is
    asked for only once the previous trial runs, so a trial shorter than an actor's start
    hands its actor on, a cluster starts its actors one by one and an autoscaler sees one
    trial's demand. Every trial of the plan is staged instead, at most ``max_concurrent``
    and :data:`MAX_STAGED`; the searcher holds back Optuna's packs so that they are still
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


@dataclass
class FitEnd:
    """How a Tune run of a plan ended."""

    interrupted: bool
    """Interrupted before every trial ended, with something left to train
    (:func:`all_ended`)."""
    errored: list[Member] = field(default_factory=list)
    """The members of Optuna packs whose trials errored, retries spent
    (:attr:`sweeps.searcher.SweepSearcher.errored`): those with no run are given a failed one
    (:func:`backfill_failures`), as grid members are."""


def execute(spec: ResolvedSpec, plan: Plan, ref: tracking.SweepRef, uri: str,
            storage: str, run_name: str, max_concurrent: int | None, progress: Progress,
            stream: TextIO, run_tags: Mapping[str, str], studies: Studies | None,
            begun: float | None = None, trial_env: Mapping[str, str] | None = None) -> FitEnd:
    """Run ``plan`` on Tune, on the Ray this process is connected to, the trials tracking
    through a writer on this node (:mod:`sweeps.writer`) with ``run_tags`` on every run and
    the Optuna cells searched by ``studies``, the progress's time elapsed counted from
    ``begun`` (the command's start, a ``time.monotonic()``), ``trial_env`` in every trial's
    runtime environment (:func:`sweeps.ray_session.trial_environment`); how it ended."""
    import ray

    writer = launch_writer(uri, f"ortho-writer-{run_name}")
    try:
        return _fit(spec, plan, ref, uri, storage, run_name, max_concurrent, progress, stream,
                    TrialContext(writer=writer.actor, sweep=ref, module=plan.module,
                                 metric=spec.metric, mode=spec.mode, cpus=spec.resources.cpu,
                                 step_metric=spec.scheduler.metric_step if spec.scheduler
                                 else None, run_tags=dict(run_tags)), studies,
                    writer, begun, trial_env or {})
    finally:
        ray.kill(writer.actor)


def _fit(spec: ResolvedSpec, plan: Plan, ref: tracking.SweepRef, uri: str, storage: str,
         run_name: str, max_concurrent: int | None, progress: Progress, stream: TextIO,
         context: TrialContext, studies: Studies | None,
         writer: StartingWriter, begun: float | None, trial_env: Mapping[str, str]) -> FitEnd:
    """:func:`execute` once its writer is launched: Tune sets up and starts the trials while
    the writer starts, whose claims wait for it; its errors end the fit
    (:class:`~sweeps.tune_progress.WriterStarted`) or, were it over first, raise after it."""
    from ray import tune

    from sweeps.searcher import SweepSearcher, TrialStarts
    from sweeps.tune_progress import InFlightGauge, ProgressCallback, WriterStarted

    trainable = tune.with_resources(tune.with_parameters(run_trial, context=context),
                                    {"cpu": spec.resources.cpu, "gpu": spec.resources.gpu})
    searcher = SweepSearcher(plan, spec.metric, spec.mode, studies)
    tracker = tracking.tracker(uri)
    # the heartbeat goes through the writer: an outage must not stall Tune's loop
    before = progress.repeats
    callback = ProgressCallback(progress, stream,
                                beat=lambda: context.writer.heartbeat.remote(ref),
                                gauge=InFlightGauge(context.writer, ref),
                                repeats=lambda: before + searcher.n_repeats, start=begun)
    tuner = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(
            search_alg=searcher, scheduler=_scheduler(spec), num_samples=plan.n_tune_trials,
            max_concurrent_trials=max_concurrent, reuse_actors=True,
            trial_dirname_creator=_trial_dirname),
        run_config=tune.RunConfig(
            name=run_name, storage_path=storage, verbose=0,
            callbacks=[callback, TrialStarts(searcher), WriterStarted(writer)],
            failure_config=tune.FailureConfig(max_failures=spec.max_failures)))
    try:
        with (_staging(staged_trials(plan.n_tune_trials, max_concurrent)),
              trial_environment(trial_env)):
            tuner.fit()
    finally:
        callback.close()
    writer.ready()
    drain_writer(context.writer, stream)  # what an outage held reaches the store first
    end_stopped_runs(tracker, ref, callback.stopped_early)
    if searcher.exhausted and callback.trials_ended >= searcher.n_suggested:
        return FitEnd(False, searcher.errored)
    return FitEnd(not all_ended(tracker, ref, plan.n_configs - before - searcher.n_repeats),
                  searcher.errored)


def all_ended(tracker: tracking.Tracker, ref: tracking.SweepRef, n_configs: int) -> bool:
    """Whether each of the sweep's ``n_configs`` configurations has a run that ended
    (FINISHED, or FAILED as the sweep's failures are). Tune was interrupted (Ctrl-C) before it
    had counted every trial's end; if the last trial had ended its runs by then, the sweep
    ends as it would have without the Ctrl-C, not as interrupted."""
    ended = [r for r in tracker.states(ref) if r.status in ("FINISHED", "FAILED")]
    return len(ended) >= n_configs


def end_stopped_runs(tracker: tracking.Tracker, ref: tracking.SweepRef,
                     keys: list[str]) -> None:
    """End the runs of configurations whose trials the scheduler stopped: outcome
    ``unsolved``, tag ``ortho.stopped_early``, the metrics CSV rebuilt from MLflow (the trial
    flushed every report before it could be stopped), FINISHED."""
    from ortho_core.reporting import Outcome, Result

    wanted = set(keys)
    if not wanted:
        return  # reading a large sweep's runs takes seconds (1.5 s for 896 on SQLite)
    for run in tracker.configurations(ref):
        if run.data.tags.get(tracking.TRIAL_KEY) in wanted and run.info.status == "RUNNING":
            rows = tracker.history_rows(run.info.run_id)
            tracker.finish(run.info.run_id, Result(Outcome.UNSOLVED),
                           rows[-1][0] if rows else 0, rows, {tracking.STOPPED_EARLY: "true"})


LOST = ("The trial ended without ending this run: its Ray actor or node died while it "
        "trained this configuration (attempt {attempt}), and the spec's max_failures allowed "
        "no further retry; see the Ray logs. `ortho sweep resume` trains it again.")
"""The ``traceback.txt`` of a run whose trial was lost (:func:`backfill_failures`)."""


def backfill_failures(tracker: tracking.Tracker, ref: tracking.SweepRef, plan: Plan,
                      run_tags: Mapping[str, str], runs: list[tracking.TaggedRun],
                      errored: Sequence[Member] = ()) -> bool:
    """After a completed Tune run, when no trial runs any more: end as ``failed`` every run
    still RUNNING (its trial died outside the trainer, with its actor or node, and was not
    retried: :data:`LOST`), and give a ``failed`` run (tagged ``run_tags`` and as its trial
    would have tagged it, :func:`sweeps.trial.member_tags`) to every grid configuration of
    ``plan`` and every member of ``errored`` (:attr:`FitEnd.errored`) that has none (a trial
    that died before it claimed it). ``runs``: the sweep's configuration runs as read after
    the Tune run (:meth:`~sweeps.tracking.Tracker.states`); whether it wrote any run (else
    ``runs`` still hold what MLflow holds)."""
    wrote = False
    for run in runs:
        if run.status == "RUNNING":
            tracker.fail(run.run_id, LOST.format(
                attempt=run.tags.get(tracking.ATTEMPT, "1")))
            wrote = True
    tracked = {r.tags.get(tracking.TRIAL_KEY) for r in runs}
    for m in [*(m for pack in plan.packs for m in pack), *errored]:
        if m.key not in tracked:
            tracked.add(m.key)
            claim = tracker.claim(ref, m.key, m.params, member_tags(m.to_dict(), run_tags))
            tracker.fail(claim.run_id, "The trial ended without training this "
                         "configuration (its Ray actor failed); see the Ray logs.")
            wrote = True
    return wrote
