"""``ortho_core.experiments``: the registry's contract, on every experiment that a shipped
spec trains."""

from __future__ import annotations

import pytest

from ortho_core import experiments
from ortho_core.config import from_dict
from sweeps.spec import available_specs, load_spec, resolve


@pytest.mark.parametrize("spec_name", available_specs())
def test_every_metric_a_report_holds_is_declared(spec_name: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``METRICS`` is what a spec's ``scheduler.metric_step`` is checked against: a key a
    trainer reports without declaring it could not be named there. The first configuration
    of the spec's smoke profile, trained here."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    spec = resolve(load_spec(spec_name), "smoke")
    module = experiments.get(spec.experiment)
    reported: set[str] = set()
    module.train([from_dict(module.Config, spec.cells()[0].params)],
                 lambda report: reported.update(report.metrics))
    assert reported
    assert {k for k in reported if not experiments.reports_metric(module, k)} == set()


def test_a_per_layer_key_stands_for_numbers_only() -> None:
    ff = experiments.get("ff-mnist")
    assert experiments.reports_metric(ff, "grad_norm_layer12")
    assert not experiments.reports_metric(ff, "grad_norm_layer")
    assert not experiments.reports_metric(ff, "grad_norm_layerx")
    assert not experiments.reports_metric(ff, "grad_norm_layer{l}x")
