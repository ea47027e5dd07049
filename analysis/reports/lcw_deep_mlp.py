"""Report of ``lcw-deep-mlp`` (paper K, Kutsuna, linearly constrained weights; EXPERIMENTS.md
K-F12, K-F13, K-F2): the tables of :mod:`analysis.reports.lcw_tables` (``k-fig12``: accuracy,
time per epoch and overhead per network and model; ``k-angle-bias``: the diagnostics at
initialisation) and, with histories, the figures of :mod:`analysis.reports.lcw_figures` (K
Figs. 12, 13 and 2-11), beside what the paper states (:mod:`analysis.published.kutsuna`).

Seconds per epoch are the trainer's ``seconds_per_epoch`` divided by its ``pack_size`` (a pack
of K members trains K configurations per epoch); times from a shared machine are noisy, and
an overhead compares trials of equal pack size only when the spec packs none (``pack_size:
1``, as ``lcw-deep-mlp`` does).
"""

from __future__ import annotations

from analysis.claims import Claim, beats, judge
from analysis.load import Histories, SweepRuns
from analysis.published.kutsuna import FIG13_SHAPE, PUBLISHED, Shape
from analysis.report import Report
from analysis.reports.lcw_figures import (
    activation_figure,
    angle_figure,
    gradient_figure,
    train_accuracy_figure,
)
from analysis.reports.lcw_tables import MODELS, angle_bias_table, chosen, fig12_table

TRAINS = 0.5
"""A network *trains* when its best training accuracy reaches this (chance: 0.1)."""
STUCK = 0.2
"""A network *does not train* (stays near chance) when its best training accuracy stays at or
below this."""
EXPLODES = "explodes after a few updates"
"""K §5.2's statement on ReLU MLP_LCW(20, 256), judged on the run's outcome (:func:`_explodes`),
not on its accuracy."""

ACCURACIES: dict[str, str] = {"best_train_accuracy": "best train accuracy",
                              "mean_train_accuracy": "mean train accuracy over the epochs"}
"""The trainer's summaries the claims read -> their name in the evidence."""


def _accuracy(runs: SweepRuns, shape: Shape, variant: str,
              metric: str = "best_train_accuracy") -> tuple[float | None, bool, str]:
    """The chosen configuration's ``metric`` (a training accuracy), whether its group is
    partial, and the evidence text."""
    g, best = chosen(runs, shape, variant)
    value = None if best is None else best.get(f"metrics.{metric}")
    value = None if value is None or value != value else float(value)
    name = f"{MODELS[variant]}({shape[1]}, {shape[2]}) {ACCURACIES[metric]}"
    if value is None:
        return None, g.partial, f"{name} not measured" + (
            f" (profile {runs.sweep.profile} does not run it)" if g.runs.empty else "")
    outcome = "" if best is None else f", {best['outcome']}"
    return value, g.partial, f"{name} {100 * value:.1f} %{outcome}"


def _explodes(runs: SweepRuns, shape: Shape, variant: str) -> tuple[bool | None, bool, str]:
    """Whether the chosen configuration exploded, whether its group is partial, and the
    evidence text.

    K §5.2: "the output values of the network exploded". That holds only for a run whose
    outcome is ``diverged`` (its training loss became NaN or inf); a run that stays near
    chance with a finite loss stalled, it did not explode. "After a few updates" is not
    judged: the trainer records the epochs a member completed, not the update it diverged
    at."""
    g, best = chosen(runs, shape, variant)
    name = f"{MODELS[variant]}({shape[1]}, {shape[2]})"
    if best is None:
        return None, g.partial, f"{name} not measured" + (
            f" (profile {runs.sweep.profile} does not run it)" if g.runs.empty else "")
    outcome = str(best["outcome"])
    text = f"{name} outcome {outcome}"
    loss = best.get("metrics.train_loss")
    if outcome != "diverged" and loss is not None and loss == loss:
        text += f", final train loss {float(loss):.3g}"
    return outcome == "diverged", g.partial, text


def lcw_claims(runs: SweepRuns) -> list[Claim]:
    """K's statements per network and model (:data:`PUBLISHED`) judged on the chosen
    configuration's best training accuracy (trains: ≥ :data:`TRAINS`; does not train:
    ≤ :data:`STUCK`) or, for :data:`EXPLODES`, its outcome (:func:`_explodes`), LCW against BN
    where K says LCW is faster, and Fig. 13's gradient growth of ReLU MLP_LCW(20, 256).

    "Faster" is K's "higher rate of increase in the training accuracy" (K §5.1, Fig. 12 (a),
    (d), (g)): MLP_LCW's mean training accuracy over the scheduled epochs (the trainer's
    ``mean_train_accuracy``, the area under its training curve per epoch) strictly above
    MLP_BN's. Of two curves that end at the same accuracy, the one that rose sooner has the
    larger area; the summary needs no metric history (``ortho report`` loads none)."""
    claims = []
    for (activation, layers, hidden, variant), said in PUBLISHED.items():
        shape = (activation, layers, hidden)
        source = "K-F13" if shape == FIG13_SHAPE else "K-F12"
        claim = f"{activation} {MODELS[variant]}({layers}, {hidden}): {said}"
        if said == EXPLODES:
            ok, partial, text = _explodes(runs, shape, variant)
        else:
            value, partial, text = _accuracy(runs, shape, variant)
            trains = said.startswith("trains")
            ok = None if value is None else value >= TRAINS if trains else value <= STUCK
        claims.append(judge(source, claim, ok, text, partial))
        if "faster than BN" in said:
            lcw, lcw_partial, lcw_text = _accuracy(runs, shape, "lcw", "mean_train_accuracy")
            bn, bn_partial, bn_text = _accuracy(runs, shape, "bn", "mean_train_accuracy")
            claims.append(judge(source, f"{activation} MLP_LCW({layers}, {hidden}) trains "
                                "faster than MLP_BN: a higher rate of increase in the training "
                                "accuracy, i.e. a higher mean training accuracy over the epochs "
                                "(the area under the training curve)",
                                None if lcw is None or bn is None else lcw > bn,
                                f"{lcw_text}; {bn_text}", lcw_partial or bn_partial))
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
