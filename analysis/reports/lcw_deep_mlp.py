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

from analysis.load import Histories, SweepRuns
from analysis.report import Report
from analysis.reports.lcw_figures import (
    activation_figure,
    angle_figure,
    gradient_figure,
    train_accuracy_figure,
)
from analysis.reports.lcw_tables import angle_bias_table, fig12_table


def lcw_report(runs: SweepRuns, histories: Histories | None) -> Report:
    """Report of ``lcw-deep-mlp``: the two tables; with histories, the figures."""
    figures = [] if histories is None else [
        train_accuracy_figure(runs, histories), gradient_figure(runs, histories),
        angle_figure(runs, histories, "init"), activation_figure(runs, histories, "init"),
        angle_figure(runs, histories, "final")]
    return Report(runs=runs, tables=[fig12_table(runs), angle_bias_table(runs)],
                  figures=figures)
