"""Experiment ``orth-pretrain-convergence`` (M-pre): how fast orthogonal pre-training converges
(M §II-A, the experiment after eq. 28).

Run with ``ortho train orth-pretrain-convergence --set repeats=1000``. Each repeat draws a
``size`` × ``size`` matrix W from N(0, σ²) (``normal``) or U(−b, b) (``uniform``) and runs
W := W − αₚ·4(WWᵀ − I)W (M eqs. 16-17, :func:`~ortho_core.init.orthogonal_pretrain`) until
Eᵖ = ‖WWᵀ − I‖²_F < tol. M: 100 × 100, σ = b = 0.1, αₚ = 0.1, tol = 10⁻⁶, 10,000 repeats;
its success rates and mean steps are in ``analysis.published.manchev.PRETRAIN``.

Counting: ``steps`` are the updates applied before Eᵖ < tol was first observed. M's code
(``rand_ortho``) prints its loop counter i, which starts at 1 and evaluates Eᵖ before the
i-th update, so it reports one more than the updates needed (steps + 1 here).

The matrices are "initial weights", so they come from the member's ``seed`` (one CPU
generator per distribution, seeded by ``numpy.random.SeedSequence([seed, d])`` for the d-th
distribution of :data:`DISTRIBUTIONS`), drawn ``batch`` at a time in float64 and
orthogonalised together as one (batch, size, size) tensor; the descent itself always runs in
float64. A member therefore gets the same matrices and step counts in any pack, on any device.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ortho_core.config import check_pack, integer_at_least, one_of, positive, require, seed_value
from ortho_core.devices import check_runtime, resolve_device
from ortho_core.init import orthogonal_pretrain
from ortho_core.reporting import Outcome, Report, Reporter, Result
from ortho_core.subnormals import Subnormals, honours_subnormals

DISTRIBUTIONS = ("normal", "uniform")
"""Where the matrices are drawn from: N(0, σ²) or U(−b, b)."""


@dataclass
class Config:
    """One configuration of the pre-training convergence experiment (M §II-A)."""

    repeats: int = 10_000
    """Matrices orthogonalised per distribution (M: 10,000)."""
    size: int = 100
    """m: the matrices are m × m (M: 100)."""
    distributions: tuple[str, ...] = DISTRIBUTIONS
    """Which of ``normal`` (N(0, σ²)) and ``uniform`` (U(−b, b)) to run, in this order."""
    init_std: float = 0.1
    """σ of the ``normal`` matrices (M: 0.1)."""
    uniform_bound: float = 0.1
    """b of the ``uniform`` matrices (M: 0.1)."""
    pretrain_lr: float = 0.1
    """αₚ: rate of the pre-training descent (M: 0.1)."""
    pretrain_tol: float = 1e-6
    """A matrix has converged once Eᵖ = ‖WWᵀ − I‖²_F < this (M: 10⁻⁶)."""
    pretrain_max_steps: int = 1000
    """A matrix not converged after this many updates counts as a failure."""
    batch: int = 500
    """Matrices orthogonalised at once (memory: about 4·batch·size² float64 per member)."""
    seed: int = 0
    """Seed of this member's matrices."""
    data_seed: int = 0
    """Unused: this experiment has no data stream (the matrices are weights, drawn from
    ``seed``); kept for the common Config contract."""
    device: str = "cpu"
    """Where to run: ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (CUDA when available)."""
    subnormals: Subnormals = "flush"
    """CPU arithmetic on subnormal numbers (below 1.2e-38 in float32): ``flush`` reads and
    writes them as 0, several times faster where gradients vanish; ``keep`` computes them as
    IEEE 754 does (:mod:`ortho_core.subnormals`). No effect on a GPU."""

    def __post_init__(self) -> None:
        for name in ("repeats", "batch", "pretrain_max_steps"):
            integer_at_least(getattr(self, name), name, 1)
        integer_at_least(self.size, "size", 2)
        require(isinstance(self.distributions, tuple) and len(self.distributions) > 0,
                "distributions", "one or more of " + ", ".join(DISTRIBUTIONS),
                self.distributions)
        for name in self.distributions:
            one_of(name, DISTRIBUTIONS, "distributions")
        require(len(set(self.distributions)) == len(self.distributions), "distributions",
                "no distribution twice", self.distributions)
        positive(self.init_std, "init_std")
        positive(self.uniform_bound, "uniform_bound")
        positive(self.pretrain_lr, "pretrain_lr")
        positive(self.pretrain_tol, "pretrain_tol")
        seed_value(self.seed, "seed")
        seed_value(self.data_seed, "data_seed")
        check_runtime(self.device, self.subnormals)


PACK_FIELDS: tuple[str, ...] = (
    "repeats", "size", "distributions", "pretrain_max_steps", "batch", "data_seed", "device",
    "subnormals",
)
"""Fields equal across a pack; σ, b, αₚ, tol and seed may differ per member."""


def planned_steps(config: Config) -> int:
    """The ``step`` of a member's last report: ``repeats`` matrices for each of its
    ``distributions``. A report's ``step`` counts matrices pre-trained, not descent updates (a
    member reports after every ``batch`` of them, the last batch of each distribution perhaps
    smaller). Every member reaches it: a matrix that converges, fails or diverges leaves the
    batch, but the member goes on to the next matrices, so nothing ends a member early."""
    return config.repeats * len(config.distributions)


ROUND_STEPS = 8
"""Updates between two compactions of the batch in :func:`orthogonalise` (speed only)."""


def draw_matrices(config: Config, distribution: str, generator: torch.Generator,
                  count: int) -> Tensor:
    """``count`` matrices (count, size, size) float64 on the CPU from ``distribution``."""
    shape = (count, config.size, config.size)
    if distribution == "normal":
        return torch.randn(shape, generator=generator, dtype=torch.float64) * config.init_std
    u = torch.rand(shape, generator=generator, dtype=torch.float64)
    return (2 * u - 1) * config.uniform_bound


def orthogonalise(w: Tensor, lr: Tensor, tol: Tensor,
                  max_steps: int) -> tuple[Tensor, Tensor, Tensor]:
    """Pre-train every matrix of ``w`` (..., m, m) at its own ``lr`` and ``tol`` (...); returns
    its steps, whether it converged and whether its Eᵖ stayed finite, each (...) on the CPU.

    The same descent and step count as one :func:`orthogonal_pretrain` call with
    ``max_steps``, run in rounds of :data:`ROUND_STEPS` updates between which the converged
    and the diverged matrices are dropped from the batch: one call would keep computing
    every matrix until the slowest converges (about twice the mean count).
    """
    shape = w.shape[:-2]
    rows = w.reshape(-1, *w.shape[-2:])
    lr, tol = lr.reshape(-1), tol.reshape(-1)
    left = torch.arange(len(rows), device=w.device)
    steps = torch.zeros(len(rows), dtype=torch.long, device=w.device)
    converged = torch.zeros(len(rows), dtype=torch.bool, device=w.device)
    finite = torch.ones(len(rows), dtype=torch.bool, device=w.device)
    taken = 0
    while len(left) and taken < max_steps:
        budget = min(ROUND_STEPS, max_steps - taken)
        result = orthogonal_pretrain(rows, lr[left], tol[left], budget)
        steps[left] += result.steps
        converged[left] = result.converged
        finite[left] = torch.isfinite(result.error)
        go_on = ~result.converged & torch.isfinite(result.error)
        left, rows = left[go_on], result.weights[go_on]
        taken += budget
    return steps.view(shape).cpu(), converged.view(shape).cpu(), finite.view(shape).cpu()


METRICS: dict[str, str] = {
    **{f"{dist}_{stat}": f"{meaning} so far ({dist} initial matrices)" for dist in DISTRIBUTIONS
       for stat, meaning in (("success_rate", "fraction of the matrices that converged"),
                             ("mean_steps", "mean steps of the converged matrices"))},
}
"""Every key a report's metrics can hold, with its meaning (what a spec's
``scheduler.metric_step`` may name): see :func:`train`."""

SUMMARY: dict[str, str] = {
    **{f"{dist}_{stat}": f"{meaning} ({dist} initial matrices)" for dist in DISTRIBUTIONS
       for stat, meaning in (("success_rate", "fraction of the repeats that converged"),
                             ("repeats", "matrices pre-trained"),
                             ("mean_steps", "mean steps of those that converged"),
                             ("std_steps", "their standard deviation"),
                             ("min_steps", "their fewest steps"),
                             ("max_steps", "their most steps"))},
    "wall_time": "seconds the pack ran",
}
"""The keys a member's ``Result.summary`` can hold and their meanings: what a spec's
``metric.name`` may name (checked when the spec is resolved), listed by ``ortho train --keys``."""


@honours_subnormals
def train(configs: Sequence[Config], reporter: Reporter) -> list[Result]:
    """Orthogonalise ``repeats`` matrices per distribution for every member of the pack.

    After each batch, every member is reported with, for the distribution in progress,
    ``<dist>_success_rate`` and ``<dist>_mean_steps`` so far; ``step`` counts the matrices
    done over all distributions. Summary per distribution: ``<dist>_success_rate``,
    ``<dist>_mean_steps``, ``<dist>_std_steps`` (sample standard deviation),
    ``<dist>_min_steps``, ``<dist>_max_steps`` (over the converged matrices; absent if none)
    and ``<dist>_repeats``; plus ``wall_time``. Artifact ``steps_histogram``: per
    distribution, steps -> number of converged matrices. Outcome: ``solved`` when every
    matrix converged, ``diverged`` when some Eᵖ became NaN or inf, else ``unsolved``.
    """
    check_pack(configs, PACK_FIELDS)
    started = time.monotonic()
    cfg = configs[0]
    device = resolve_device(cfg.device)
    k = len(configs)
    lr = torch.tensor([c.pretrain_lr for c in configs], dtype=torch.float64, device=device)
    tol = torch.tensor([c.pretrain_tol for c in configs], dtype=torch.float64, device=device)
    summaries: list[dict[str, float]] = [{} for _ in configs]
    histograms: list[dict[str, dict[str, int]]] = [{} for _ in configs]
    diverged = [False] * k
    done = 0
    for dist in cfg.distributions:
        generators = [torch.Generator().manual_seed(_seed(c.seed, DISTRIBUTIONS.index(dist)))
                      for c in configs]
        steps = torch.zeros(k, 0, dtype=torch.long)
        converged = torch.zeros(k, 0, dtype=torch.bool)
        for start in range(0, cfg.repeats, cfg.batch):
            count = min(cfg.batch, cfg.repeats - start)
            w = torch.stack([draw_matrices(c, dist, g, count)
                             for c, g in zip(configs, generators, strict=True)]).to(device)
            b_steps, b_converged, b_finite = orthogonalise(
                w, lr[:, None].expand(k, count), tol[:, None].expand(k, count),
                cfg.pretrain_max_steps)
            steps = torch.cat([steps, b_steps], dim=1)
            converged = torch.cat([converged, b_converged], dim=1)
            finite = b_finite.all(dim=1).tolist()
            rate = converged.double().mean(dim=1)
            mean = (steps * converged).sum(dim=1) / converged.sum(dim=1)
            for i in range(k):
                diverged[i] = diverged[i] or not finite[i]
                metrics = {f"{dist}_success_rate": float(rate[i])}
                if bool(converged[i].any()):
                    metrics[f"{dist}_mean_steps"] = float(mean[i])
                reporter(Report(member=i, step=done + start + count, metrics=metrics))
        done += cfg.repeats
        for i in range(k):
            ok = steps[i][converged[i]]
            summaries[i].update(_statistics(dist, ok, cfg.repeats))
            values, counts = ok.unique(return_counts=True)
            histograms[i][dist] = {str(v): c for v, c in zip(values.tolist(), counts.tolist(),
                                                              strict=True)}
    wall = time.monotonic() - started
    results = []
    for i in range(k):
        summaries[i]["wall_time"] = wall
        rates = [summaries[i][f"{dist}_success_rate"] for dist in cfg.distributions]
        if all(r == 1.0 for r in rates):
            outcome = Outcome.SOLVED
        else:
            outcome = Outcome.DIVERGED if diverged[i] else Outcome.UNSOLVED
        results.append(Result(outcome=outcome, summary=summaries[i],
                              artifacts={"steps_histogram": histograms[i]}))
    return results


def _seed(seed: int, distribution: int) -> int:
    """64 bits of ``numpy.random.SeedSequence([seed, distribution])``."""
    return int(np.random.SeedSequence([seed, distribution]).generate_state(1, np.uint64)[0])


def _statistics(dist: str, steps: Tensor, repeats: int) -> dict[str, float]:
    """Success rate and step statistics of the converged matrices of one distribution."""
    out = {f"{dist}_success_rate": len(steps) / repeats, f"{dist}_repeats": float(repeats)}
    if len(steps):
        s = steps.double()
        out.update({f"{dist}_mean_steps": float(s.mean()),
                    f"{dist}_std_steps": float(s.std()) if len(s) > 1 else 0.0,
                    f"{dist}_min_steps": float(s.min()),
                    f"{dist}_max_steps": float(s.max())})
    return out
