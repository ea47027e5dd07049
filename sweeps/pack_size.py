"""``pack_size: auto``: the pack size K measured on the device a trial gets, once per sweep.

A pack of K configurations trains in about the time of one as long as the device has work
to spare (DESIGN.md "Packs"); past that, a larger K only makes each trial longer and the
sweep coarser. So, before it plans, a sweep whose spec says ``pack_size: auto`` measures a
short throughput curve and packs with the K whose plan it says finishes soonest:

1. **Where.** One Ray task with a trial's resources (``resources.cpu`` and ``.gpu``, threads
   sized as a trial's, ``device: auto`` resolved as a trial's: :mod:`sweeps.trial`), so it
   lands where trials land, in a worker that exits after it.
2. **What.** For K in 1, 2, 4, ... up to the cap (the largest pack the plan could form: a
   group of grid configurations that share the trainer's ``PACK_FIELDS``, or an Optuna
   cell's largest batch; at most :data:`MAX_PACK`, a spec's own limit, the cap itself last),
   the trainer trains K members of the sweep's own first configurations (those of its
   largest pack, repeated as needed) cut short by the experiment's ``probe_config`` hook
   (:mod:`ortho_core.experiments`: 300 iterations of synthetic's, 300 batches of ff-mnist's,
   15 iterations of pixel-mnist's); the reporter's clock gives
   configs·iterations per second between each member's first report after training began and
   its last, so data loading, initialisation, pre-training and the first iterations' one-off
   costs are not timed.
3. **Bounds.** The ladder stops before a point that would end more than
   :data:`PROBE_SECONDS` after the first (K = 1, which also pays the process's one-off costs:
   a CUDA context, kernels loaded, a dataset parsed), and on a GPU before one whose memory
   would exceed :data:`MEMORY_SHARE` of the free memory (``torch.cuda.mem_get_info``) times
   the trial's GPU share, or after it ran out of memory; :class:`Probe` says which. A point's
   wall time and its memory growth are extrapolated from the two points before it
   (:func:`extrapolate`; the second point's time from the first's iterations alone, the
   third's from the second's in proportion to K, since the first's wall time is not one): each
   has a part that does not grow with K (data and set-up; on a GPU most of an iteration's
   time too) and a part per member.
4. **Choice.** For each measured K, the sweep's own plan at that K (its packs, dealt to
   fill the trials that run at once: :func:`sweeps.plan.pack_counts`) is timed by the curve
   (:func:`plan_seconds`: an iteration of a pack of m members takes m / rate(m), the trials
   start in plan order on the first free slot, and trials on different slots are taken not
   to slow each other, though on a shared GPU they do). Where the experiment states a
   configuration's ``iteration_budget``, each pack also pays the runner's
   :data:`TRIAL_SECONDS` and its set-up as the probe measured it (:attr:`Probe.setup`: a
   point's wall time less its iterations at its rate) against that budget's iterations: a
   short sweep of many small packs spends most of its time starting trials (RESULTS.md,
   ``pack_size auto, a larger sweep on this CPU``), a long one hardly any. Where the
   experiment's ``ends_early`` says members can end before that budget (synthetic's
   curriculum and settled lengths), a pack is timed with its members' ends spread evenly
   over that budget (:func:`spread_seconds`): on a GPU, where an iteration costs about the
   same at any small K, the last members of many small packs cost as much as those of a few
   large ones. K is the smallest measured size whose plan is
   within :data:`TOLERANCE` of the fastest (:func:`best_k`). Throughput alone is not enough:
   on an H100 or H200 a pack's iteration costs about the same up to K = 128 or more, so a
   knee of the curve (the smallest K within 10 % of the best rate) split each of M's
   224-configuration groups into two rounds of packs where one round of 224 finishes sooner
   (RESULTS.md, ``sweep_throughput on a GPU (3)``). Among plans of about equal time, packs
   stay small, so a failure or an interrupt loses less. The slots are counted after the
   probe, whose task may have made an autoscaler start the first node that fits a trial.

The parent run records K (:data:`sweeps.contract.PACK_SIZE`), the curve
(:data:`sweeps.contract.PACK_SIZE_CURVE`) and the set-ups weighed
(:data:`sweeps.contract.PACK_SIZE_SETUP`), and a resume packs with the recorded K
(:func:`recorded`) and never probes again, so its packs are at most the K of the first run
(its unfinished configurations dealt again for the trials that run at once:
:func:`sweeps.plan.fill_slots`). Without a probe: packs of one under an early-stopping
scheduler (it judges one configuration per trial), and :data:`DEFAULT_PACK_SIZE` (at most the
cap) for an experiment without ``probe_config`` or when the probe fails (its error is
printed). Cost: the first
point and at most :data:`PROBE_SECONDS` more, set-ups included; for the shipped specs'
profiles 2 to 20 s on this project's 2-core CPU and 6 to 21 s on an H100
(``benchmarks/pack_size_probe.py``, RESULTS.md).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from ortho_core import experiments
from ortho_core.config import from_dict
from ortho_core.errors import ConfigError
from ortho_core.reporting import Report
from sweeps import contract
from sweeps.plan import build_plan, deal, group, optuna_batches, pack_counts
from sweeps.spec import ResolvedSpec
from sweeps.spec.profiles import MAX_PACK_SIZE

AUTO = "auto"
"""The ``pack_size`` value that asks for a measured K."""
MAX_PACK = MAX_PACK_SIZE
"""Largest K the probe tries: any pack a spec may ask for. The ladder's time and memory
bounds stop it sooner where larger packs cost more (on a CPU only its time limit: a point's
host memory is not bounded); on a GPU, where four trials' packs of 224 left an H200 with work
to spare (RESULTS.md, ``sweep_throughput on a GPU (4)``), a larger sweep's groups may do
better as one round of larger packs."""
TOLERANCE = 0.10
"""K is the smallest pack size whose plan's predicted time is within this fraction of the
shortest's (the probe's rates move by about that much from one probe to the next)."""
PROBE_SECONDS = 20.0
"""The ladder stops before a point that would end this many seconds after the first point
(a point's data and set-up take 1 to 2 s on this project's CPU machine and on an H100)."""
MEMORY_SHARE = 0.8
"""Fraction of a trial's share of free GPU memory a probed pack may fill."""
TRIAL_SECONDS = 0.2
"""What the runner spends on a trial besides its pack's set-up, as :func:`decide` counts it
where it weighs set-ups: Tune starting the trial, its claims and endings. 0.11 s a trial
plus 0.2 ms (claims) and 0.35 ms (endings) a member on this project's 2-core CPU
(RESULTS.md, ``sweep_overhead`` and ``pack_claims``); about 1 s between a slot's packs of
224 on the lent H200 (``sweep_throughput on a GPU (4)``), where this undercounts."""
DEFAULT_PACK_SIZE = 8
"""K (at most the cap) where nothing is measured: an experiment without ``probe_config``, or
a probe that failed."""


@dataclass(frozen=True)
class Choice:
    """The pack size of a ``pack_size: auto`` sweep and how it was reached."""

    k: int
    """The pack size the sweep plans with."""
    curve: dict[int, float]
    """Configs·iterations per second by pack size (empty when nothing was measured)."""
    why: str
    """How K was chosen, for the sweep's first lines."""
    setup: dict[int, float] = dataclasses.field(default_factory=dict)
    """Seconds of a pack's set-up by pack size, as the choice weighed them (empty when it
    weighed none)."""

    def tags(self) -> dict[str, str]:
        """The parent run's tags (:data:`sweeps.contract.PACK_SIZE`,
        :data:`~sweeps.contract.PACK_SIZE_CURVE` and :data:`~sweeps.contract.PACK_SIZE_SETUP`)."""
        return {contract.PACK_SIZE: str(self.k),
                contract.PACK_SIZE_CURVE: json.dumps({str(k): round(v, 3)
                                                      for k, v in self.curve.items()}),
                contract.PACK_SIZE_SETUP: json.dumps({str(k): round(v, 3)
                                                      for k, v in self.setup.items()})}


def ladder(cap: int) -> list[int]:
    """1, 2, 4, ... below ``cap`` (at most :data:`MAX_PACK`), then the cap itself."""
    cap = max(1, min(cap, MAX_PACK))
    sizes = [2 ** i for i in range(cap.bit_length()) if 2 ** i < cap]
    return [*sizes, cap]


def _between(points: Mapping[int, float], m: int) -> float | None:
    """``points`` (values by pack size) at ``m`` on the line between the two measured sizes
    around it (a fixed part and a part per member); None outside the measured sizes."""
    below = [k for k in points if k <= m]
    above = [k for k in points if k >= m]
    if not below or not above:
        return None
    lo, hi = max(below), min(above)
    if lo == hi:
        return points[lo]
    return points[lo] + (points[hi] - points[lo]) * (m - lo) / (hi - lo)


def iteration_seconds(curve: Mapping[int, float], m: int) -> float:
    """Seconds one iteration of a pack of ``m`` members takes by ``curve`` (configs·iterations
    per second by pack size): m / rate at a measured size, on the line between the two
    measured sizes around ``m``, in proportion to ``m`` beyond the measured ones."""
    per = {k: k / rate for k, rate in curve.items()}
    inside = _between(per, m)
    if inside is not None:
        return inside
    nearest = min(per, key=lambda k: abs(k - m))
    return per[nearest] * m / nearest


def setup_seconds(setup: Mapping[int, float], m: int) -> float:
    """Seconds a pack of ``m`` members spends outside its timed iterations by the probe's
    ``setup`` (seconds by pack size): on the line between the measured sizes around ``m``,
    past the largest on the line through the last two (:func:`extrapolate`), below the
    smallest (K = 1, whose point pays the process's one-off costs) as the smallest; 0 where
    nothing was measured."""
    if not setup:
        return 0.0
    inside = _between(setup, m)
    if inside is not None:
        return inside
    return setup[min(setup)] if m < min(setup) else extrapolate(setup, m)


def spread_seconds(curve: Mapping[int, float], m: int) -> float:
    """Seconds of a pack of ``m`` members per iteration of its members' budget when their
    ends fall evenly over it (the experiment's ``ends_early``): with m ends spread as m
    uniform draws on the budget are on average, the pack trains an (m + 1)-th of it with each
    of m, m − 1, ..., 1 members, so the sum of :func:`iteration_seconds` over pack sizes 1 to
    m, divided by m + 1 (a member alone trains half its budget on average, as a member of any
    pack does, so where packing gains nothing every K costs the same). Where an iteration
    costs about the same at any small K (a GPU's), the few members left at the end of a small
    pack cost as much as a large pack's: M's grid with 32 seeds on an H200 trained as 28 packs
    of 128 in 7 rounds would take 3.2 times as long as 4 packs of 896 in one round (RESULTS.md,
    ``pack_size auto, ends spread``); by that lease's probe, the time of every member's whole
    budget put them within 8 % of each other, this model 1.93 times apart."""
    return sum(iteration_seconds(curve, j) for j in range(1, m + 1)) / (m + 1)


def plan_seconds(curve: Mapping[int, float], packs: Sequence[int], slots: int,
                 setup: Mapping[int, float] | None = None, iterations: int = 1,
                 per_trial: float = 0.0, spread: bool = False) -> float:
    """Seconds until the last of ``packs`` (their sizes, in plan order) ends, each started on
    the first of ``slots`` to come free, as Tune starts trials: a pack of m takes
    ``per_trial``, its set-up (:func:`setup_seconds`) and ``iterations`` iterations of
    m / rate(m) seconds each, every configuration taken to run as many iterations as any
    other, or with ``spread`` of :func:`spread_seconds` each, its members ending evenly spread
    over them. Without ``setup``, ``iterations`` and ``per_trial``: seconds per iteration of
    every member."""
    ends = [0.0] * max(1, slots)
    cost: dict[int, float] = {}
    for m in packs:
        if m not in cost:
            cost[m] = spread_seconds(curve, m) if spread else iteration_seconds(curve, m)
        first = ends.index(min(ends))
        ends[first] += per_trial + setup_seconds(setup or {}, m) + iterations * cost[m]
    return max(ends)


def best_k(curve: Mapping[int, float], packs_at: Callable[[int], Sequence[int]], slots: int,
           tolerance: float = TOLERANCE, setup: Mapping[int, float] | None = None,
           iterations: int = 1, per_trial: float = 0.0, spread: bool = False) -> int:
    """The smallest measured pack size whose plan (``packs_at(k)``: its packs' sizes at
    ``pack_size: k``) takes at most (1 + ``tolerance``) of the fastest plan's time by
    ``curve``, ``setup``, ``iterations``, ``per_trial`` and ``spread``
    (:func:`plan_seconds`)."""
    seconds = {k: plan_seconds(curve, packs_at(k), slots, setup, iterations, per_trial, spread)
               for k in curve}
    fastest = min(seconds.values())
    return min(k for k, s in seconds.items() if s <= (1 + tolerance) * fastest)


def plan_packs(spec: ResolvedSpec, slots: int) -> Callable[[int], list[int]]:
    """The sizes of the trials ``spec`` plans with ``slots`` trials at once, as a function of
    its pack size K: its grid packs (:func:`sweeps.plan.pack_counts` over its groups of
    configurations that can share a pack), then each Optuna cell's batches
    (:func:`sweeps.plan.optuna_batches`). The plan is built once, its groups counted once:
    only the dealing depends on K (:func:`build_plan` itself costs 0.15 s for 896
    configurations on this project's CPU, most of it their trial keys)."""
    plan = build_plan(dataclasses.replace(spec, pack_size=1))
    module = experiments.get(spec.experiment)
    groups = [len(g) for g in group([m for p in plan.packs for m in p], module)]
    remaining = {c: plan.remaining(c) for c in plan.optuna_cells}

    def sizes(k: int) -> list[int]:
        counts = pack_counts(groups, k, slots)
        out = [len(chunk) for n, c in zip(groups, counts, strict=True)
               for chunk in deal(range(n), c)]
        batches = optuna_batches(plan.optuna_cells, module, k, remaining, slots)
        return out + [n for cell in plan.optuna_cells for n in batches[cell]]
    return sizes


class Clock:
    """A trainer's reporter that notes when each member reported which step, from its first
    report after training began (a report at step 0 comes before the first iterations, whose
    one-off costs, such as loading kernels or capturing a CUDA graph, are not timed)."""

    def __init__(self) -> None:
        self.first: dict[int, tuple[float, int]] = {}
        self.last: dict[int, tuple[float, int]] = {}

    def __call__(self, report: Report) -> None:
        if report.step == 0:
            return
        now = time.perf_counter()
        self.first.setdefault(report.member, (now, report.step))
        self.last[report.member] = (now, report.step)

    def trained(self) -> int:
        """Iterations the members trained in all, by their last reports (each member's step
        counts its iterations from the start)."""
        return sum(step for _, step in self.last.values())

    def rate(self) -> float | None:
        """Configs·iterations per second from the first report to the last (None when no
        member trained between two reports)."""
        if not self.first:
            return None
        start = min(t for t, _ in self.first.values())
        end = max(t for t, _ in self.last.values())
        iterations = sum(self.last[m][1] - self.first[m][1] for m in self.first)
        return iterations / (end - start) if iterations > 0 and end > start else None


def measure(module: Any, configs: Sequence[Any]) -> Clock:
    """The reports' clock of ``module.train`` on the pack ``configs`` (already probe
    configurations)."""
    clock = Clock()
    module.train(list(configs), clock)
    return clock


def _memory_budget(device: str, gpu: float) -> float | None:
    """Bytes a probed pack may fill on ``device`` (None on a CPU)."""
    if not device.startswith("cuda"):
        return None
    import torch

    free, _ = torch.cuda.mem_get_info(torch.device(device))
    return MEMORY_SHARE * free * min(1.0, gpu or 1.0)


@dataclass(frozen=True)
class Probe:
    """What the probe measured on a trial's device (the Ray task's result)."""

    curve: dict[int, float]
    """Configs·iterations per second by pack size."""
    ended: str
    """Why the ladder ended there: the cap, the time limit, the memory budget or an
    out-of-memory error, in words for :attr:`Choice.why`."""
    peak_bytes: dict[int, int] = dataclasses.field(default_factory=dict)
    """Peak GPU memory allocated by pack size (empty on a CPU)."""
    setup: dict[int, float] = dataclasses.field(default_factory=dict)
    """Seconds of each point, after the first, outside its training iterations (its wall
    time less the iterations its members trained at the measured rate): data, weights,
    pre-training and the one-off costs of the first iterations, which a trial pays per pack."""


def extrapolate(points: Mapping[int, float], k: int) -> float:
    """A point's cost at pack size ``k`` from the costs of the pack sizes before it: on the
    line through the last two (a fixed part and a part per member), never below the last; from
    a single point, in proportion to K."""
    sizes = sorted(points)[-2:]
    last = points[sizes[-1]]
    if len(sizes) == 1:
        return last * k / sizes[-1]
    slope = (last - points[sizes[0]]) / (sizes[1] - sizes[0])
    return max(last, last + slope * (k - sizes[1]))


def probe_curve(module_path: str, params: Sequence[Mapping[str, Any]], cpus: float,
                gpu: float, seconds: float = PROBE_SECONDS) -> Probe:
    """The throughput curve of the reference configurations ``params`` (the Ray task of
    step 2 of the module docstring; ``len(params)`` is the cap)."""
    import torch

    from sweeps.trial import limit_threads, resolve_device

    limit_threads(cpus)
    module = importlib.import_module(module_path)
    base = [module.probe_config(from_dict(module.Config, resolve_device(p))) for p in params]
    device = str(getattr(base[0], "device", "cpu"))
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    budget = _memory_budget(device, gpu)
    curve: dict[int, float] = {}
    walls: dict[int, float] = {}
    setup: dict[int, float] = {}
    growth: dict[int, float] = {}
    peaks: dict[int, int] = {}
    started: float | None = None
    first: float | None = None  # the first point's iterations at its rate: its wall time
    # also holds the process's one-off costs, so the second point is extrapolated from this
    sizes = ladder(len(base))
    for k, following in zip(sizes, [*sizes[1:], None], strict=True):
        if budget is not None:
            torch.cuda.reset_peak_memory_stats(device)
            before = torch.cuda.memory_allocated(device)
        point = time.monotonic()
        try:
            clock = measure(module, [base[i % len(base)] for i in range(k)])
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            return Probe(curve, f"an out-of-memory error at K = {k}", peaks, setup)
        now = time.monotonic()
        rate = clock.rate()
        if rate is not None:
            curve[k] = rate
        if started is None:  # the first point pays the process's one-off costs
            started = now
            first = clock.trained() / rate if rate is not None else None
        else:
            walls[k] = now - point
            if rate is not None:
                setup[k] = max(0.0, walls[k] - clock.trained() / rate)
        if budget is not None:
            peaks[k] = torch.cuda.max_memory_allocated(device)
            growth[k] = peaks[k] - before
        if following is None:
            break
        ahead = (extrapolate(walls, following) if walls
                 else extrapolate({k: first}, following) if first is not None else 0.0)
        if now + ahead > started + seconds:
            return Probe(curve, f"the time limit (the next point would end past {seconds:g} s "
                         "after the first)", peaks, setup)
        if budget is not None:
            need = torch.cuda.memory_allocated(device) + extrapolate(growth, following)
            if need > budget:
                return Probe(curve, f"the memory budget (the next point would need "
                             f"{need / 2 ** 30:.2f} of {budget / 2 ** 30:.2f} GiB)", peaks, setup)
    return Probe(curve, f"the cap, {len(base)}", peaks, setup)


def references(spec: ResolvedSpec) -> list[dict[str, Any]]:
    """The configurations the probe trains: those of the largest pack the plan could form
    (the first such), or an Optuna cell's point at the low end of each dimension repeated
    as many times as its largest batch; their number (at most :data:`MAX_PACK`) is the cap."""
    wide = build_plan(dataclasses.replace(spec, pack_size=MAX_PACK))
    candidates = [[m.params for m in p] for p in wide.packs]
    for index, cell in wide.optuna_cells.items():
        if (largest := max(wide.optuna_batches[index], default=1)) > 1:
            low = {key: dim.edges()[0] for key, dim in cell.optuna_space.items()}
            candidates.append([{**cell.params, **low}] * largest)
    return max(candidates, key=len, default=[])


def choose(spec: ResolvedSpec, slots: Callable[[], int] = lambda: 1,
           trial_env: Mapping[str, str] | None = None) -> Choice:
    """Measure and choose K for ``spec`` (``pack_size: auto``) in the Ray this process is
    connected to, which runs ``slots()`` trials at once once the probe is over (see the module
    docstring); the probe runs with the trials' ``trial_env`` (the datasets' folder on a
    cluster's nodes: :func:`sweeps.ray_session.data_dir_variables`)."""
    if spec.scheduler is not None:
        return Choice(1, {}, "1 (an early-stopping scheduler judges one configuration per "
                      "trial)")
    params = references(spec)
    if len(params) <= 1:
        return Choice(1, {}, "1 (no two configurations can share a pack)")
    default = min(DEFAULT_PACK_SIZE, len(params))
    module_path = experiments.EXPERIMENTS[spec.experiment]
    if not hasattr(experiments.get(spec.experiment), "probe_config"):
        return Choice(default, {}, f"{default}, the default ({spec.experiment} has no "
                      "probe_config to measure with)")
    import ray

    # max_calls=1: the worker exits after the probe and frees what it held (the trainer's
    # data; on a GPU its CUDA context and cached memory) for the trials. Ray sets it for GPU
    # tasks only when num_gpus is given to ray.remote itself, not to .options().
    env = {"runtime_env": {"env_vars": dict(trial_env)}} if trial_env else {}
    task = ray.remote(num_cpus=spec.resources.cpu, num_gpus=spec.resources.gpu, max_retries=0,
                      max_calls=1, **env)(probe_curve)
    started = time.monotonic()
    try:
        probe = ray.get(task.remote(module_path, params, spec.resources.cpu,
                                    spec.resources.gpu, PROBE_SECONDS))
    except Exception as err:  # the trials will meet the same error and track it
        first = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        return Choice(default, {}, f"{default}, the default (the probe failed: {first})")
    seconds = time.monotonic() - started
    if not probe.curve:
        return Choice(default, {}, f"{default}, the default (the probe measured nothing; "
                      f"its ladder ended at {probe.ended})")
    return decide(spec, params, probe, slots(), seconds)


def weighing(spec: ResolvedSpec, params: Sequence[Mapping[str, Any]],
             probe: Probe) -> tuple[int | None, dict[str, Any]]:
    """A configuration's iteration budget by the experiment's ``iteration_budget`` (None where
    it has none) and the keywords of :func:`plan_seconds` and :func:`best_k` with which
    :func:`decide` times ``spec``'s plans from ``probe`` (measured on the reference
    configurations ``params``): with a budget, each trial's :data:`TRIAL_SECONDS` and its
    pack's set-up weighed against the iterations of a configuration's whole budget (an upper
    bound: a member that stops sooner makes them weigh more; the budget of the reference
    configurations, those of the largest group, taken for every group), else iterations
    alone; where the experiment's ``ends_early`` says the reference configurations' members
    can end before that budget, each pack timed with its members' ends spread evenly over it
    (:func:`spread_seconds`)."""
    module = experiments.get(spec.experiment)
    reference = from_dict(module.Config, dict(params[0]))
    budget = (module.iteration_budget(reference)
              if hasattr(module, "iteration_budget") else None)
    spread = bool(getattr(module, "ends_early", lambda _: False)(reference))
    if budget is None:
        return None, {"setup": {}, "iterations": 1, "per_trial": 0.0, "spread": spread}
    return budget, {"setup": dict(probe.setup), "iterations": budget,
                    "per_trial": TRIAL_SECONDS, "spread": spread}


def decide(spec: ResolvedSpec, params: Sequence[Mapping[str, Any]], probe: Probe, slots: int,
           seconds: float) -> Choice:
    """The choice of step 4 of the module docstring for ``spec`` with ``slots`` trials at
    once, from ``probe`` (measured on the reference configurations ``params`` in
    ``seconds``), its plans timed as :func:`weighing` says."""
    budget, weighed = weighing(spec, params, probe)
    packs_at = plan_packs(spec, slots)
    k = best_k(probe.curve, packs_at, slots, **weighed)
    points = ", ".join(f"{n}: {rate:.0f}" for n, rate in probe.curve.items())
    setup = weighed["setup"]
    against = (f"; a trial's {TRIAL_SECONDS:g} s and its pack's set-up "
               f"{setup_seconds(setup, k):.2f} s against at most {budget:,} iterations "
               "a configuration" if budget is not None else "")
    ends = "; members' ends spread over their budget" if weighed["spread"] else ""
    return Choice(k, probe.curve, f"{k} (configs·iterations/s by pack size {points}, "
                  f"ended at {probe.ended}{against}{ends}; probe {seconds:.1f} s; "
                  f"{len(packs_at(k))} trial(s) on {slots} slot(s) at once)", setup)


def settle(spec: ResolvedSpec, stream: TextIO | None = None,
           slots: Callable[[], int] = lambda: 1, trial_env: Mapping[str, str] | None = None,
           ) -> tuple[ResolvedSpec, dict[str, str]]:
    """``spec`` with a numeric ``pack_size`` and the parent run's tags that record it: for
    ``auto`` the measured choice for ``slots()`` trials at once (printed to ``stream``; the
    probe with the trials' ``trial_env``), else ``spec`` as it is and no tags. Runs in the
    sweep's Ray session, before planning."""
    if spec.pack_size != AUTO:
        return spec, {}
    choice = choose(spec, slots, trial_env)
    if stream is not None:
        print(f"pack_size auto: {choice.why}", file=stream, flush=True)
    return dataclasses.replace(spec, pack_size=choice.k), choice.tags()


def recorded(spec: ResolvedSpec, tags: Mapping[str, str]) -> ResolvedSpec:
    """``spec`` with the pack size its sweep's parent run recorded (``tags``), for a resume;
    unchanged unless ``pack_size`` is ``auto``. ``ConfigError`` (field ``pack_size``) when
    the tag is missing or not a positive integer."""
    if spec.pack_size != AUTO:
        return spec
    value = tags.get(contract.PACK_SIZE, "")
    if not value.isdigit() or int(value) < 1:
        raise ConfigError("pack_size", f"a sweep whose parent run records the {AUTO} pack size "
                          f"(tag {contract.PACK_SIZE}); start a new sweep", value or None)
    return dataclasses.replace(spec, pack_size=int(value))

