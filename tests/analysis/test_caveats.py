"""Every caveat of :mod:`analysis.caveats` names a claim its spec's report makes: built from
the spec's real smoke sweep (``smoke_home``), the report has a claim with the caveat's source
whose text starts with the caveat's, so that no caveat silently stops applying when a claim
is reworded."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.caveats import CAVEATS
from analysis.report import build_report
from sweeps.spec import load_spec


@pytest.mark.parametrize(("spec", "profile"), [
    pytest.param(spec, profile, marks=pytest.mark.smoke_sweep(spec), id=f"{spec}-{profile}")
    for spec, profile in CAVEATS])
def test_each_caveat_names_a_claim_of_its_spec_s_report(spec: str, profile: str,
                                                        smoke_home: Path) -> None:
    assert profile in load_spec(spec).profiles
    claims = {(c.source, c.text) for c in build_report(spec, home=smoke_home).claims}
    for source, start in CAVEATS[spec, profile]:
        assert any(s == source and text.startswith(start) for s, text in claims), (
            f"{spec}: no claim {source} starting {start!r} among {sorted(claims)}")
