"""What the sweep's one writer costs a trial (cluster/README.md): trial-like Ray tasks track
configurations straight into the store (the old way: each trial opens it) and through the
writer actor on the driver's node (:mod:`sweeps.writer`), in the same process, same store.

    python benchmarks/tracking_writer.py [--configs 20] [--flushes 10] [--batch 200]
                                         [--tracking-uri URI]
    python benchmarks/tracking_writer.py --trials 64 [--steps 200] [--metrics 3]
                                         [--flush-every 100] [--processes 4]
                                         [--tracking-uri URI]
    python benchmarks/tracking_writer.py --pack 224 --steps 20 --metrics 9 [--interval 0.5]
                                         [--processes 4] [--tracking-uri URI]
    python benchmarks/tracking_writer.py --retry 224 [--runs 45000] [--tracking-uri DB]

Each task tracks ``--configs`` configurations one after the other: claim a run (params
included), ``--flushes`` metric batches of ``--batch`` values, finish (summaries, CSV,
outcome). Printed, with the ratio writer / direct:

- opening the store: the direct task's first tracker (MLflow's import and the store's
  schema check, once per trial process); through the writer, nothing in the trial (the
  writer opened the store once, when the sweep started: printed apart);
- per configuration: the wall time a trial spends tracking one configuration;
- metric latency: from handing a batch over to its being in the store (``log_metrics`` and,
  through the writer, waiting for it).

Load (``--trials N``): N trials at once, each reporting every step (``--steps`` steps of
``--metrics`` values) through the trial's own reporter (:class:`sweeps.trial.Recorder`,
which batches them into the writer: a batch every ``--flush-every`` steps) between its claim
and its finish, all into one writer. Printed: the metric values logged per second, from the
first claim to the last finish (claims and finishes included). The
trials are threads, ``N / --processes`` in each of ``--processes`` Ray actors, not N trial
processes: the writer sees N concurrent callers either way (each with its own
:class:`~sweeps.writer.RemoteTracker`, its calls in order), while N Ray workers cost a
second or more of CPU each to start, more than the load itself on a small machine.
``tests/cluster/test_load.py`` runs this load and checks that every run arrived whole.

Packs (``--pack K``): ``--processes`` trials at once, each a pack of K configurations as
:func:`sweeps.trial.run_trial` tracks one (K claims, a :class:`~sweeps.trial.Recorder` over K
runs reporting every member at each of ``--steps`` steps, one step every ``--interval``
seconds, K finishes), each trial in a Ray actor of its own. Printed: the wall time from the
first claim to the last finish against the training's own ``steps × interval``, with a
writer that writes claims, metric values and endings straight into the store's tables
(:mod:`sweeps.tracking.tables`, what a sweep does with a SQLite or PostgreSQL store)
and with one that makes them through MLflow's client (what it did before, and does with a
tracking server), in one process, in the order A B B A.
``--pack 224 --steps 20 --metrics 9 --interval 0.6`` approximates synthetic packs of the
``paper`` profile with 8 seeds on an H100 (``benchmarks/sweep_throughput.py --gpu 0.25
--repeats 8``, RESULTS.md): 9 values a member at each evaluation (every 100 iterations), and
an evaluation every 0.6 s, 100 iterations at the 36,375 configs·iterations/s that
``pack_size: auto`` measured for a pack of 224 alone there (a pack sharing the GPU with three
others is slower, which loads the writer less).

A retried pack (``--retry K``): the claim of a pack of K configurations whose runs a failed
attempt left RUNNING (what a Tune retry of a pack asks the writer: each key's run is ended
KILLED and replaced by a new one), on a store that already holds ``--runs`` runs of earlier
sweeps of the same K keys, made through :meth:`~sweeps.tracking.Tracker.claim_all` straight
into the tables and through MLflow's client, in one process, in the order A B B A. The claim
holds the store's lock, so the writer makes no other trial's write, nor the driver's
heartbeat, meanwhile.

The default store is a fresh SQLite database; ``--tracking-uri`` names another (a server).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


class Direct:
    """A :class:`~sweeps.tracking.Tracker` behind the :class:`~sweeps.writer.RemoteTracker`
    calls a trial makes."""

    def __init__(self, uri: str) -> None:
        from sweeps import tracking

        self.tracker = tracking.tracker(uri)
        self.claim, self.finish = self.tracker.claim, self.tracker.finish

    def log_metrics(self, batches: Mapping[str, Sequence[tuple[str, float, int, int]]]) -> None:
        from mlflow.entities import Metric

        for run_id, rows in batches.items():
            self.tracker.log_metrics(run_id, [Metric(*r) for r in rows])

    def sync(self) -> None:
        """Every call above has returned once written."""


def track(make: Any, ref: Any, configs: int, flushes: int, batch: int,
          label: str) -> dict[str, float]:
    """Track ``configs`` configurations with the tracker ``make()`` builds; timings (s)."""
    from ortho_core.reporting import Outcome, Result

    start = time.perf_counter()
    tracker = make()
    opened = time.perf_counter() - start
    latencies, per_config = [], []
    for c in range(configs):
        began = time.perf_counter()
        claim = tracker.claim(ref, f"{label}-{c}", {"lr": 0.01, "seed": c}, {})
        rows = []
        for f in range(flushes):
            step = (f + 1) * batch
            values = [("loss", 1.0 / (step + i), int(time.time() * 1000), step + i)
                      for i in range(batch)]
            rows.append((step, {"loss": values[-1][1]}))
            sent = time.perf_counter()
            tracker.log_metrics({claim.run_id: values})
            tracker.sync()
            latencies.append(time.perf_counter() - sent)
        tracker.finish(claim.run_id, Result(Outcome.SOLVED, {"score": float(c)}),
                       rows[-1][0], rows)
        per_config.append(time.perf_counter() - began)
    return {"open": opened, "config": sorted(per_config)[len(per_config) // 2],
            "latency": sorted(latencies)[len(latencies) // 2]}


def load_value(trial: int, step: int, metric: int) -> float:
    """What load trial ``trial`` reports for metric ``m<metric>`` at ``step`` (exact in
    float64, distinct for every trial, step and metric)."""
    return float(trial * 10**7 + step * 10 + metric)


def load_trial(writer: Any, ref: Any, trial: int, steps: int, metrics: int,
               flush_every: int) -> int:
    """Track load trial ``trial`` as :func:`sweeps.trial.run_trial` tracks a configuration:
    claim its run (key ``load-<trial>``), report ``metrics`` values at every one of
    ``steps`` steps through a :class:`~sweeps.trial.Recorder`, flushed every
    ``flush_every`` steps (as a trial slower than this one is every
    :data:`~sweeps.trial.FLUSH_SECONDS`), finish (outcome ``solved``, summary ``score`` =
    ``trial``); the values reported."""
    from ortho_core.reporting import Outcome, Report, Result
    from sweeps.trial import Recorder, TrialContext
    from sweeps.writer import RemoteTracker

    tracker = RemoteTracker(writer)
    claim = tracker.claim(ref, f"load-{trial}", {"trial": trial}, {})
    recorder = Recorder(tracker, [claim.run_id],
                        TrialContext(writer=writer, sweep=ref, module="", metric="score",
                                     mode="max"))
    for step in range(steps):
        recorder(Report(member=0, step=step,
                        metrics={f"m{k}": load_value(trial, step, k) for k in range(metrics)}))
        if (step + 1) % flush_every == 0:
            recorder.flush()
    recorder.flush()
    tracker.finish(claim.run_id, Result(Outcome.SOLVED, {"score": float(trial)}),
                   recorder.last_step(0), recorder.rows[0])
    return steps * metrics


def pack_trial(writer: Any, ref: Any, trial: int, members: int, steps: int, metrics: int,
               interval: float) -> dict[str, float]:
    """Track load trial ``trial`` as :func:`sweeps.trial.run_trial` tracks a pack of
    ``members`` configurations: claim their runs, report ``metrics`` values of every member
    at each of ``steps`` steps, a step every ``interval`` seconds (a trainer's evaluations),
    through a :class:`~sweeps.trial.Recorder`, finish every member. Seconds spent claiming,
    reporting (the last batch written) and finishing."""
    from ortho_core.reporting import Outcome, Report, Result
    from sweeps.trial import Recorder, TrialContext
    from sweeps.writer import RemoteTracker

    tracker = RemoteTracker(writer)
    began = time.perf_counter()
    claims = tracker.claim_all(ref, [(f"pack-{trial}-{m}", {"trial": trial, "member": m}, {})
                                     for m in range(members)])
    claimed = time.perf_counter()
    recorder = Recorder(tracker, [c.run_id for c in claims],
                        TrialContext(writer=writer, sweep=ref, module="", metric="score",
                                     mode="max"))
    due = claimed
    for step in range(steps):
        for m in range(members):
            recorder(Report(member=m, step=step, metrics={
                f"m{k}": load_value(trial * members + m, step, k) for k in range(metrics)}))
        due += interval
        time.sleep(max(0.0, due - time.perf_counter()))
    recorder.flush(wait=True)
    reported = time.perf_counter()
    tracker.finish_all([(claim.run_id, Result(Outcome.SOLVED, {"score": float(m)}),
                         recorder.last_step(m), recorder.rows[m])
                        for m, claim in enumerate(claims)])
    return {"claim": claimed - began, "report": reported - claimed,
            "finish": time.perf_counter() - reported}


class LoadProcess:
    """A Ray actor running load trials in threads (the trial's modules imported once it
    is up, as a trial process has them)."""

    def __init__(self) -> None:
        import sweeps.trial
        import sweeps.writer  # noqa: F401

    def ready(self) -> bool:
        """True, once the actor is up."""
        return True

    def run(self, writer: Any, ref: Any, trials: Sequence[int], steps: int, metrics: int,
            flush_every: int) -> int:
        """:func:`load_trial` for every trial of ``trials`` at once, a thread each; the
        values reported."""
        with ThreadPoolExecutor(len(trials)) as pool:
            return sum(pool.map(lambda t: load_trial(writer, ref, t, steps, metrics,
                                                     flush_every), trials))

    def pack(self, writer: Any, ref: Any, trial: int,
             kwargs: dict[str, Any]) -> dict[str, float]:
        """:func:`pack_trial` of ``trial`` with ``kwargs``."""
        return pack_trial(writer, ref, trial, **kwargs)


def pack_load(writer: Any, ref: Any, trials: int,
              **kwargs: Any) -> tuple[float, list[dict[str, float]]]:
    """``trials`` pack trials (:func:`pack_trial`, ``kwargs`` its arguments) at once, each in
    a Ray actor of its own, into ``writer`` for sweep ``ref``: the seconds from the first
    claim to the last finish, and each trial's seconds of each phase."""
    import ray

    actor = ray.remote(num_cpus=0)(LoadProcess)
    pool = [actor.remote() for _ in range(trials)]
    ray.get([a.ready.remote() for a in pool])
    began = time.perf_counter()
    phases = ray.get([a.pack.remote(writer, ref, t, kwargs) for t, a in enumerate(pool)])
    elapsed = time.perf_counter() - began
    for a in pool:
        ray.kill(a)
    return elapsed, phases


def concurrent_load(writer: Any, ref: Any, trials: int, steps: int, metrics: int,
                    flush_every: int, processes: int) -> tuple[int, float]:
    """Run ``trials`` load trials (:func:`load_trial`) at once, spread over ``processes``
    Ray actors on this process's Ray (started and ready before the clock starts), into
    ``writer`` (an actor handle of :func:`sweeps.writer.start_writer`) for sweep ``ref``;
    the values logged and the seconds from the first claim to the last finish."""
    import ray

    actor = ray.remote(num_cpus=0)(LoadProcess)
    pool = [actor.remote() for _ in range(processes)]
    ray.get([a.ready.remote() for a in pool])
    began = time.perf_counter()
    values = sum(ray.get([a.run.remote(writer, ref, list(range(p, trials, processes)), steps,
                                       metrics, flush_every) for p, a in enumerate(pool)]))
    elapsed = time.perf_counter() - began
    for a in pool:
        ray.kill(a)
    return values, elapsed


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--configs", type=int, default=20)
    parser.add_argument("--flushes", type=int, default=10)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--tracking-uri", default=None)
    parser.add_argument("--trials", type=int, default=None,
                        help="measure the load of this many concurrent trials instead")
    parser.add_argument("--steps", type=int, default=200, help="steps per load trial")
    parser.add_argument("--metrics", type=int, default=3, help="values per step")
    parser.add_argument("--flush-every", type=int, default=100,
                        help="steps between a load trial's metric batches")
    parser.add_argument("--processes", type=int, default=4,
                        help="Ray actors the load trials are spread over")
    parser.add_argument("--pack", type=int, default=None, metavar="K",
                        help="measure --processes trials of a pack of K configurations each "
                             "(--steps steps of --metrics values, one every --interval s), "
                             "runs written into the store's tables against through "
                             "MLflow's client")
    parser.add_argument("--retry", type=int, default=None, metavar="K",
                        help="time the claim of a retried pack of K configurations, into "
                             "the tables against through MLflow's client")
    parser.add_argument("--runs", type=int, default=45000,
                        help="runs of earlier sweeps in the store before --retry's claims")
    parser.add_argument("--interval", type=float, default=0.5,
                        help="seconds between a pack's steps (its evaluations)")
    args = parser.parse_args(argv)
    for name in ("configs", "flushes", "batch", "steps", "metrics", "flush_every", "processes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: expected at least 1, "
                         f"got {getattr(args, name)}")
    for name in ("trials", "pack", "retry"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name}: expected at least 1, got {getattr(args, name)}")
    if args.interval < 0:
        parser.error(f"--interval: expected at least 0, got {args.interval}")
    if args.runs < 0:
        parser.error(f"--runs: expected at least 0, got {args.runs}")
    if args.retry and args.tracking_uri:
        from sweeps.tracking.tables import is_database

        if not is_database(args.tracking_uri):
            parser.error("--tracking-uri: --retry compares writes into a database's tables "
                         "with writes through MLflow's client, so expected a sqlite:/// or "
                         f"postgresql:// URI, got {args.tracking_uri}")

    import ray

    from sweeps import tracking
    from sweeps.ray_session import start_embedded_ray
    from sweeps.testing import sqlite_store, start_sweep
    from sweeps.writer import RemoteTracker, start_writer

    with tempfile.TemporaryDirectory(prefix="tracking-writer-") as tmp:
        uri = args.tracking_uri or sqlite_store(Path(tmp) / "home")
        ref = start_sweep(tracking.tracker(uri), "writer-benchmark", f"bench-{time.time():.0f}",
                          profile="smoke")
        if args.retry:
            retry_comparison(uri, ref.experiment_id, args.retry, args.runs)
            return
        start_embedded_ray(num_cpus=1)
        if args.pack:
            pack_comparison(uri, args)
            ray.shutdown()
            return
        began = time.perf_counter()
        writer = start_writer(uri, "ortho-writer-benchmark")
        writer_start = time.perf_counter() - began
        if args.trials:
            values, elapsed = concurrent_load(writer, ref, args.trials, args.steps,
                                              args.metrics, args.flush_every, args.processes)
            ray.shutdown()
            print(f"store {tracking.redact(uri) if args.tracking_uri else 'SQLite (fresh)'}; "
                  f"{args.trials} concurrent trials x {args.steps} steps x {args.metrics} "
                  f"values, a batch every {args.flush_every} steps, in {args.processes} "
                  "processes")
            print(f"{values} metric values in {elapsed:.1f} s: {values / elapsed:,.0f} "
                  "values/s")
            return
        work = (ref, args.configs, args.flushes, args.batch)
        task = ray.remote(num_cpus=1)(track)
        direct = ray.get(task.remote(lambda: Direct(uri), *work, "direct"))
        through = ray.get(task.remote(lambda: RemoteTracker(writer), *work, "writer"))
        ray.shutdown()
    print(f"store {tracking.redact(uri) if args.tracking_uri else 'SQLite (fresh)'}; "
          f"{args.configs} configurations x {args.flushes} batches x {args.batch} values, "
          "one trial process each way")
    print(f"{'':34}{'direct':>10}{'writer':>10}{'ratio':>8}")
    print(f"{'opening the store, per trial (s)':34}{direct['open']:>10.3f}"
          f"{through['open']:>10.3f}{through['open'] / direct['open']:>8.2f}")
    for key, name in (("config", "tracking one configuration (ms)"),
                      ("latency", "metric latency, median (ms)")):
        print(f"{name:34}{direct[key] * 1e3:>10.1f}{through[key] * 1e3:>10.1f}"
              f"{through[key] / direct[key]:>8.2f}")
    print(f"the writer's own start, once per sweep: {writer_start:.2f} s")


def pack_comparison(uri: str, args: argparse.Namespace) -> None:
    """Print the pack load of ``args`` into a writer that writes runs straight into the
    store's tables (:mod:`sweeps.tracking.tables`, the default) and into one that writes them
    through MLflow's client (before), each into a sweep of its own in ``uri``, in the order
    A B B A (the store grows from run to run)."""
    import ray

    from sweeps import tracking
    from sweeps.testing import start_sweep
    from sweeps.writer import start_writer

    kwargs = {"members": args.pack, "steps": args.steps, "metrics": args.metrics,
              "interval": args.interval}
    values = args.processes * args.pack * args.steps * args.metrics
    print(f"{args.processes} trials of a pack of {args.pack} at once, {args.steps} steps of "
          f"{args.metrics} values a member, a step every {args.interval} s (training alone "
          f"{args.steps * args.interval:.1f} s); {values:,} values")
    print(f"{'writes':<22}{'wall s':>8}{'values/s':>10}{'claim s':>9}{'report s':>9}"
          f"{'finish s':>9}")
    writers = {"into the tables": start_writer(uri, "ortho-writer-tables"),
               "through the client": start_writer(uri, "ortho-writer-client",
                                                 direct=False)}
    walls: dict[str, list[float]] = {label: [] for label in writers}
    order = (*writers, *reversed(writers))
    for repeat, label in enumerate(order):
        ref = start_sweep(tracking.tracker(uri), "writer-benchmark",
                          f"pack-{label[:4]}-{repeat}-{time.time():.0f}", profile="smoke")
        wall, phases = pack_load(writers[label], ref, args.processes, **kwargs)
        walls[label].append(wall)
        slowest = {k: max(p[k] for p in phases) for k in phases[0]}
        print(f"{label:<22}{wall:>8.1f}{values / wall:>10,.0f}{slowest['claim']:>9.1f}"
              f"{slowest['report']:>9.1f}{slowest['finish']:>9.1f}", flush=True)
    for writer in writers.values():
        ray.kill(writer)
    best = {label: min(w) for label, w in walls.items()}
    print(f"through the client / into the tables, best wall of each: "
          f"{best['through the client'] / best['into the tables']:.2f}x")


def retry_comparison(uri: str, experiment_id: str, members: int, runs: int) -> None:
    """Print how long the claim of a retried pack of ``members`` configurations holds the
    writer, on a store of ``runs`` earlier runs of the same keys (see the module docstring):
    into the tables and through MLflow's client, each into sweeps of its own, in the order
    A B B A."""
    from sweeps import contract, tracking
    from sweeps.testing import start_sweep

    keys = [f"pack-{m}" for m in range(members)]
    filler = tracking.tracker(uri)
    made = 0
    while made < runs:
        batch = min(members, runs - made)
        sweep = f"earlier-{made // members}"
        filler.tables.create_runs(experiment_id, [
            (keys[m], {contract.SWEEP_ID: sweep, contract.TRIAL_KEY: keys[m],
                       contract.ROLE: contract.ROLE_CONFIGURATION}, {"member": str(m)})
            for m in range(batch)])
        made += batch
    direct, client = tracking.Tracker(uri), tracking.Tracker(uri)
    client.direct = False
    trackers = {"into the tables": direct, "through the client": client}
    print(f"a retried pack of {members} configurations (each key's run RUNNING) on a store "
          f"of {runs:,} earlier runs of the same keys")
    print(f"{'claims':<22}{'first s':>9}{'retried s':>11}")
    seconds: dict[str, list[float]] = {label: [] for label in trackers}
    for repeat, label in enumerate((*trackers, *reversed(trackers))):
        tracker = trackers[label]
        ref = start_sweep(tracker, "writer-benchmark", f"retry-{label[:4]}-{repeat}",
                          profile="smoke")
        items = [(key, {"member": m}, {}) for m, key in enumerate(keys)]
        began = time.perf_counter()
        first = tracker.claim_all(ref, items)
        claimed = time.perf_counter()
        again = tracker.claim_all(ref, items)
        retried = time.perf_counter() - claimed
        if {c.run_id for c in first} & {c.run_id for c in again}:
            raise SystemExit(f"{label}: the retried claim kept a RUNNING run")
        seconds[label].append(retried)
        print(f"{label:<22}{claimed - began:>9.2f}{retried:>11.2f}", flush=True)
    best = {label: min(s) for label, s in seconds.items()}
    print(f"through the client / into the tables, the retried claim, best of each: "
          f"{best['through the client'] / best['into the tables']:.2f}x")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
