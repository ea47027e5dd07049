"""Configurations finished per hour, packed against one configuration per trial, through the
real sweep path (issue 13: the figure the project optimises).

Run from the repository root, with the datasets where ``$ORTHO_DATA_DIR`` points:

    python benchmarks/sweep_throughput.py            # the cpu profiles, 20-50 min by machine
    python benchmarks/sweep_throughput.py --quick    # the same sweeps, seconds of training each
    python benchmarks/sweep_throughput.py --gpu 0.25 --packs 0 --pack-size 28    # on a GPU

Three sweeps, each run twice in this process: **packed** (the profile's own ``pack_size``,
or ``--pack-size``) and **one configuration per trial** (``pack_size: 1``), both by
:func:`sweeps.runner.run_sweep` into a fresh temporary home (real Ray, MLflow's SQLite store,
the Optuna storage beside it). A sweep's time is ``run_sweep``'s, from its call to its return
(store, parent run, Tune, every trial's tracking, the end of the sweep); configurations per
hour = configurations finished / that time. Ray is started once for all six runs (about 4 s
a sweep would add to both of its runs alike), and an untimed sweep first starts its workers,
which the first timed run would otherwise pay for: pack 0 of the ``cpu`` plan of the first
sweep selected, one configuration per trial, each cut as ``--quick`` cuts it (its trainer's
imports done; a synthetic warm-up reads no dataset).

- ``ff-mnist``, profile ``cpu``: packs 0 and 1 of the profile's plan, its whole plan (11
  configurations in packs of 6 and 5), into which the plan deals its configurations in turn:
  FF, FF+OPEN and FF+OINIT (FF+OPEN costs two to four times FF per iteration).
- ``synthetic-max-length``, profile ``cpu``: packs 0 and 1 of its plan, its whole plan (18
  configurations in two packs of 9), each dealt every variant (SRNN, SRNN+OPEN with both
  penalty forms, SRNN+OINIT, whose configurations climb to different lengths, hence cost
  very differently).
- the Optuna variant: ``ff-mnist``'s FF+OPEN cell (λ = 1) with α searched by Optuna's TPE
  (log-uniform on [10⁻³, 10⁻¹], 6 trials, seed 0) in batches of 3, one per core (the
  profile's ``pack_size`` split to fill both: :func:`sweeps.plan.optuna_batches`). ``ff-mnist``
  rather than ``synthetic``: its cost does not depend on α, so the different points that
  the packed study (which knows its pending points) and the one-per-trial study propose do
  not make one run cheaper than the other.

Why whole packs of the profile's own plan, rather than its first N configurations or a time
window: the packed run trains exactly the packs the full profile trains (partial packs would
understate packing), the one-per-trial run the same configurations, and every configuration
is trained to its end at the profile's settings, so nothing is cut mid-way. Two packs (one per
core of this 2-core machine) keep both runs using every core; both ``cpu`` profiles now plan
exactly two, so the two grid sweeps are the whole profiles (3-7 minutes packed on the 2-core
machines of RESULTS.md, 3.5-10 one per trial).

``--quick`` runs the same six sweeps with the training cut to seconds (one epoch of 2,000
images; lengths 10 to 20 with 300 iterations and 200 validation sequences): it checks the
path end to end in under two minutes, and its ratios are dominated by fixed costs.

``--gpu FRACTION`` sets ``device: cuda`` on every configuration and ``resources: {cpu: N, gpu:
FRACTION}`` on both runs (N: ``--cpus``, default 1; a GPU machine's CPUs shared as its GPU is, 4
of 16 at 0.25, let a pack's host work, ρ(W_hh) above all, use them): fractional-GPU trials of
one configuration each against packs sharing the GPU the same way (issue 13's GPU target: at
least 50x); ``--packs 0`` (every configuration of the profile) and ``--pack-size 28`` give it
packs of up to a GPU's size (the plan deals each pack shape's configurations into as many packs
as the GPU's 1 / FRACTION trials at once, :func:`sweeps.plan.pack_counts`), ``--profile``
another profile. ``--pack-size auto`` lets the packed run measure its K (``pack_size: auto``,
:mod:`sweeps.pack_size`); the row names the K that its parent run records. ``--set KEY=VALUE``
overrides a config key of every configuration (a YAML value; repeatable), to shorten a profile's
protocol to a lease. ``--repeats N`` trains each configuration with N seeds (a spec's
``repeats``) and ``--alone-repeats M`` gives the one-per-trial run only the first M of them, so
that a large sweep's baseline fits a lease (its configurations per hour are measured on those,
whose costs the other seeds share on average); ``--modes`` runs one side only.

    python benchmarks/sweep_throughput.py --gpu 0.25 --profile paper --packs 0 \
        --only synthetic-max-length --pack-size auto --set max_iters=1000 --set max_seq_len=50 \
        --set val_size=2000

Beside each run's own figure (``logged/h``) is the one the sweep reports itself, on its last
line and as metric ``configs_per_hour`` of its parent run, over the same span (from
``run_sweep``'s call to the end of the sweep, before ``run_sweep`` returns): the two agree to
a fraction of a second of wall time. The mean 1-minute load average over each run is printed
too, and the float32 matmul rate at the end, since timings here move with the machine's load.
After each run a line says where its time went (:func:`timeline`, from the runs' start and
end times in the store): until the first claim, training, and after the last ending, and
for a run of few packs when each pack started and ended (two rounds of packs, or a pack
that ends long after the others, show there).

What bounds the ratio: a trial of one configuration runs the same trainer with a pack of one,
and both runs pay the same fixed costs, so packed / one per trial cannot exceed what one
iteration of a pack of K saves over K iterations of a pack of one on the trial's one thread.
``benchmarks/pack_ceiling.py`` measures that ceiling for these sweeps' shapes.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from timing import sgemm_rate

AUTO = "auto"
"""``--pack-size`` for a measured K (:data:`sweeps.pack_size.AUTO`, which cannot be imported
at the top: the repository joins ``sys.path`` only when the script starts)."""

ROOT = Path(__file__).resolve().parent.parent
RUN_PROFILE = "cpu"
"""The profile the written-out subset specs run under (all of theirs are empty)."""


@dataclass(frozen=True)
class Case:
    """One sweep of the benchmark: a subset of a shipped spec's profile."""

    label: str
    """How the table names it."""
    spec: str
    """The shipped spec."""
    packs: tuple[int, ...]
    """Indices of the profile's plan's packs whose configurations it trains (empty: all)."""
    quick: dict[str, Any]
    """Config keys ``--quick`` overrides."""
    optuna: dict[str, Any] | None = None
    """For the Optuna variant: its ``space`` (over the first member of ``packs`` whose params
    hold ``base``, the other keys fixed), ``search`` and ``base``."""


FF_QUICK = {"epochs": 1, "train_size": 2000, "test_size": 1000}
CASES = (
    Case("ff-mnist", "ff-mnist", (0, 1), FF_QUICK),
    Case("synthetic-max-length", "synthetic-max-length", (0, 1),
         {"max_seq_len": 20, "max_iters": 300, "val_size": 200}),
    Case("ff-mnist FF+OPEN, Optuna", "ff-mnist", (), FF_QUICK,
         optuna={"base": {"variant": "open", "penalty": 1.0},
                 "space": {"lr": {"low": 1e-3, "high": 1e-1, "log": True}},
                 "search": {"kind": "optuna", "sampler": "tpe", "n_trials": 6, "seed": 0}}),
)


def subset_spec(case: Case, profile: str, overrides: dict[str, Any],
                pack_size: int | str | None,
                resources: dict[str, float]) -> tuple[dict[str, Any], int | str]:
    """The spec of ``case`` at ``profile`` as plain data (its configurations written out as
    groups, or its Optuna cell, ``overrides`` on every configuration, ``resources`` each
    trial's) and the profile's pack size (or ``pack_size``, a number or ``auto``)."""
    from sweeps.plan import build_plan
    from sweeps.spec import load_spec, resolve

    spec = resolve(load_spec(case.spec), profile)
    plan = build_plan(spec)
    if max(case.packs, default=0) >= len(plan.packs):
        raise SystemExit(f"{case.spec}/{profile} has {len(plan.packs)} packs")
    members = [m for i in case.packs or range(len(plan.packs)) for m in plan.packs[i]]
    seeds = {m.params["seed"] for m in members}
    assert len(seeds) == 1, seeds  # one repeat: the spec's seed is every member's
    fixed = [{k: v for k, v in {**m.params, **overrides}.items() if k != "seed"}
             for m in members]
    doc: dict[str, Any] = {
        "name": case.spec, "experiment": spec.experiment, "description": case.label,
        "metric": {"name": spec.metric, "mode": spec.mode}, "search": {"kind": "grid"},
        "fixed": {}, "space": {}, "groups": [{"fixed": f} for f in fixed],
        "repeats": 1, "seed": seeds.pop(), "resources": resources,
        "max_failures": 0, "profiles": {p: {} for p in ("smoke", "cpu", "paper")},
    }
    if case.optuna is not None:
        searched, base = case.optuna["space"], case.optuna["base"]
        first = next(f for f in fixed if all(f.get(k) == v for k, v in base.items()))
        doc.update(search=case.optuna["search"], space=searched,
                   groups=[{"fixed": {k: v for k, v in first.items() if k not in searched}}])
    return doc, pack_size or spec.pack_size


@dataclass
class Row:
    """One run of a sweep."""

    mode: str
    """Packed (with its K; ``auto`` with the K its parent run records) or one configuration
    per trial."""
    configs: int
    """Configurations finished."""
    trials: int
    """Ray Tune trials the plan ran them in."""
    seconds: float
    """``run_sweep``'s wall time."""
    load: float
    """Mean 1-minute load average over the run, sampled every 5 s."""
    logged: float
    """The sweep's own figure (its last line, and metric ``configs_per_hour`` of its parent
    run): configurations finished per hour from ``run_sweep``'s call to the sweep's end."""

    @property
    def per_hour(self) -> float:
        """Configurations finished per hour."""
        return self.configs / self.seconds * 3600


def run(doc: dict[str, Any], pack_size: int | str, tmp: Path, tag: str,
        profile: str = RUN_PROFILE, fill: bool = True) -> Row:
    """``doc`` with ``pack_size`` swept at ``profile`` by :func:`sweeps.runner.run_sweep` into
    a new home under ``tmp``; the row of what it finished. ``fill``: the plan's packs fill
    the trials that run at once (:func:`sweeps.plan.pack_counts`); else they are cut at
    ``pack_size`` alone, as before packs filled them."""
    from unittest import mock

    from sweeps import runner
    from sweeps.ray_session import trial_slots
    from sweeps.runner import run_sweep

    folder = tmp / tag
    folder.mkdir()
    print(f"  running {doc['name']} ({tag}): pack_size {pack_size}, {doc['repeats']} seed(s) "
          "...", file=sys.stderr, flush=True)  # a sweep takes minutes; its rows come after
    path = folder / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump({**doc, "pack_size": pack_size}, sort_keys=False))
    out = io.StringIO()
    loads: list[float] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_load, args=(loads, stop), daemon=True)
    sampler.start()
    start, epoch = time.perf_counter(), time.time()
    slots = trial_slots if fill else (lambda *_: 1)
    try:
        with mock.patch.object(runner, "trial_slots", slots):
            final = run_sweep(str(path), profile, home=folder / "home", stream=out)
    finally:
        seconds = time.perf_counter() - start
        stop.set()
        sampler.join()
    assert final.state == "finished" and final.failed == 0, out.getvalue()
    trials = int(re.search(r"configurations? in (\d+) trials?", out.getvalue()).group(1))
    if pack_size == AUTO:
        mode = f"auto K={recorded_k(folder / 'home', final.sweep_id)}"
        print(next((line for line in out.getvalue().splitlines()
                    if line.startswith("pack_size auto:")), "pack_size auto: (no line)"),
              flush=True)
    else:
        mode = f"packed K={pack_size}" if pack_size > 1 else "one per trial"
    assert final.per_hour is not None
    print(f"  {tag}: {timeline(folder / 'home', final.sweep_id, epoch, seconds)}", flush=True)
    return Row(mode, final.done, trials, seconds, sum(loads) / len(loads), final.per_hour)


def timeline(home: Path, sweep_id: str, epoch: float, seconds: float) -> str:
    """Where a sweep's time went, from its configuration runs in ``home``'s store (``epoch``:
    ``run_sweep``'s call, ``seconds`` its wall time): the first claim (Ray's trials started,
    the store and writer opened, the ``auto`` probe), the training span from the first
    claim to the last ending, the rest until ``run_sweep`` returned; and, for up to 16 packs,
    when each pack was claimed and its last member ended (a pack's members are claimed in one
    write into the store's tables, so they share a start time; through a tracking server each
    would count as a pack). Every run has ended: the benchmark asserts the sweep finished."""
    from sweeps import tracking

    tracker = tracking.tracker(tracking.tracking_uri(None, home))
    record = tracker.find_sweep(sweep_id)
    assert record is not None
    runs = tracker.configurations(record.ref)
    packs: dict[int, list[int]] = {}
    for r in runs:
        packs.setdefault(r.info.start_time, []).append(r.info.end_time)
    first = min(packs) / 1000 - epoch
    last = max(max(ends) for ends in packs.values()) / 1000 - epoch
    text = (f"first claim +{first:.1f} s, training {last - first:.1f} s, last ending "
            f"+{last:.1f} s, return +{seconds:.1f} s")
    if len(packs) <= 16:
        text += "; packs (claimed-ended, size): " + ", ".join(
            f"{start / 1000 - epoch:.1f}-{max(ends) / 1000 - epoch:.1f} ({len(ends)})"
            for start, ends in sorted(packs.items()))
    return text


def recorded_k(home: Path, sweep_id: str) -> str:
    """The pack size the parent run of ``sweep_id`` in ``home``'s store records
    (:data:`sweeps.contract.PACK_SIZE`), read back from MLflow."""
    from mlflow import MlflowClient

    from sweeps import contract

    client = MlflowClient(contract.tracking_uri(None, home))
    parents = client.search_runs(
        [e.experiment_id for e in client.search_experiments()],
        f"tags.`{contract.SWEEP_ID}` = '{sweep_id}' and "
        f"tags.`{contract.ROLE}` = '{contract.ROLE_SWEEP}'")
    assert len(parents) == 1, parents
    return parents[0].data.tags[contract.PACK_SIZE]


def setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of ``--set`` as a config key and its YAML value."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, yaml.safe_load(value)


def size(text: str) -> int | str:
    """``--pack-size``: a positive number or ``auto``."""
    if text == AUTO:
        return AUTO
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or {AUTO}, got {text!r}")
    return int(text)


def _sample_load(loads: list[float], stop: threading.Event) -> None:
    """Append the 1-minute load average to ``loads`` now and every 5 s until ``stop``."""
    loads.append(os.getloadavg()[0])
    while not stop.wait(5.0):
        loads.append(os.getloadavg()[0])


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--quick", action="store_true",
                   help="the same sweeps with seconds of training per configuration")
    p.add_argument("--gpu", type=float, default=0.0, metavar="FRACTION",
                   help="train on cuda, each trial holding this fraction of a GPU")
    p.add_argument("--cpus", type=int, default=1,
                   help="CPUs each trial holds, in both runs (its torch threads, over which "
                        "the synthetic trainer also splits ρ(W_hh); default 1); without --gpu "
                        "it also sets how many trials run at once (this machine's CPUs / N)")
    p.add_argument("--pack-size", type=size, default=None,
                   help="K of the packed runs, or auto (default: the profile's pack_size)")
    p.add_argument("--profile", default="cpu", help="the profile the subsets are taken from")
    p.add_argument("--packs", type=int, default=None,
                   help="train the plan's first N packs (0: all) instead of the chosen ones "
                        "(grid sweeps)")
    p.add_argument("--only", choices=[c.label for c in CASES], default=None,
                   help="run this sweep alone")
    p.add_argument("--set", type=setting, action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key of every configuration (repeatable; with "
                        "--only, since the sweeps' experiments have different keys)")
    p.add_argument("--repeats", type=int, default=1,
                   help="seeds per configuration (a spec's repeats; grid sweeps)")
    p.add_argument("--alone-repeats", type=int, default=None,
                   help="seeds the one-per-trial run trains, 1 to --repeats (default: "
                        "--repeats; grid sweeps)")
    p.add_argument("--modes", choices=("both", "packed", "alone"), default="both",
                   help="which runs of each sweep")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error(f"--repeats: expected at least 1, got {args.repeats}")
    if args.set and args.only is None:
        p.error("--set: needs --only (the sweeps' experiments have different config keys)")
    if args.packs is not None and args.packs < 0:
        p.error(f"--packs: expected 0 (all) or more, got {args.packs}")
    if not 0 <= args.gpu <= 1:
        p.error(f"--gpu: expected a fraction of one GPU in [0, 1], got {args.gpu}")
    if not 1 <= args.cpus <= (os.cpu_count() or 1):
        p.error(f"--cpus: expected 1 to this machine's {os.cpu_count()} CPUs, got {args.cpus}")
    if args.alone_repeats is not None and not 1 <= args.alone_repeats <= args.repeats:
        p.error(f"--alone-repeats: expected 1 to --repeats ({args.repeats}), "
                f"got {args.alone_repeats}")

    from ortho_core.devices import resolve_device
    from ortho_core.errors import ConfigError
    from sweeps.ray_session import start_embedded_ray

    device: dict[str, Any] = {"device": "cuda"} if args.gpu else {}
    overrides = {**device, **dict(args.set)}
    if args.gpu:
        try:
            resolve_device("cuda")  # no GPU: fail here, not in every trial
        except ConfigError as err:
            p.error(f"--gpu: {err}")
    start_embedded_ray()
    cpus = os.cpu_count()
    resources = {"cpu": args.cpus, "gpu": args.gpu}
    print(f"profile {args.profile}{' (--quick)' if args.quick else ''}, {cpus} CPUs, "
          f"{'GPU fraction ' + str(args.gpu) if args.gpu else 'CPU only'}, "
          f"{args.cpus} CPU(s) a trial")
    print(f"{'sweep':<28} {'mode':<14} {'configs':>7} {'trials':>6} {'wall s':>8} "
          f"{'configs/h':>9} {'logged/h':>9} {'load':>5}", flush=True)
    ratios = []
    with tempfile.TemporaryDirectory(prefix="sweep-throughput-") as tmp:
        # Ray's workers started and their imports done, by the first selected sweep's own
        # trainer (a synthetic warm-up reads no dataset: a GPU machine may have none)
        first = next(c for c in CASES if args.only in (None, c.label))
        warm, _ = subset_spec(Case("warm-up", first.spec, (0,), {}), "cpu",
                              {**device, **first.quick}, None, resources)
        run(warm, 1, Path(tmp), "warm-up")
        for n, case in enumerate(CASES):
            if args.only not in (None, case.label):
                continue
            if args.packs is not None and case.optuna is None:
                case = Case(case.label, case.spec, tuple(range(args.packs)), case.quick)
            shortened = case.quick if args.quick else {}
            doc, k = subset_spec(case, args.profile, {**shortened, **overrides},
                                 args.pack_size, resources)
            seeds = (1, 1) if case.optuna else (args.repeats, args.alone_repeats or args.repeats)
            runs = [(k, seeds[0]), (1, seeds[1])]
            runs = {"both": runs, "packed": runs[:1], "alone": runs[1:]}[args.modes]
            rows = [run({**doc, "repeats": repeats}, pack, Path(tmp), f"{n}-{i}-{pack}")
                    for i, (pack, repeats) in enumerate(runs)]
            for i, row in enumerate(rows):
                print(f"{case.label if i == 0 else '':<28} {row.mode:<14} {row.configs:>7} "
                      f"{row.trials:>6} {row.seconds:>8.1f} {row.per_hour:>9.0f} "
                      f"{row.logged:>9.0f} {row.load:>5.1f}", flush=True)
            if len(rows) == 2:
                ratios.append((case.label, rows[0].per_hour / rows[1].per_hour))
    for label, ratio in ratios:
        print(f"{label}: packed / one per trial = {ratio:.2f}x configurations per hour")
    rate = sgemm_rate(3, time.perf_counter)
    print(f"sgemm {rate / 1e9:.0f} GFLOP/s (2048², float32) at the end", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
