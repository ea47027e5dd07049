"""Run and resume a sweep on Ray Tune, tracked in MLflow (DESIGN.md "The embedded default,
and the cluster").

Embedded default (no address): Ray starts with this process, every Ray process listening on
127.0.0.1 only (:mod:`sweeps.ray_session`); MLflow tracks into ``<home>/mlflow.db`` (SQLite)
with artifacts in ``<home>/artifacts/``; Tune writes its state under ``<home>/ray/``
(``--storage`` moves it: a local path, or an object store's URI such as ``s3://bucket/ray``,
see :func:`sweeps.tune_run.storage_path`). ``home`` is ``--home``, else ``$ORTHO_HOME``, else
``./ortho-runs``; it and the tracking URI are made absolute before any trial starts. With an
``address`` the driver joins a running cluster (``auto`` inside a Ray job): its nodes need
this package, as the cluster image has it, or use ``ortho sweep submit``, which ships the
checkout. ``tracking_uri`` (or ``$ORTHO_TRACKING_URI``) names a tracking server instead. Only
the driver's node writes the store: trials on any node track through the sweep's writer
there (:mod:`sweeps.writer`), so the embedded default works on a cluster too, and Tune's
state, which only the driver writes, need not be on shared storage. A Ray Client address
(``ray://``) with a store on this machine's disk, or for a sweep with Optuna cells, is
refused (:func:`refuse_ray_client`). Every run records the code's provenance
(:mod:`sweeps.provenance`). A spec's ``pack_size: auto`` is measured once Ray is up, before
planning, and recorded on the parent run (:mod:`sweeps.pack_size`). How a plan becomes Tune
trials is :mod:`sweeps.tune_run`.

The last line gives the figure the project optimises, configurations finished per hour of
the command's wall time (Ray's start included), which the parent run keeps
(:data:`~sweeps.contract.CONFIGS_PER_HOUR`; its span starts when the command did).

Resume (:func:`resume_sweep`) reads the sweep back from MLflow, not from Tune's state (which
is kept for inspection only): the spec file stored with the parent run is resolved again
(its SHA-256 must match; ``pack_size: auto`` takes the pack size the parent run records,
never measured again, so the packs are at most the first run's K), runs that are not FINISHED
are deleted, and a new Tune run trains only the configurations without a FINISHED run; each
Optuna cell's study is loaded from its Optuna storage and continued (:mod:`sweeps.studies`:
``--optuna-storage``, else the storage the sweep recorded:
:func:`~sweeps.studies.sweep_storage`). Every check that can refuse a resume (the cluster,
the data, the studies, the resources) comes before any run is deleted. So an interrupted
configuration starts again from its beginning, a failed one is retried, and it works the same
for a sweep whose driver was killed or that ran on a cluster (given the same tracking URI). A
sweep whose driver is still alive (it runs on this host, or its heartbeat is recent:
:func:`sweeps.tracking.driver_alive`) is not resumed unless forced, since a resume deletes the
runs in flight. Finding the sweep, and ``ortho sweep status``, are :mod:`sweeps.lookup` (which
imports no Ray).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from ortho_core.errors import ConfigError
from sweeps import contract, naming, pack_size, preflight, provenance, tracking
from sweeps.lookup import SweepNotFound, find, new_sweep_id, open_store, refuse_alive
from sweeps.plan import Plan, build_plan, fill_slots
from sweeps.ray_session import (
    beside_ray_start,
    check_address,
    check_resources,
    cluster_address,
    data_dir_variables,
    machine_resources,
    quiet_environment,
    ray_session,
    trial_slots,
    unplaceable,
)
from sweeps.spec import ResolvedSpec, Spec, load_spec, resolve
from sweeps.spec.profiles import Effective
from sweeps.status import Progress, count, format_line, from_mlflow, studies_line
from sweeps.tracking.liveness import check_server
from sweeps.tune_run import FitEnd, backfill_failures, check_storage, execute, storage_path

__all__ = ["PROJECT_ROOT", "resume_sweep", "run_sweep"]

PROJECT_ROOT = Path(__file__).resolve().parent.parent
"""The code the sweeps run (its provenance: :mod:`sweeps.provenance`)."""


def is_ray_client(address: str | None) -> bool:
    """Whether ``address`` is a Ray Client address (``ray://``), through which Tune runs on
    the cluster, not in this process."""
    return bool(address and address.startswith("ray://"))


def refuse_ray_client(address: str | None, uri: str, spec: ResolvedSpec) -> None:
    """Refuse a Ray Client address (``ray://``) where the sweep cannot run through one
    (``ConfigError`` naming ``address``):

    - with a store on this machine's disk: this process would write the sweep here while its
      writer writes on the cluster's head;
    - with Optuna cells: through Ray Client, Tune runs on the cluster from a pickled copy of
      the sweep's searcher, and a searcher pickles without its studies (their storage URL
      may hold a password, and Tune writes the copy to disk:
      :meth:`sweeps.searcher.SweepSearcher.__getstate__`), so no Optuna point would train;
    - with an early-stopping scheduler: the trials it stops are known to the progress
      callback, which runs there too from a copy, so their runs would stay RUNNING here,
      the sweep would end interrupted, and every resume would train them again.
    """
    if not is_ray_client(address):
        return
    if tracking.sqlite_path(uri) is not None:
        raise ConfigError("address", "a cluster address the driver runs on (`auto` on the "
                          "head), or `ortho sweep submit`; with a Ray Client connection pass "
                          "--tracking-uri of a tracking server both this machine and the head "
                          "reach", address)
    if any(cell.optuna_space for cell in spec.cells()):
        raise ConfigError("address", "a cluster address the driver runs on (`auto` on the "
                          "head), or `ortho sweep submit`, for a sweep with Optuna cells: "
                          "through a Ray Client connection Tune searches on the cluster from "
                          "a copy of the sweep's searcher, which holds no study", address)
    if spec.scheduler is not None:
        raise ConfigError("address", "a cluster address the driver runs on (`auto` on the "
                          "head), or `ortho sweep submit`, for a sweep with a scheduler: "
                          "through a Ray Client connection the trials it stops early are "
                          "known only on the cluster, so their runs could not be ended",
                          address)


def _run(spec: ResolvedSpec, plan: Plan, ref: tracking.SweepRef, tracker: tracking.Tracker,
         home: Path, storage: str | None, run_name: str, max_concurrent: int | None,
         progress: Progress, stream: TextIO, run_tags: dict[str, str],
         studies: Any, begun: float, again: list[str],
         trial_env: dict[str, str]) -> Progress:
    """Run what ``plan`` leaves (``run_tags`` on every run it creates; the Optuna cells
    searched by ``studies``, a :class:`sweeps.studies.Studies`; ``trial_env`` in every
    trial's runtime environment), end the parent run with this
    run's configurations finished per hour (since ``begun``, a ``time.monotonic()``, not
    counting those ``progress`` holds as done already), and print the last line, and the
    command ``again`` (:func:`resume_command`) when something is left to train."""
    finished_before = progress.done
    store = storage_path(storage, home)
    ended = FitEnd(interrupted=False)
    if plan.n_tune_trials:
        try:
            ended = execute(spec, plan, ref, tracker.uri, store, run_name, max_concurrent,
                            progress, stream, run_tags, studies, begun, trial_env)
        except KeyboardInterrupt:  # before Tune's handler was in place, or a second Ctrl-C
            ended = FitEnd(interrupted=True)
        except Exception:  # Ray or the store failing under the sweep (a disk that filled)
            _end_killed(tracker, ref)
            print(f"resume with: {shlex.join(again)}", file=stream, flush=True)
            raise
    interrupted = ended.interrupted
    runs = tracker.states(ref)
    if interrupted:
        tracker.mark_killed(runs)
    elif backfill_failures(tracker, ref, plan, run_tags, runs, ended.errored):
        runs = tracker.states(ref)
    if studies is not None:
        # Also when not interrupted: the searcher leaves the members of a pack that errored
        # to this, and a pack may end its runs after a Ctrl-C, before its actor is ended,
        # when Tune, stopping, no longer tells the searcher.
        studies.end_running(finished_values(runs, spec.metric),
                            failed_keys(runs) | {m.key for m in ended.errored})
    record = tracker.find_sweep(ref.sweep_id)
    assert record is not None
    final = from_mlflow(tracker, record, runs)
    final.elapsed = time.monotonic() - begun
    final.running = 0
    final.state = "interrupted" if interrupted else "finished"
    if studies is not None:
        final.repeats = studies.repeats()
    finished = max(0, final.done - final.failed - finished_before)
    final.per_hour = finished / final.elapsed * 3600  # 0 too: an earlier run's must not stay
    summary = {"configs_done": final.done, "configs_failed": final.failed,
               contract.RUN_SECONDS: final.elapsed, contract.CONFIGS_PER_HOUR: final.per_hour}
    if studies is not None:
        summary[contract.OPTUNA_REPEATS] = final.repeats
    tracker.end_sweep(ref, "KILLED" if interrupted else "FINISHED", summary)
    print(format_line(final), file=stream, flush=True)
    if interrupted or final.failed:
        print(f"resume with: {shlex.join(again)}", file=stream, flush=True)
    return final


def _end_killed(tracker: tracking.Tracker, ref: tracking.SweepRef) -> None:
    """End the runs a failing sweep leaves RUNNING, and its parent, KILLED, as an interrupt
    ends them, as far as the store still takes writes (a resume replaces them either way)."""
    with contextlib.suppress(Exception):
        tracker.mark_killed(tracker.states(ref))
        tracker.end_sweep(ref, "KILLED", {})


def finished_values(runs: list[tracking.TaggedRun], metric: str) -> dict[str, float | None]:
    """``metric`` of every FINISHED run of ``runs`` (a sweep's configuration runs,
    :meth:`~sweeps.tracking.Tracker.states`), by trial key (None: not finite)."""
    return {run.tags[tracking.TRIAL_KEY]: tracking.metric_value(
        tracking.stored_result(run.tags).summary, metric)
        for run in runs if run.status == "FINISHED"}


def failed_keys(runs: list[tracking.TaggedRun]) -> set[str]:
    """The trial keys of the FAILED runs of ``runs``."""
    return {run.tags[tracking.TRIAL_KEY] for run in runs if run.status == "FAILED"}


def resume_command(sweep_id: str, home: Path, uri: str, address: str | None,
                   optuna_storage: str | None, data_dir: str | None = None) -> list[str]:
    """``ortho sweep resume ID`` with the options that find this sweep again from this
    folder: its store where it is not the default (:func:`sweeps.contract.store_options`),
    its cluster, and the Optuna storage (credentials masked) and datasets' folder given
    explicitly."""
    command = ["ortho", "sweep", "resume", sweep_id, *contract.store_options(home, uri)]
    if address:
        command += ["--address", tracking.redact(address)]
    if optuna_storage:
        command += ["--optuna-storage", tracking.redact(optuna_storage)]
    if data_dir:
        command += ["--data-dir", data_dir]
    return command


def _fits_this_machine(loaded: Spec, profile: str) -> None:
    """A trial's resources beyond the Ray a sweep starts here
    (:func:`sweeps.ray_session.machine_resources`): a ``SpecError`` at the line that sets
    them, before Ray's seconds of start (the check once Ray is up,
    :func:`sweeps.ray_session.check_resources`, names no line)."""
    resources, path = Effective.of(loaded, profile).settings["resources"]
    have = machine_resources()
    for key, name in (("cpu", "CPU"), ("gpu", "GPU")):
        want = getattr(resources, key)
        if want > have[name]:
            raise loaded.source.error((*path, key), f"at most the {have[name]:g} {name}s of "
                                      "this machine, where the sweep starts its Ray (or "
                                      "--address of a cluster that has them)", want)


def _check_resources(embedded: bool, spec: ResolvedSpec, stream: TextIO) -> None:
    """A trial's resources against the Ray just joined: more than the embedded Ray has is
    bad input (:func:`sweeps.ray_session.check_resources`); a cluster where no node has them
    may yet gain one (an autoscaler's), so its sweep starts with a warning saying why nothing
    runs (:func:`sweeps.ray_session.unplaceable`)."""
    if embedded:
        check_resources(spec.resources.cpu, spec.resources.gpu)
    elif (why := unplaceable(spec.resources.cpu, spec.resources.gpu)) is not None:
        print(f"warning: {why}", file=stream, flush=True)


def _searches_optuna(spec: ResolvedSpec) -> bool:
    """Whether a cell of ``spec`` is searched by Optuna."""
    return any(cell.optuna_space for cell in spec.cells())


def check_study_storage(spec: ResolvedSpec, explicit: str | None) -> None:
    """``ConfigError`` (field ``optuna_storage``) for ``--optuna-storage`` given for a spec
    whose cells all search a grid: it keeps no studies, and a flag ignored in silence hides
    that the spec is not the one the user meant. ``$ORTHO_OPTUNA_STORAGE``, set for every
    sweep of a cluster, is not ``explicit``."""
    if explicit and not _searches_optuna(spec):
        raise ConfigError("optuna_storage", f"no Optuna storage for {spec.name} (its cells "
                          "search a grid only: it keeps no studies)", tracking.redact(explicit))


def _study_url(spec: ResolvedSpec, explicit: str | None, uri: str) -> str | None:
    """The Optuna storage of a new sweep with Optuna cells
    (:func:`sweeps.studies.storage_url`), opened once to see that it opens, else None."""
    if not _searches_optuna(spec):
        return None
    from sweeps.studies import open_storage, storage_url

    url = storage_url(explicit, uri)
    open_storage(url)  # a storage that cannot be opened: refused before Ray starts
    return url


def _where(uri: str, study_url: str | None, sweep_id: str) -> str:
    """Where a sweep tracks (and keeps its Optuna studies), credentials masked."""
    where = f"tracking {tracking.redact(uri)}"
    if study_url is None:
        return where
    return f"{where}; Optuna studies in {studies_line(tracking.redact(study_url), sweep_id)}"


def run_sweep(spec_ref: str, profile: str, *, address: str | None = None,
              tracking_uri: str | None = None, home: str | os.PathLike[str] | None = None,
              storage: str | None = None, max_concurrent: int | None = None,
              optuna_storage: str | None = None, data_dir: str | None = None,
              stream: TextIO | None = None) -> Progress:
    """Run the sweep ``spec_ref`` (a shipped spec's name or a YAML path) with ``profile``,
    its trials reading the datasets in ``data_dir`` where given
    (:func:`sweeps.ray_session.data_dir_variables`).

    Everything the user can get wrong (the spec, the profile, a cell's values, a sweep with
    Optuna cells and no Optuna storage: :func:`sweeps.studies.storage_url`; on the embedded
    Ray, a missing or corrupt dataset: :mod:`sweeps.preflight`; a home that cannot be made
    or written: :func:`sweeps.contract.check_places`; a ``storage`` Tune could not write:
    :func:`sweeps.tune_run.check_storage`) raises ``ConfigError`` (or ``LocationError``)
    before Ray starts or MLflow is touched. Prints the sweep id first and
    the live progress to ``stream`` (default stdout: a bar on a terminal, else one line at a
    time); returns the final :class:`Progress` (``state`` finished or interrupted).
    """
    begun, begun_at = time.monotonic(), time.time()
    stream = stream or sys.stdout
    loaded = load_spec(spec_ref)
    spec = resolve(loaded, profile)
    check_study_storage(spec, optuna_storage)
    if address is None:
        _fits_this_machine(loaded, profile)
    home_path = tracking.home_dir(home)
    uri = tracking.tracking_uri(tracking_uri, home_path)
    contract.check_places(home_path, uri)
    seen = cluster_address(address)
    refuse_ray_client(seen, uri, spec)
    check_storage(storage, home_path, here=not is_ray_client(seen))
    trial_env = data_dir_variables(data_dir, seen)
    preflight.check_data(spec, address)  # a missing or corrupt dataset: before Ray starts
    check_server(uri)  # seconds, not MLflow's minutes of retries, before Ray starts
    check_address(address)  # likewise, not Ray's minute of retries
    study_url = _study_url(spec, optuna_storage, uri)
    code = provenance.current(PROJECT_ROOT)
    opening = beside_ray_start(lambda: tracking.tracker(uri))
    with ray_session(address) as embedded:
        _check_resources(embedded, spec, stream)
        slots = partial(trial_slots, spec.resources.cpu, spec.resources.gpu, max_concurrent)
        spec, sized = pack_size.settle(spec, stream, slots, trial_env)  # slots() after it
        plan = build_plan(spec, slots=slots())
        tracker = opening.result()
        sweep_id = new_sweep_id()
        source = Path(spec.source)
        tags = tracking.sweep_tags(spec=spec.name, profile=profile, spec_sha256=spec.sha256,
                                   code=code.tags(), metric=spec.metric,
                                   mode=spec.mode, n_configs=plan.n_configs,
                                   note=naming.sweep_note(spec.description, profile, sweep_id),
                                   name=naming.sweep_name(profile, sweep_id)) | sized
        studies = None
        if study_url is not None:
            from sweeps.studies import create_studies

            assert spec.optuna is not None
            studies = create_studies(study_url, sweep_id, plan, spec.optuna, spec.mode)
            tags[contract.OPTUNA_STORAGE] = tracking.redact(study_url)
            tags[contract.OPTUNA_SAMPLER] = spec.optuna.sampler
        texts = {tracking.RESOLVED_ARTIFACT: spec.text,
                 f"{tracking.SPEC_ARTIFACT_DIR}/{source.name}": source.read_text()}
        experiment = tracker.experiment_id(spec.name, home_path)
        ref = tracker.start_sweep(experiment, sweep_id, tags, texts, start_time=begun_at)
        print(f"sweep {sweep_id}: {spec.name}/{profile}, {count(plan.n_configs, 'configuration')}"
              f" in {count(plan.n_tune_trials, 'trial')}; {_where(uri, study_url, sweep_id)}",
              file=stream, flush=True)
        progress = Progress(sweep_id=sweep_id, label=f"{spec.name}/{profile}",
                            metric=spec.metric, mode=spec.mode, total=plan.n_configs)
        return _run(spec, plan, ref, tracker, home_path, storage, sweep_id, max_concurrent,
                    progress, stream, code.tags(), studies, begun,
                    resume_command(sweep_id, home_path, uri, address, optuna_storage,
                                   data_dir), trial_env)


def resume_sweep(sweep: str | None = None, *, address: str | None = None,
                 tracking_uri: str | None = None, home: str | os.PathLike[str] | None = None,
                 storage: str | None = None, max_concurrent: int | None = None,
                 optuna_storage: str | None = None, force: bool = False,
                 data_dir: str | None = None, stream: TextIO | None = None) -> Progress:
    """Continue the sweep ``sweep`` names (a sweep id, or a spec's name for that spec's latest
    unfinished sweep, else its latest; default: the store's latest one that did not finish,
    else its latest one: :func:`sweeps.lookup.find`), its trials reading the datasets in
    ``data_dir`` where given (:func:`sweeps.ray_session.data_dir_variables`).

    Configurations with a FINISHED run are not trained again; every other run of the sweep
    is deleted and its configuration trained anew, so each configuration ends with one run.
    A sweep that finished with every configuration done is left as it is (its times and
    rate stay those of the run that finished it): nothing starts, ``address`` is not checked
    (for a grid sweep; an Optuna cell's budget left is known only once its study is opened),
    and the Progress returned says ``finished``.
    A sweep whose driver is still alive is refused (``ConfigError``, field ``sweep``) unless
    ``force``. Its Optuna cells continue their studies in ``optuna_storage`` (default: the
    storage the sweep recorded, :func:`sweeps.studies.sweep_storage`; a study missing there:
    ``ConfigError``, field ``optuna_storage``). Nothing is deleted before every check passed.
    """
    begun = time.monotonic()
    stream = stream or sys.stdout
    quiet_environment()  # no download bar for the spec fetched below
    home_path = tracking.home_dir(home)
    uri = tracking.tracking_uri(tracking_uri, home_path)
    tracker = open_store(uri)
    # With every sweep finished, the latest: its failed configurations are retried.
    record = find(tracker, sweep, unfinished=True) or find(tracker, None)
    if record is None:
        raise SweepNotFound(f"no sweep in {tracking.redact(uri)}")
    if not force:
        refuse_alive(record)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            spec_file = tracker.download_spec(record.ref, Path(tmp))
        except FileNotFoundError:
            raise ConfigError("sweep", f"a sweep that stored its spec ({record.ref.sweep_id} "
                              f"of {record.spec} stopped as it began, before it stored its spec "
                              "or trained anything: run the spec anew)",
                              record.ref.sweep_id) from None
        spec = resolve(load_spec(str(spec_file)), record.profile)
    if spec.sha256 != record.spec_sha256:
        raise ConfigError("spec", f"the spec as sweep {record.ref.sweep_id} resolved it "
                          f"(sha256 {record.spec_sha256[:12]}); the code now resolves it "
                          "differently, so start a new sweep", spec.sha256[:12])
    check_study_storage(spec, optuna_storage)
    measured = spec.pack_size == pack_size.AUTO
    spec = pack_size.recorded(spec, tracker.call(tracker.client.get_run,
                                                 record.ref.parent_run_id).data.tags)
    runs = tracker.states(record.ref)
    values = finished_values(runs, spec.metric)
    plan = build_plan(spec, values)
    # Every check before anything is discarded; a finished sweep needs no cluster (an Optuna
    # cell's budget left is its study's, below).
    seen = address
    if record.status != "FINISHED" or plan.n_todo:
        contract.check_places(home_path, uri)
        seen = cluster_address(address)
        refuse_ray_client(seen, uri, spec)
        check_storage(storage, home_path, here=not is_ray_client(seen))
        check_address(address)
    trial_env = data_dir_variables(data_dir, seen)
    preflight.check_data(spec, address, finished=values)
    studies = study_url = None
    if _searches_optuna(spec):
        from sweeps.studies import resume_studies, sweep_storage

        assert spec.optuna is not None
        study_url = sweep_storage(record.optuna_storage, optuna_storage, record.ref.sweep_id,
                                  uri)
        studies = resume_studies(study_url, record.ref.sweep_id, plan, spec.optuna, values,
                                 failed_keys(runs))
        plan = build_plan(spec, values, studies.done)
    progress = Progress(sweep_id=record.ref.sweep_id, label=f"{spec.name}/{spec.profile}",
                        metric=spec.metric, mode=spec.mode, total=plan.n_configs,
                        done=len(values), repeats=studies.repeats() if studies else 0)
    for value in values.values():
        progress.offer(value)
    if record.status == "FINISHED" and plan.n_todo == 0:
        print(f"sweep {record.ref.sweep_id}: {spec.name}/{spec.profile} has finished, "
              f"{count(plan.n_configs, 'configuration')} done; nothing to resume",
              file=stream, flush=True)
        return dataclasses.replace(progress, state="finished", per_hour=record.per_hour)
    # Taken before Ray's seconds of start, so that a second resume started meanwhile is
    # refused rather than training the same configurations.
    tracker.reopen_sweep(record.ref, len(values), None if force else refuse_alive)
    with ray_session(address) as embedded:
        _check_resources(embedded, spec, stream)
        tracker.discard_unfinished(runs)
        plan = fill_slots(plan, spec.pack_size, trial_slots(spec.resources.cpu,
                                                            spec.resources.gpu, max_concurrent))
        packs = (f" (packs of up to {spec.pack_size}, as its first run measured)"
                 if measured else "")
        print(f"sweep {record.ref.sweep_id}: resuming {spec.name}/{spec.profile}, "
              f"{progress.settled} of {count(plan.n_configs, 'configuration')}"
              f" done, {plan.n_todo} "
              f"to run in {count(plan.n_tune_trials, 'trial')}{packs}; "
              f"{_where(uri, study_url, record.ref.sweep_id)}",
              file=stream, flush=True)
        run_name = f"{record.ref.sweep_id}-resume-{time.strftime('%H%M%S', time.gmtime())}"
        return _run(spec, plan, record.ref, tracker, home_path, storage, run_name,
                    max_concurrent, progress, stream, provenance.current(PROJECT_ROOT).tags(),
                    studies, begun, resume_command(record.ref.sweep_id, home_path, uri, address,
                                                   optuna_storage, data_dir), trial_env)
