"""The cells a sweep should hold, written once when it starts so that ``analysis`` can tell a
finished table from a partial one without the spec code (:mod:`sweeps.contract`).

The resolved spec text is expanded by :func:`sweeps.spec.expand_resolved`, the code the
runner's cells come from, which builds no trainer's ``Config``: values are as the spec writes
them, which is what MLflow's params hold once parsed back. Optuna dimensions are not
enumerated: each Optuna cell stands for ``search.n_trials`` configurations.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from sweeps.contract import SEARCHED, TRIALS


def expected_cells(resolved_text: str) -> list[dict[str, Any]]:
    """One dict per cell of the resolved spec ``resolved_text``: its params,
    :data:`~sweeps.contract.TRIALS` (1, or the Optuna trials per cell) and
    :data:`~sweeps.contract.SEARCHED` (the keys its Optuna search chooses)."""
    from sweeps.spec import expand_resolved

    search = (yaml.safe_load(resolved_text) or {}).get("search") or {}
    n_trials = int(search.get("n_trials") or 1) if search.get("kind") == "optuna" else 1
    return [{**cell.params, TRIALS: n_trials if cell.optuna_space else 1,
             SEARCHED: sorted(cell.optuna_space)} for cell in expand_resolved(resolved_text)]


def expected_cells_json(resolved_text: str) -> str:
    """:func:`expected_cells` as the text of the artifact
    :data:`~sweeps.contract.EXPECTED_CELLS_ARTIFACT`."""
    return json.dumps(expected_cells(resolved_text), indent=1)
