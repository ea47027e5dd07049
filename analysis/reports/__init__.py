"""One module per spec's report, and the registry that names them.

A report module turns the loaded sweep of one spec into tables and figures, beside the
published values it imports from :mod:`analysis.published`. It adds itself by a line in
:data:`REPORTS`; :func:`analysis.report.builder` imports it only when that spec is reported,
so this package's ``__init__`` stays free of pandas and matplotlib (``ortho --help`` reads
:data:`REPORTS` without loading either).
"""

REPORTS: dict[str, str] = {
    "orth-pretrain-convergence": "analysis.reports.pretrain_convergence:pretrain_report",
    "synthetic-max-length": "analysis.reports.max_length:max_length_report",
    "ff-mnist": "analysis.reports.ff_mnist:ff_mnist_report",
    "lcw-deep-mlp": "analysis.reports.lcw_deep_mlp:lcw_report",
    "polyphonic-music": "analysis.reports.polyphonic_music:polyphonic_report",
    "spectral-temporal-gradients":
        "analysis.reports.temporal_gradients:temporal_gradients_report",
    "spectral-init-success": "analysis.reports.spectral_init:spectral_init_report",
    "simplex-direction": "analysis.reports.simplex_direction:simplex_report",
    "deep-orthogonal": "analysis.reports.deep_orthogonal:deep_orthogonal_report",
    "pixel-mnist": "analysis.reports.pixel_mnist:pixel_mnist_report",
}
"""Spec name -> ``module:function`` building its report: ``function(runs, histories) ->
Report`` (:data:`analysis.report.Builder`)."""

GENERIC = "analysis.reports.generic:generic_report"
"""The builder of a spec that has none in :data:`REPORTS` (a user's spec): its configurations
ranked by the spec's metric."""
