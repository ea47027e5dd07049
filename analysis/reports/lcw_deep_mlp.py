"""Report of ``lcw-deep-mlp`` (paper K, Kutsuna, linearly constrained weights; EXPERIMENTS.md
K-F12, K-F13, K-F2): the tables of :mod:`analysis.reports.lcw_tables` (``k-fig12``: accuracy,
time per epoch and overhead per network and model; ``k-angle-bias``: the diagnostics at
initialisation) and, with histories, the figures of :mod:`analysis.reports.lcw_figures` (K
Figs. 12, 13 and 2-11), beside what the paper states (:mod:`analysis.published.kutsuna`).

Each of K's statements is judged part by part (``trains, faster than BN; time ≈ +55 %``: three
parts, each on its own evidence) and holds only when every part does; K's +55 % time overhead
was measured on a GPU and is judged only on one (elsewhere it reads ``not comparable``).

Seconds per epoch are the trainer's ``seconds_per_epoch`` divided by its ``pack_size`` (a pack
of K members trains K configurations per epoch); times from a shared machine are noisy, and
an overhead compares trials of equal pack size only when the spec packs none (``pack_size:
1``, as ``lcw-deep-mlp`` does).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from analysis.claims import FAILS, HOLDS, NOT_MEASURED, Claim, beats, judge
from analysis.groups import Group
from analysis.load import Histories, SweepRuns
from analysis.published.kutsuna import FIG13_SHAPE, LCW_OVERHEAD, PUBLISHED, Shape
from analysis.report import Report
from analysis.reports.lcw_figures import (
    activation_figure,
    angle_figure,
    gradient_figure,
    train_accuracy_figure,
)
from analysis.reports.lcw_tables import (
    MODELS,
    angle_bias_table,
    chosen,
    device,
    fig12_table,
    seconds_per_epoch,
)

TRAINS = 0.5
"""A network *trains* when its best training accuracy reaches this (chance: 0.1)."""
STUCK = 0.2
"""A network *does not train* (stays near chance) when its best training accuracy stays at or
below this."""
EXPLODES = "explodes after a few updates"
"""K §5.2's statement on ReLU MLP_LCW(20, 256), judged on the run's outcome (:func:`_explodes`),
not on its accuracy."""
OVERHEAD_TOLERANCE = 0.2
"""MLP_LCW(100, 128)'s time overhead over the plain MLP bears out K's "approximately 55 %"
(:data:`~analysis.published.kutsuna.LCW_OVERHEAD`) when within this of it (±20 points): K's
implementation and GPU are not this project's, so only the size is judged, told apart from a
negligible overhead or a doubling."""

ACCURACIES: dict[str, str] = {"best_train_accuracy": "best train accuracy",
                              "mean_train_accuracy": "mean train accuracy over the epochs"}
"""The trainer's summaries the claims read -> their name in the evidence."""


@dataclass(frozen=True)
class Part:
    """The verdict on one part of a statement of K (``trains``, ``faster than BN``, ...)."""

    ok: bool | None
    """True holds, False fails, None not judged."""
    evidence: str
    """The measured numbers that decide it, or what is missing."""
    partial: bool = False
    """The numbers rest on an incomplete set of configurations."""
    unjudged: str = NOT_MEASURED
    """What a part that is not judged reads (``not comparable``: measured, but not where K
    measured it)."""

    def status(self) -> str:
        """``holds``, ``does not hold``, or why it is not judged."""
        return self.unjudged if self.ok is None else HOLDS if self.ok else FAILS


def _name(shape: Shape, variant: str) -> str:
    return f"{MODELS[variant]}({shape[1]}, {shape[2]})"


def _unmeasured(runs: SweepRuns, g: Group, name: str) -> Part:
    """The part of a configuration with no finished run."""
    return Part(None, f"{name} not measured" + (
        f" (profile {runs.sweep.profile} does not run it)" if g.runs.empty else ""), g.partial)


def _accuracy(runs: SweepRuns, shape: Shape, variant: str,
              metric: str = "best_train_accuracy") -> tuple[float | None, bool, str]:
    """The chosen configuration's ``metric`` (a training accuracy), whether its group is
    partial, and the evidence text."""
    g, best = chosen(runs, shape, variant)
    value = None if best is None else best.get(f"metrics.{metric}")
    value = None if value is None or value != value else float(value)
    name = f"{_name(shape, variant)} {ACCURACIES[metric]}"
    if value is None:
        return None, g.partial, _unmeasured(runs, g, name).evidence
    outcome = "" if best is None else f", {best['outcome']}"
    return value, g.partial, f"{name} {100 * value:.1f} %{outcome}"


def _trains(runs: SweepRuns, shape: Shape, variant: str) -> Part:
    """Best training accuracy at least :data:`TRAINS`."""
    value, partial, text = _accuracy(runs, shape, variant)
    return Part(None if value is None else value >= TRAINS, text, partial)


def _stuck(runs: SweepRuns, shape: Shape, variant: str) -> Part:
    """Best training accuracy at most :data:`STUCK` (near chance throughout)."""
    value, partial, text = _accuracy(runs, shape, variant)
    return Part(None if value is None else value <= STUCK, text, partial)


def _explodes(runs: SweepRuns, shape: Shape, variant: str) -> Part:
    """K §5.2: "the output values of the network exploded". That holds only for a run whose
    outcome is ``diverged`` (its training loss became NaN or inf); a run that stays near
    chance with a finite loss stalled, it did not explode. "After a few updates" is not
    judged: the trainer records the epochs a member completed, not the update it diverged
    at."""
    g, best = chosen(runs, shape, variant)
    name = _name(shape, variant)
    if best is None:
        return _unmeasured(runs, g, name)
    outcome = str(best["outcome"])
    text = f"{name} outcome {outcome}"
    loss = best.get("metrics.train_loss")
    if outcome != "diverged" and loss is not None and loss == loss:
        text += f", final train loss {float(loss):.3g}"
    return Part(outcome == "diverged", text, g.partial)


def _faster_than_bn(runs: SweepRuns, shape: Shape, variant: str = "lcw") -> Part:
    """MLP_LCW's mean training accuracy over the epochs strictly above MLP_BN's (K's "higher
    rate of increase", :func:`lcw_claims`)."""
    lcw, lcw_partial, lcw_text = _accuracy(runs, shape, variant, "mean_train_accuracy")
    bn, bn_partial, bn_text = _accuracy(runs, shape, "bn", "mean_train_accuracy")
    return Part(None if lcw is None or bn is None else lcw > bn, f"{lcw_text}; {bn_text}",
                lcw_partial or bn_partial)


def _timed(runs: SweepRuns, shape: Shape,
           variants: tuple[str, str]) -> tuple[list[float], list[str], bool] | Part:
    """The seconds per epoch and configuration of each of ``variants``' chosen runs, the
    devices they ran on, and whether a group is partial; the :class:`Part` saying which is
    not measured instead, when one is not."""
    found = [chosen(runs, shape, variant) for variant in variants]
    partial = any(g.partial for g, _ in found)
    seconds, devices = [], []
    for variant, (g, row) in zip(variants, found, strict=True):
        value = seconds_per_epoch(row)
        if row is None or value is None:
            return replace(_unmeasured(runs, g, f"{_name(shape, variant)} time"),
                           partial=partial)
        seconds.append(value)
        devices.append(device(row))
    return seconds, devices, partial


def _overhead_as_published(runs: SweepRuns, shape: Shape, variant: str) -> Part:
    """The time overhead over the plain MLP within :data:`OVERHEAD_TOLERANCE` of K's
    :data:`~analysis.published.kutsuna.LCW_OVERHEAD`.

    K measured it on a GPU (§5.1: the GPU vendor's BN, their own LCW layers), so it is judged
    only where both runs name a CUDA device. Elsewhere the measured overhead is shown, marked
    ``not comparable``, and not judged: on a CPU the layers' relative costs differ from a
    GPU's (and the plain MLP's time depends on subnormal arithmetic). A statement with such
    a part does not hold: it is not measured, unless another part fails."""
    timed = _timed(runs, shape, (variant, "plain"))
    if isinstance(timed, Part):
        return timed
    (seconds, plain), devices, partial = timed
    overhead = seconds / plain - 1
    text = (f"{_name(shape, variant)} {100 * overhead:+.0f} % vs plain, {seconds:.2f} vs "
            f"{plain:.2f} s / epoch on {' and '.join(dict.fromkeys(devices))}")
    if not all(d.startswith("cuda") for d in devices):
        return Part(None, f"{text}; K's +{100 * LCW_OVERHEAD:.0f} % is a GPU's", partial,
                    "not comparable")
    return Part(abs(overhead - LCW_OVERHEAD) <= OVERHEAD_TOLERANCE, text, partial)


def _slower_than_lcw(runs: SweepRuns, shape: Shape, variant: str) -> Part:
    """BN's seconds per epoch and configuration strictly above LCW's, on the same device.

    Judged on any device, a CPU too: the ordering is K's argument that BN computes more than
    LCW (the mean and standard deviation of every neuron's input against one multiplication
    by B_m, K §4), not a number of K's GPU. Runs on different devices are not compared."""
    timed = _timed(runs, shape, (variant, "lcw"))
    if isinstance(timed, Part):
        return timed
    (seconds, lcw), devices, partial = timed
    text = (f"{_name(shape, variant)} {seconds:.2f} s / epoch, {_name(shape, 'lcw')} "
            f"{lcw:.2f} s / epoch, on {' and '.join(dict.fromkeys(devices))}")
    if len(set(devices)) > 1:
        return Part(None, text, partial, "not comparable")
    return Part(seconds > lcw, text, partial)


PARTS: dict[str, Callable[[SweepRuns, Shape, str], Part]] = {
    "trains": _trains, "does not train": _stuck, "10 % training accuracy throughout": _stuck,
    EXPLODES: _explodes, "faster than BN": _faster_than_bn,
    f"time ≈ +{100 * LCW_OVERHEAD:.0f} %": _overhead_as_published,
    "time above LCW's": _slower_than_lcw}
"""Each part of K's statements (:data:`PUBLISHED`, parts separated by ``,`` or ``;``) -> its
judge."""


def _statement(runs: SweepRuns, shape: Shape, variant: str, said: str) -> Claim:
    """K's statement ``said`` on (shape, variant), each of its parts judged by its own
    evidence (:data:`PARTS`): it holds only if every part holds, fails if one fails, and is
    not measured otherwise (a part not measured, or not comparable). The evidence of a
    statement of several parts names each part, its verdict and its numbers."""
    names = re.split(r"[,;] ", said)
    parts = [PARTS[name](runs, shape, variant) for name in names]
    oks = [p.ok for p in parts]
    ok = False if False in oks else None if None in oks else True
    text = parts[0].evidence if len(parts) == 1 else "; ".join(
        f"{name} {p.status()} ({p.evidence})" for name, p in zip(names, parts, strict=True))
    source = "K-F13" if shape == FIG13_SHAPE else "K-F12"
    return judge(source, f"{shape[0]} {_name(shape, variant)}: {said}", ok, text,
                 any(p.partial for p in parts))


def lcw_claims(runs: SweepRuns) -> list[Claim]:
    """K's statements per network and model (:data:`PUBLISHED`, :func:`_statement`): trains
    (best training accuracy ≥ :data:`TRAINS`), does not train (≤ :data:`STUCK`), explodes
    (the run diverged), faster than BN, and the times; LCW against BN on its own where K says
    LCW is faster, and Fig. 13's gradient growth of ReLU MLP_LCW(20, 256).

    "Faster" is K's "higher rate of increase in the training accuracy" (K §5.1, Fig. 12 (a),
    (d), (g)): MLP_LCW's mean training accuracy over the scheduled epochs (the trainer's
    ``mean_train_accuracy``, the area under its training curve per epoch) strictly above
    MLP_BN's. Of two curves that end at the same accuracy, the one that rose sooner has the
    larger area; the summary needs no metric history (``ortho report`` loads none)."""
    claims = []
    for (activation, layers, hidden, variant), said in PUBLISHED.items():
        shape = (activation, layers, hidden)
        claims.append(_statement(runs, shape, variant, said))
        if "faster than BN" in said:
            faster = _faster_than_bn(runs, shape)
            claims.append(judge(claims[-1].source, f"{activation} MLP_LCW({layers}, {hidden}) "
                                "trains faster than MLP_BN: a higher rate of increase in the "
                                "training accuracy, i.e. a higher mean training accuracy over "
                                "the epochs (the area under the training curve)",
                                faster.ok, faster.evidence, faster.partial))
    ratios = {}
    partial = False
    for variant in ("plain", "lcw"):
        g, best = chosen(runs, FIG13_SHAPE, variant)
        ratio = None if best is None else best.get("metrics.init_grad_ratio")
        ratios[f"{MODELS[variant]} grad ratio"] = None if ratio is None or ratio != ratio \
            else float(ratio)
        partial |= g.partial
    claims.append(beats("K-F13", "ReLU MLP_LCW(20, 256)'s weight gradients at initialisation "
                        "grow towards the input far more than the plain MLP's (first / last "
                        "hidden layer RMS)", ratios, ["MLP_LCW grad ratio"],
                        ["MLP grad ratio"], fmt=".3g", partial=partial))
    return claims


def lcw_report(runs: SweepRuns, histories: Histories | None) -> Report:
    """Report of ``lcw-deep-mlp``: the two tables and K's claims; with histories, the
    figures."""
    figures = [] if histories is None else [
        train_accuracy_figure(runs, histories), gradient_figure(runs, histories),
        angle_figure(runs, histories, "init"), activation_figure(runs, histories, "init"),
        angle_figure(runs, histories, "final")]
    return Report(runs=runs, tables=[fig12_table(runs), angle_bias_table(runs)],
                  figures=figures, claims=lcw_claims(runs))
