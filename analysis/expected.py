"""The configurations a sweep should hold, so that a report can tell a finished table from a
partial one.

``sweeps`` writes them when the sweep starts (artifact ``expected_cells.json`` of its parent
run, expanded from the resolved spec by the code the runner's cells come from); they are read
back by :func:`sweeps.contract.read_expected_cells` into ``SweepRuns.expected_cells``. Values
are as the spec writes them, which is what MLflow's params hold once parsed back; a key other
cells set and a cell's groups leave unset holds the trainer's default there (listed in the
cell's ``defaulted``), so that it is compared by value, except in the cells of sweeps
tracked before they were written so (left out: NaN in this frame). Optuna
dimensions are not enumerated: each Optuna cell stands for ``search.n_trials`` configurations
(column ``trials``); which cells Optuna searches is read from the cells themselves
(:func:`sweeps.contract.is_optuna_cell`), not from this frame. A sweep tracked before the
artifact existed has no expected cells (None): its report counts what was tracked and says
nothing of what is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from sweeps.contract import DEFAULTED, SEARCHED, TRIALS


def expected_configurations(cells: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """One row per configuration the sweep's spec defines (one per Optuna cell), with the
    config keys as columns and ``trials``: configurations the row stands for (1, or the
    Optuna trials per cell)."""
    frame = pd.DataFrame.from_records([{k: v for k, v in c.items()
                                        if k not in (SEARCHED, DEFAULTED)} for c in cells])
    if TRIALS not in frame:  # no cells at all
        frame[TRIALS] = pd.Series(dtype="int64")
    return frame
