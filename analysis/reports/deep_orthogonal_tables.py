"""The tables of ``deep-orthogonal``'s report (N-F1, N-F3, N-F4) and the selection rules they
share with its figures; see :mod:`analysis.reports.deep_orthogonal`."""

from __future__ import annotations

from typing import Any

import pandas as pd

from analysis.groups import Group, done_runs, first_ranked, group, protocol_notes
from analysis.load import SweepRuns, numeric_values, param_values
from analysis.published.nosarzewski import (
    F1_HIDDEN,
    F1_ORTH_DEPTH,
    F1_ORTH_ERROR,
    F1_RELU_MIN_ERROR,
    F1_RELU_VANISH_DEPTH,
    F3_SPREAD_LIMIT,
    F4_HIDDEN,
    F4_INTERNAL,
    PAPER_PROTOCOL,
)
from analysis.report import provenance
from analysis.tables import OUTSIDE, Cell, Table
from sweeps import contract

NAMES = {v: contract.VARIANT_NAMES[v] for v in ("relu", "orth", "orth_relu")}
"""Variant -> name in tables."""
TRAINED = 0.05
"""A net of N-F3 trains when its best training error is at most this."""
STABLE = F3_SPREAD_LIMIT[1]
"""N-F1: a ReLU net's activation gradient is stable when it varies by at most this many
orders of magnitude over the layers at initialisation, vanished beyond. N §6.1 gives no
number; this is the bound of a gradient that trains in N §6.2. The measured spreads of the
2-unit ReLU nets are either under 3 or 30 (a layer's gradient exactly 0: both units dead on
every point), so any bound between decides alike."""
F4_CLAIMS = {"relu": "untrainable", "orth": "cost and error decrease"}
"""N-F4: what N §6.3 says of each net."""


def _metric(runs: pd.DataFrame, name: str) -> pd.Series:
    return runs.get(f"metrics.{name}", pd.Series(dtype="float64")).dropna()


def lowest_run(g: Group, metric: str) -> pd.Series | None:
    """The group's finished run with the lowest ``metric`` (an error: the figures show the
    run that trained best), or None where no finished run logged it; runs whose value is
    NaN are never picked; ties go to the smaller α (:func:`first_ranked`)."""
    return first_ranked(g.runs, metric, lowest=True)


def _stats(g: Group, metric: str) -> tuple[float | None, float | None]:
    """(min, median) of a summary over the group's finished runs, in %."""
    values = _metric(g.done, metric)
    if values.empty:
        return None, None
    return 100 * float(values.min()), 100 * float(values.median())


def _median(g: Group, metric: str) -> float | None:
    values = _metric(g.done, metric)
    return None if values.empty else float(values.median())


def f1_cells(runs: SweepRuns) -> pd.DataFrame:
    """One row per N-F1 net: ``variant``, ``layers``, ``best`` and ``median`` error (%),
    ``spread`` (median activation-gradient spread at initialisation), counts."""
    rows = []
    frame = runs.runs[runs.runs.get("params.dataset", pd.Series(dtype=object)) == "two_class"]
    for variant in ("relu", "orth"):
        mine = frame[param_values(frame, "variant") == variant]
        for layers in numeric_values(mine, "layers", int):
            g = group(runs, {"dataset": "two_class", "variant": variant, "layers": layers})
            best, median = _stats(g, "best_train_error")
            rows.append({"variant": variant, "layers": layers, "best": best, "median": median,
                         "spread": _median(g, "act_grad_spread_init"),
                         "partial": g.partial, "count": g.count_text()})
    return pd.DataFrame.from_records(rows, columns=["variant", "layers", "best", "median",
                                                    "spread", "partial", "count"])


def f1_verdict(cells: pd.DataFrame) -> str:
    """N-F1's error verdict line (N §6.1: the orthogonal net's 1 % "is better performance than
    that of the standard feedforward networks at any depth [...] which have errors greater
    than 10%"): every ReLU net, whatever its depth, errs on more than 10 % and the
    :data:`F1_ORTH_DEPTH`-layer orthogonal net on less. The evidence names the orthogonal
    depth measured; an orthogonal net of another depth (the smoke profile's) does not decide
    N's statement about the 20-layer one, so then the verdict is none unless the ReLU nets
    already contradict N."""
    relu = cells[cells["variant"] == "relu"].dropna(subset=["best"])
    orth = cells[cells["variant"] == "orth"].dropna(subset=["best"])
    if relu.empty or orth.empty:
        return "Verdict: none — no ReLU net or the orthogonal net did not finish."
    low = relu.loc[relu["best"].idxmin()]
    paper = orth[orth["layers"] == F1_ORTH_DEPTH]
    mine = orth if paper.empty else paper
    orth_best = float(mine["best"].min())
    said = (f"lowest ReLU error {low['best']:.1f} % (L = {int(low['layers'])}), orthogonal "
            f"net {orth_best:.1f} % (L = {_depths(mine)}; N: {F1_ORTH_ERROR:g} % at L = "
            f"{F1_ORTH_DEPTH})")
    good = relu[relu["best"] <= F1_RELU_MIN_ERROR]
    if good.empty and paper.empty:
        return (f"Verdict: none — no orthogonal net of N's {F1_ORTH_DEPTH} layers ran: "
                f"{said}.")
    if good.empty and orth_best < F1_RELU_MIN_ERROR:
        return (f"Verdict: as N — every ReLU net errs on more than {F1_RELU_MIN_ERROR:g} %: "
                f"{said}.")
    return (f"Verdict: differs from N — {said}"
            + (f"; ReLU nets at most {F1_RELU_MIN_ERROR:g} % at L = {_depths(good)}"
               if not good.empty else "") + ".")


def _depths(cells: pd.DataFrame) -> str:
    return ", ".join(str(int(n)) for n in cells["layers"]) or "none"


def f1_vanish_verdict(cells: pd.DataFrame) -> str:
    """N-F1's gradient verdict line (N §6.1, Fig. 1a: "Gradients for networks with less than
    10 layers are stable but as soon as the depth increase to 10 layers or more the gradient
    completely vanishes"): every ReLU net below :data:`F1_RELU_VANISH_DEPTH` layers has a
    stable activation gradient and every deeper one a vanished one. A net's gradient is
    stable when the median over its seeds of its activation-gradient spread at
    initialisation is at most :data:`STABLE` orders of magnitude, vanished beyond."""
    relu = cells[cells["variant"] == "relu"].dropna(subset=["spread"])
    shallow = relu[relu["layers"] < F1_RELU_VANISH_DEPTH]
    deep = relu[relu["layers"] >= F1_RELU_VANISH_DEPTH]
    if shallow.empty or deep.empty:
        return (f"Verdict: none — no finished ReLU net on one side of depth "
                f"{F1_RELU_VANISH_DEPTH}.")
    vanished = relu[relu["spread"] > STABLE]
    agrees = bool((shallow["spread"] <= STABLE).all() and (deep["spread"] > STABLE).all())
    return (f"Verdict: {'as N' if agrees else 'differs from N'} — activation-gradient spread "
            f"beyond {STABLE:g} orders at L = {_depths(vanished)}, within at L = "
            f"{_depths(relu[relu['spread'] <= STABLE])} (N: vanished from L = "
            f"{F1_RELU_VANISH_DEPTH}).")


def f1_table(runs: SweepRuns) -> Table:
    """N-F1: training error against depth for ReLU nets beside the orthogonal net."""
    cells = f1_cells(runs)
    rows = []
    for _, r in cells.iterrows():
        p = bool(r["partial"])
        if r["variant"] == "orth":  # N's net has 20 layers: said where this one has not
            claim = f"{F1_ORTH_ERROR:g}" + (
                "" if r["layers"] == F1_ORTH_DEPTH else f" at L = {F1_ORTH_DEPTH}")
        else:
            claim = f"> {F1_RELU_MIN_ERROR:g}, gradient " + (
                "vanishes" if r["layers"] >= F1_RELU_VANISH_DEPTH else "stable")
        rows.append([NAMES[r["variant"]], int(r["layers"]), Cell(r["best"], ".1f", p),
                     Cell(r["median"], ".1f", p), Cell(r["spread"], ".1f", p), claim,
                     r["count"]])
    if not (cells["variant"] == "orth").any():
        rows.append([NAMES["orth"], F1_ORTH_DEPTH, OUTSIDE, OUTSIDE, OUTSIDE,
                     f"{F1_ORTH_ERROR:g}", OUTSIDE])
    notes = [f1_verdict(cells), f1_vanish_verdict(cells),
             "error %: best training error over evaluations, the lowest over seeds (median "
             "beside); spread: log10(max/min) of ‖∂J/∂a^[l]‖ over the layers at "
             "initialisation, median over seeds (30: a gradient exactly 0); a gradient is "
             f"stable within {STABLE:g} orders, vanished beyond.",
             f"Published: Nosarzewski §6.1, Fig. 1 — {F1_HIDDEN} hidden units; ReLU nets' "
             f"gradients vanish from depth {F1_RELU_VANISH_DEPTH}, error > "
             f"{F1_RELU_MIN_ERROR:g} % at any depth; {F1_ORTH_DEPTH}-layer orthogonal net "
             f"{F1_ORTH_ERROR:g} %.", *_protocol_notes(runs)]
    return Table(name="n-f1-depth", title="N Fig. 1 — two-class 2-D set, 2 hidden units: "
                 "error against depth",
                 columns=["net", "L", "error %", "median %", "spread", "paper",
                          "configurations"],
                 rows=rows, provenance=provenance(runs), notes=notes)


def f3_cells(runs: SweepRuns) -> pd.DataFrame:
    """One row per finished N-F3 run: ``variant``, ``layers``, ``hidden``, ``block``,
    ``spread`` (weight-gradient spread at initialisation), ``error`` (best, %)."""
    done = done_runs(runs.runs)
    spiral = done[param_values(done, "dataset") == "spiral"]
    return pd.DataFrame({
        "variant": param_values(spiral, "variant"),
        "layers": pd.to_numeric(param_values(spiral, "layers")),
        "hidden": pd.to_numeric(param_values(spiral, "hidden")),
        "block": pd.to_numeric(param_values(spiral, "block")).where(
            param_values(spiral, "variant") == "orth_relu"),
        "spread": spiral.get("metrics.weight_grad_spread_init"),
        "error": 100 * spiral.get("metrics.best_train_error", pd.Series(dtype="float64")),
        "run_id": spiral["run_id"]}).reset_index(drop=True)


def f3_chosen(cells: pd.DataFrame) -> pd.DataFrame:
    """N §6.2's choice of block size among the Orth/ReLU runs of :func:`f3_cells`: per depth L
    and width H, the smallest B of the sweep whose median weight-gradient spread at
    initialisation is at most :data:`F3_SPREAD_LIMIT`'s 3 orders of magnitude, with its
    ``spread`` (median), ``trained`` (runs with error ≤ :data:`TRAINED`) and ``runs``; an
    (L, H) with no B within the limit has no row (its B grid stops short)."""
    orth = cells[cells["variant"] == "orth_relu"]
    per = orth.groupby(["layers", "hidden", "block"], as_index=False).agg(
        spread=("spread", "median"), trained=("error", lambda e: int((e <= 100 * TRAINED).sum())),
        runs=("error", "size"))
    within = per[per["spread"] <= F3_SPREAD_LIMIT[1]]
    return within.sort_values("block").groupby(["layers", "hidden"], as_index=False).first()


def f3_verdict(cells: pd.DataFrame) -> str:
    """N-F3's verdict line: every Orth/ReLU net of :func:`f3_chosen` trains on at least one of
    its seeds (N §6.2 at times needed several attempts); the Orth/ReLU runs beyond 3 orders
    are counted beside, not judged (N trained good models with such spreads, which at times
    became unstable and prevented training). Plain ReLU runs take no part."""
    limit = F3_SPREAD_LIMIT[1]
    chosen = f3_chosen(cells)
    if chosen.empty:
        return (f"Verdict: none — no Orth/ReLU net has a gradient spread within {limit:g} "
                "orders of magnitude.")
    said = "; ".join(f"L = {r.layers:g}, H = {r.hidden:g}, B = {r.block:g}: {r.trained}/{r.runs}"
                     for r in chosen.itertuples())
    orth = cells[cells["variant"] == "orth_relu"]
    beyond = orth[orth["spread"] > limit]
    agrees = "as N" if bool((chosen["trained"] > 0).all()) else "differs from N"
    return (f"Verdict: {agrees} — runs that train (error ≤ {100 * TRAINED:g} %) at the "
            f"smallest B within {limit:g} orders: {said}; Orth/ReLU runs beyond {limit:g} "
            f"orders: {int((beyond['error'] <= 100 * TRAINED).sum())}/{len(beyond)} train.")


def f3_table(runs: SweepRuns) -> Table:
    """N-F3: per Orth/ReLU (and ReLU) net on the spiral, gradient spread beside trainability."""
    cells = f3_cells(runs)
    rows = []
    frame = runs.runs
    spiral = frame[param_values(frame, "dataset") == "spiral"]
    for variant in ("orth_relu", "relu"):
        mine = spiral[param_values(spiral, "variant") == variant]
        for layers in numeric_values(mine, "layers", int):
            for hidden in numeric_values(mine, "hidden", int):
                blocks = numeric_values(mine, "block", int) if variant == "orth_relu" else [None]
                for block in blocks:
                    values = {"dataset": "spiral", "variant": variant, "layers": layers,
                              "hidden": hidden} | ({} if block is None else {"block": block})
                    g = group(runs, values)
                    if g.runs.empty and not g.n_expected:
                        continue
                    best, median = _stats(g, "best_train_error")
                    trained = int((_metric(g.done, "best_train_error") <= TRAINED).sum())
                    p = g.partial
                    rows.append([NAMES[variant], layers, hidden,
                                 Cell(block, "d"), Cell(_median(g, "weight_grad_spread_init"),
                                                        ".1f", p),
                                 Cell(_median(g, "weight_grad_spread"), ".1f", p),
                                 Cell(best, ".1f", p), Cell(median, ".1f", p),
                                 f"{trained}/{g.n_done}", g.count_text()])
    notes = [f3_verdict(cells),
             "spread: log10(max/min) of the weight-gradient norms over the layers, at "
             "initialisation and after training, median over seeds; trained: seeds whose best "
             f"training error ≤ {100 * TRAINED:g} %; error %: lowest over seeds (median beside).",
             "Published: Nosarzewski §6.2, Fig. 3 — B set to the smallest for which the "
             f"gradient varies by no more than {F3_SPREAD_LIMIT[0]:g}-{F3_SPREAD_LIMIT[1]:g} "
             "orders of magnitude; beyond 3, good models still trained but the gradients at "
             "times became unstable and prevented training; with stable gradients and many "
             "orthogonal layers training was unpredictable (several attempts at times); "
             "λ = 0.001 on the ReLU layers.",
             *_protocol_notes(runs)]
    return Table(name="n-f3-orth-relu", title="N Fig. 3 — Orth/ReLU nets on the spiral: "
                 "gradient spread and trainability",
                 columns=["net", "L", "H", "B", "spread init", "spread end", "error %",
                          "median %", "trained", "configurations"],
                 rows=rows, provenance=provenance(runs), notes=notes)


def f4_rows(runs: SweepRuns) -> dict[str, dict[str, Any]]:
    """Per variant of N-F4: best and median test error (%), spread, baseline, group."""
    out = {}
    for variant in ("relu", "orth"):
        g = group(runs, {"dataset": "mnist", "variant": variant})
        if g.runs.empty and not g.n_expected:
            continue
        best, median = _stats(g, "best_test_error")
        base = _median(g, "baseline_error")
        out[variant] = {"best": best, "median": median, "group": g,
                        "train": _stats(g, "best_train_error")[0],
                        "spread": _median(g, "act_grad_spread_init"),
                        "baseline": None if base is None else 100 * base}
    return out


def f4_verdict(rows: dict[str, dict[str, Any]]) -> str:
    """N-F4's verdict line (N §6.3: the 50-layer standard net cannot be trained, the
    orthogonal one learns): as N when the ReLU net's best test error is at most 1 point below
    the majority-class error (100 % where the runs logged none) and the orthogonal net's is
    at least 10 points below the ReLU net's; none while either net has no finished run."""
    relu, orth = rows.get("relu"), rows.get("orth")
    if not relu or not orth or relu["best"] is None or orth["best"] is None:
        return "Verdict: none — a MNIST net did not finish."
    base = relu["baseline"] if relu["baseline"] is not None else 100.0
    stuck = relu["best"] >= base - 1.0
    if stuck and orth["best"] <= relu["best"] - 10.0:
        return (f"Verdict: as N — the ReLU net stays at {relu['best']:.1f} % test error "
                f"(majority class {base:.1f} %), the orthogonal net reaches {orth['best']:.1f} %.")
    return (f"Verdict: differs from N — ReLU {relu['best']:.1f} %, orthogonal "
            f"{orth['best']:.1f} % (majority class {base:.1f} %).")


def f4_table(runs: SweepRuns) -> Table:
    """N-F4: MNIST, 4 hidden units, standard against orthogonal net of the same depth; the
    title states N's depths (the standard net 50 layers, the orthogonal net 50 internal
    layers and a first and last matrix) beside those the sweep measured."""
    rows_by = f4_rows(runs)
    rows = []
    for variant, r in rows_by.items():
        g, p = r["group"], r["group"].partial
        layers = numeric_values(g.runs, "layers", int)
        rows.append([NAMES[variant], ", ".join(map(str, layers)), Cell(r["best"], ".1f", p),
                     Cell(r["median"], ".1f", p), Cell(r["train"], ".1f", p),
                     Cell(r["spread"], ".1f", p), Cell(r["baseline"], ".1f", p),
                     F4_CLAIMS[variant], g.count_text()])
    for variant in [v for v in F4_CLAIMS if v not in rows_by]:
        rows.append([NAMES[variant], OUTSIDE, *[OUTSIDE] * 5, F4_CLAIMS[variant],
                     OUTSIDE])
    notes = [f4_verdict(rows_by),
             "test error %: best over evaluations, lowest over seeds (median beside); train %: "
             "best training error on the evaluation images; spread: activation-gradient "
             "spread at initialisation (orders of magnitude); majority %: error of always "
             "answering the commonest class.",
             f"Published: Nosarzewski §6.3, Fig. 4 — 4 hidden units; a standard net {F4_INTERNAL}"
             " layers deep cannot be trained; the orthogonal net (first and last layer a "
             f"matrix with sign-flip, {F4_INTERNAL} internal orthogonal layers) learns.",
             *_protocol_notes(runs)]
    mnist = runs.runs[param_values(runs.runs, "dataset") == "mnist"]
    depths = ", ".join(map(str, numeric_values(mnist, "layers", int)))
    title = (f"N Fig. 4 — MNIST, {F4_HIDDEN} hidden units: N's standard net {F4_INTERNAL} "
             f"layers deep, its orthogonal net {F4_INTERNAL} + 2; "
             + (f"measured at L = {depths}" if depths else "no MNIST run"))
    return Table(name="n-f4-mnist", title=title,
                 columns=["net", "L", "test error %", "median %", "train %", "spread",
                          "majority %", "paper", "configurations"],
                 rows=rows, provenance=provenance(runs), notes=notes)


def _protocol_notes(runs: SweepRuns) -> list[str]:
    """N §5's momentum and learning rate where the sweep's differ (:data:`PAPER_PROTOCOL`)."""
    return protocol_notes(runs, PAPER_PROTOCOL, "each step count")
