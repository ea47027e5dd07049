"""Report of ``orth-pretrain-convergence`` (paper M §II-A, EXPERIMENTS.md M-pre): convergence of
orthogonal pre-training per distribution of the initial matrix (and per setting the sweep
varies): success rate, mean/min/max/std steps and repeats, pooled over seeds, beside the
published ones (:data:`analysis.published.manchev.PRETRAIN`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.claims import Claim, judge
from analysis.groups import Group, done_runs, expected_count
from analysis.load import Histories, SweepRuns, param_values
from analysis.published.manchev import PRETRAIN
from analysis.report import Report, expected, provenance
from analysis.tables import OUTSIDE, Cell, Table

PRETRAIN_SYMBOLS: dict[str, str] = {"size": "m", "init_std": "σ", "uniform_bound": "b",
                                    "pretrain_lr": "αₚ", "pretrain_tol": "tol",
                                    "pretrain_max_steps": "max steps"}
"""Config key -> column header, for keys a pre-training sweep varies."""
_NOT_GROUPED = ("seed", "data_seed", "device")


def _varying(frame: pd.DataFrame) -> list[str]:
    """Params (without ``params.``) that take more than one value among the rows, seeds
    aside."""
    return [c.removeprefix("params.") for c in frame.columns
            if c.startswith("params.") and c.removeprefix("params.") not in _NOT_GROUPED
            and frame[c].astype(str).nunique() > 1]


def pool_pretrain(runs: pd.DataFrame, dist: str) -> dict[str, float] | None:
    """One distribution's statistics pooled over configurations (seeds): total repeats,
    success rate, mean, sample std (pooled exactly from each configuration's count, mean and
    std of converged matrices), min and max steps. None when no configuration has them."""
    col = f"metrics.{dist}_"
    if f"{col}repeats" not in runs:
        return None
    rows = runs[runs[f"{col}repeats"].notna()]
    if rows.empty:
        return None
    repeats = rows[f"{col}repeats"].to_numpy(float)
    n = np.rint(rows[f"{col}success_rate"].to_numpy(float) * repeats)
    out = {"repeats": repeats.sum(), "success_rate": n.sum() / repeats.sum(),
           "mean": math.nan, "std": math.nan, "min": math.nan, "max": math.nan}
    ok = n > 0
    if ok.any():
        n, means = n[ok], rows[f"{col}mean_steps"].to_numpy(float)[ok]
        stds = rows[f"{col}std_steps"].to_numpy(float)[ok]
        mean = (n * means).sum() / n.sum()
        within = ((n - 1) * stds**2).sum() + (n * (means - mean) ** 2).sum()
        out.update(mean=mean, std=math.sqrt(within / (n.sum() - 1)) if n.sum() > 1 else 0.0,
                   min=rows[f"{col}min_steps"].to_numpy(float)[ok].min(),
                   max=rows[f"{col}max_steps"].to_numpy(float)[ok].max())
    return out


def _distributions(frame: pd.DataFrame, spec: pd.DataFrame | None) -> list[str]:
    """The distributions the sweep runs (param ``distributions``, logged comma-joined), in
    the paper's order; both when neither the runs nor the spec say."""
    named: set[str] = set()
    for value in param_values(frame, "distributions"):
        if isinstance(value, str):
            named.update(v.strip() for v in value.split(","))
    if spec is not None and "distributions" in spec:
        for value in spec["distributions"]:
            named.update([value] if isinstance(value, str) else value)
    return [d for d in PRETRAIN if d in named] or list(PRETRAIN)


def pretrain_table(runs: SweepRuns) -> Table:
    """M §II-A: success rate and steps of orthogonal pre-training per distribution (and per
    setting the sweep varies), pooled over seeds, beside the published success rate, mean
    steps and repeats."""
    frame, spec = runs.runs, expected(runs)
    keys = list(dict.fromkeys(_varying(frame) + ([] if spec is None else [
        c for c in spec.columns if c not in (*_NOT_GROUPED, "trials")
        and spec[c].astype(str).nunique() > 1])))
    groups: dict[tuple, pd.DataFrame] = {}
    if keys:
        for values, members in frame.groupby([param_values(frame, k) for k in keys],
                                             dropna=False, sort=True):
            groups[values if isinstance(values, tuple) else (values,)] = members
    else:
        groups[()] = frame
    rows = []
    for values, members in groups.items():
        g = Group(members, expected_count(spec, dict(zip(keys, values, strict=True))))
        partial = g.partial
        done = g.done
        run = _distributions(frame, spec)
        for dist in PRETRAIN:
            pub = PRETRAIN[dist]
            if dist not in run:
                rows.append([dist, *values, OUTSIDE, Cell(pub.success_rate, ".0%"), OUTSIDE,
                             OUTSIDE, Cell(pub.mean_steps, ".2f"), *[OUTSIDE] * 4,
                             Cell(pub.repeats, "d"), OUTSIDE])
                continue
            s = pool_pretrain(done, dist) or dict.fromkeys(
                ("repeats", "success_rate", "mean", "std", "min", "max"))
            rows.append([dist, *values,
                         Cell(s["success_rate"], ".2%", partial), Cell(pub.success_rate, ".0%"),
                         Cell(s["mean"], ".2f", partial),
                         Cell(None if s["mean"] is None else s["mean"] + 1, ".2f", partial),
                         Cell(pub.mean_steps, ".2f"), Cell(s["std"], ".2f", partial),
                         Cell(s["min"], "d", partial), Cell(s["max"], "d", partial),
                         Cell(s["repeats"], "d", partial), Cell(pub.repeats, "d"),
                         g.count_text()])
    return Table(
        name="pretrain-convergence",
        title="M §II-A — convergence of orthogonal pre-training",
        columns=["Distribution", *(PRETRAIN_SYMBOLS.get(k, k) for k in keys), "success",
                 "success (paper)", "mean steps", "mean + 1", "mean (paper)", "std", "min",
                 "max", "repeats", "repeats (paper)", "configurations"],
        rows=rows, provenance=provenance(runs),
        notes=["Steps count the updates W := W − αₚ·4(WWᵀ − I)W applied before Eᵖ < tol; "
               "M's code prints its loop counter, one more ('mean + 1', the count the "
               "published means are compared with).",
               "Pooled over seeds: success and mean over all matrices, std pooled exactly "
               "from each configuration's count, mean and std; min and max over "
               "converged matrices.",
               "Published: Manchev & Spratling §II-A (100 × 100, σ = b = 0.1, αₚ = 0.1, "
               f"Eᵖ < 10⁻⁶, {max(p.repeats for p in PRETRAIN.values()):,} repeats)."])


STEPS_TOLERANCE = 1.0
"""M-pre's mean steps hold when the measured mean (+ 1, M's loop counter) is within this many
steps of the published one."""


def pretrain_claims(runs: SweepRuns) -> list[Claim]:
    """M-pre, per distribution: every matrix converges, in the published mean number of steps
    (within :data:`STEPS_TOLERANCE`); pooled over every finished configuration."""
    frame = runs.runs
    done = done_runs(frame)
    run = _distributions(frame, expected(runs))
    partial = provenance(runs).n_expected not in (None, int(done.shape[0]))
    claims = []
    for dist, pub in PRETRAIN.items():
        s = pool_pretrain(done, dist) if dist in run else None
        rate = f"pre-training converges for every {dist} matrix (paper {pub.success_rate:.0%})"
        steps = f"{dist}: mean steps {pub.mean_steps:.2f} (± {STEPS_TOLERANCE:g})"
        if s is None:
            why = f"profile {runs.sweep.profile} runs no {dist} matrix" if dist not in run \
                else "no configuration finished"
            claims += [judge("M-pre", rate, None, why), judge("M-pre", steps, None, why)]
            continue
        claims.append(judge("M-pre", rate, s["success_rate"] >= 1.0,
                            f"{s['success_rate']:.2%} of {s['repeats']:.0f} matrices", partial))
        mean = s["mean"] + 1
        claims.append(judge("M-pre", steps, None if math.isnan(mean) else
                            abs(mean - pub.mean_steps) <= STEPS_TOLERANCE,
                            f"mean + 1 = {mean:.2f} over the converged matrices", partial))
    return claims


def pretrain_report(runs: SweepRuns, histories: Histories | None) -> Report:
    """Report of ``orth-pretrain-convergence``: the convergence table and its claims (no
    figures)."""
    return Report(runs=runs, tables=[pretrain_table(runs)], claims=pretrain_claims(runs))
