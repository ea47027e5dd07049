"""The cells a sweep should hold, written once when it starts so that ``analysis`` can tell a
finished table from a partial one without the spec code (:mod:`sweeps.contract`).

The resolved spec text is expanded by :func:`sweeps.spec.expand_resolved`, the code the
runner's cells come from: values are as the spec writes them, which is what MLflow's params
hold once parsed back. A key that other cells set and a cell's groups leave unset is added to
it at the trainer's default (:func:`sweeps.spec.resolved_params`), which is what its runs log,
and named in its :data:`~sweeps.contract.DEFAULTED` list, so that ``analysis`` compares it by
value (``task: adding`` in one group: the other group's cells hold ``task:
temporal_order``) and still names it as its run is named. Optuna dimensions are not
enumerated: each Optuna cell stands for ``search.n_trials`` configurations.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from sweeps.contract import DEFAULTED, SEARCHED, TRIALS


def expected_cells(resolved_text: str) -> list[dict[str, Any]]:
    """One dict per cell of the resolved spec ``resolved_text``: its params (with the
    trainer's defaults of the keys other cells set, when the text names its ``experiment``),
    :data:`~sweeps.contract.TRIALS` (1, or the Optuna trials per cell),
    :data:`~sweeps.contract.SEARCHED` (the keys its Optuna search chooses) and, where it
    holds any defaults so, :data:`~sweeps.contract.DEFAULTED` (their keys)."""
    from sweeps.spec import expand_resolved, resolved_params

    doc = yaml.safe_load(resolved_text) or {}
    search = doc.get("search") or {}
    n_trials = int(search.get("n_trials") or 1) if search.get("kind") == "optuna" else 1
    cells = expand_resolved(resolved_text)
    keys = {k for cell in cells for k in cell.params}
    unset = any(keys - set(cell.params) - set(cell.optuna_space) for cell in cells)
    experiment = doc.get("experiment")  # the trainer, imported only where a cell needs it
    resolved = (resolved_params(experiment, cells) if unset and experiment
                else [cell.params for cell in cells])
    expected = []
    for cell, values in zip(cells, resolved, strict=True):
        defaulted = {k: v for k, v in values.items() if k not in cell.params}
        trials = n_trials if cell.optuna_space else 1
        expected.append({**cell.params, **defaulted, TRIALS: trials,
                         SEARCHED: sorted(cell.optuna_space)}
                        | ({DEFAULTED: list(defaulted)} if defaulted else {}))
    return expected


def expected_cells_json(resolved_text: str) -> str:
    """:func:`expected_cells` as the text of the artifact
    :data:`~sweeps.contract.EXPECTED_CELLS_ARTIFACT`."""
    return json.dumps(expected_cells(resolved_text), indent=1)
