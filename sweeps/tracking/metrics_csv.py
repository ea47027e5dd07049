"""Stepwise metrics as the ``metrics.csv`` artifact of a configuration's run."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence


def metrics_csv(rows: Sequence[tuple[int, Mapping[str, float]]]) -> str:
    """Stepwise metrics as CSV: a ``step`` column, then one column per metric name in the
    order first reported; one row per report (empty where a metric was not reported)."""
    names: dict[str, None] = {}
    for _, metrics in rows:
        names.update(dict.fromkeys(metrics))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["step", *names])
    for step, metrics in rows:
        writer.writerow([step, *(metrics.get(n, "") for n in names)])
    return out.getvalue()
