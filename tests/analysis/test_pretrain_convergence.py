"""Report of ``orth-pretrain-convergence``: the convergence table pooled over seeds against the
hand-built store of ``conftest.py``, beside the published values."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.load import load_sweep
from analysis.published.manchev import PRETRAIN
from analysis.reports import pretrain_convergence
from tests.analysis.conftest import PRETRAIN_SPEC, PRETRAIN_STEPS, Store


def test_pretrain_table_pools_seeds_and_marks_the_failed_one(store: Store) -> None:
    runs = load_sweep(store.client(), PRETRAIN_SPEC)
    table = pretrain_convergence.pretrain_table(runs)
    assert table.columns[:2] == ["Distribution", "success"]
    done = [steps for steps in PRETRAIN_STEPS.values() if steps is not None]
    for row, dist in zip(table.rows, ("normal", "uniform"), strict=True):
        steps = np.array([s for seed in done for s in seed[dist]], dtype=float)
        repeats = 6 * len(done)
        assert row[0].value == dist
        assert row[1].value == pytest.approx(len(steps) / repeats)
        assert row[3].value == pytest.approx(steps.mean())
        assert row[4].value == pytest.approx(steps.mean() + 1)
        assert row[6].value == pytest.approx(steps.std(ddof=1))
        assert (row[7].value, row[8].value, row[9].value) == (steps.min(), steps.max(), repeats)
        assert all(c.partial for c in (row[1], row[3], row[4], row[6], row[7], row[8], row[9]))
        published = PRETRAIN[dist]
        assert (row[2].value, row[5].value, row[10].value) == (
            published.success_rate, published.mean_steps, published.repeats)
        assert row[11].marked() == "2/3 (1 failed)"
    assert [c.marked() for c in table.rows[0][:3]] == [
        "normal", "91.67%†", format(PRETRAIN["normal"].success_rate, ".0%")]
    assert table.provenance.line().startswith(
        "spec orth-pretrain-convergence · profile smoke · sweep pc-1 · 3 runs → "
        "3 configurations of 3 expected (2 unsolved, 1 failed)")
