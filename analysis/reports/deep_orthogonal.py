"""Report of ``deep-orthogonal`` (paper N, EXPERIMENTS.md N-F1, N-F3, N-F4): deep orthogonal nets
against ReLU and Orth/ReLU nets, beside N's claims (:mod:`analysis.published.nosarzewski`).

The trainer logs per evaluation ``train_error`` (fractions), ``test_error`` (MNIST) and the
spreads of the per-layer gradient norms; its summaries hold ``best_train_error``,
``best_test_error``, ``act_grad_spread_init``, ``weight_grad_spread_init`` (orders of
magnitude, log10(max/min) over the layers, capped at 30 where a gradient is exactly 0) and
``baseline_error``; its artifacts hold the per-layer profiles (``grad_profile``) and, for the
planar sets, the points with their final predictions (``points``).

Rules, stated under the tables:

- a net's error is the best over its seeds of the best training error over evaluations
  (N reports one run per net); the median over seeds is shown beside;
- N-F1 (error) holds when every ReLU net, at any depth, errs on more than 10 % and the
  20-layer orthogonal net on less than 10 % (N §6.1: 1 %, "better [...] than [...] the
  standard feedforward networks at any depth"); a sweep whose orthogonal net has another
  depth (the smoke profile's L = 6) leaves it not measured, unless a ReLU net errs on 10 % or
  less (then it does not hold whatever the orthogonal depth);
- N-F1 (gradient) holds when every ReLU net below depth 10 has a stable activation gradient
  and every net of depth 10 or more a vanished one (N Fig. 1a): stable when the median over
  seeds of the activation-gradient spread at initialisation is at most 3 orders of magnitude
  (N §6.2's bound of a gradient that trains; N §6.1 gives none), vanished beyond;
- N-F3 holds when, for every depth L and width H of the Orth/ReLU nets, the net with the
  smallest block size B of the sweep whose weight-gradient spread at initialisation (median
  over seeds) is at most 3 orders of magnitude trains (best training error ≤ 5 %) on at least
  one seed: N §6.2's choice of B, and its remark that such nets at times needed several
  attempts. N also trained good models beyond 3 orders (which at times failed) and found
  training unpredictable with many orthogonal layers, so neither side is said to train more
  often; the plain ReLU nets on the spiral are a contrast in the table, not part of the
  claim;
- N-F4 holds when the ReLU net's best test error stays within one point of the majority-class
  error (untrainable) and the orthogonal net's is at least ten points lower.
"""

from __future__ import annotations

from analysis.claims import from_verdict
from analysis.load import Histories, SweepRuns
from analysis.published.nosarzewski import (
    F1_HIDDEN,
    F1_ORTH_DEPTH,
    F1_ORTH_ERROR,
    F1_RELU_MIN_ERROR,
    F1_RELU_VANISH_DEPTH,
    F3_SPREAD_LIMIT,
    F4_HIDDEN,
)
from analysis.report import Report
from analysis.reports.deep_orthogonal_figures import data_figure, f1_figure, f3_figure, f4_figure
from analysis.reports.deep_orthogonal_tables import (
    f1_cells,
    f1_table,
    f1_vanish_verdict,
    f1_verdict,
    f3_cells,
    f3_table,
    f3_verdict,
    f4_rows,
    f4_table,
    f4_verdict,
)


def deep_orthogonal_report(runs: SweepRuns, histories: Histories | None) -> Report:
    """Report of ``deep-orthogonal``: the N-F1, N-F3 and N-F4 tables and their claims (the
    verdicts under the tables); with histories, the data, Fig. 1a, Fig. 3 and Fig. 4
    figures."""
    figures = [] if histories is None else [
        data_figure(runs, histories), f1_figure(runs, histories), f3_figure(runs),
        f4_figure(runs, histories)]
    cells = f1_cells(runs)
    claims = [
        from_verdict("N-F1", f"ReLU nets of {F1_HIDDEN} hidden units err on more than "
                     f"{F1_RELU_MIN_ERROR:g} % at any depth, the {F1_ORTH_DEPTH}-layer "
                     f"orthogonal net on less (paper {F1_ORTH_ERROR:g} %)", f1_verdict(cells)),
        from_verdict("N-F1", f"the activation gradients of ReLU nets of {F1_HIDDEN} hidden "
                     f"units are stable below depth {F1_RELU_VANISH_DEPTH} and vanish from it",
                     f1_vanish_verdict(cells)),
        from_verdict("N-F3", "an Orth/ReLU net whose block size B is the smallest keeping its "
                     f"gradients within {F3_SPREAD_LIMIT[1]:g} orders of magnitude over the "
                     "layers trains, at times only after several attempts",
                     f3_verdict(f3_cells(runs))),
        from_verdict("N-F4", f"on MNIST with {F4_HIDDEN} hidden units the standard deep net "
                     "cannot be trained, the orthogonal one learns", f4_verdict(f4_rows(runs)))]
    return Report(runs=runs, tables=[f1_table(runs), f3_table(runs), f4_table(runs)],
                  figures=figures, claims=claims)
