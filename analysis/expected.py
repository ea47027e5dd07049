"""The configurations a sweep should hold, read from the resolved spec its parent run keeps
as an artifact, so that a report can tell a finished table from a partial one.

The resolved spec (``sweeps.spec.ResolvedSpec.text``) is expanded by
:func:`sweeps.spec.expand_resolved`, the code the runner's cells come from, which builds no
trainer's ``Config`` (that would import training code): values are as the spec writes them,
which is what MLflow's params hold once parsed back. Optuna dimensions are not enumerated:
each cell stands for ``search.n_trials`` configurations (column ``trials``).
"""

from __future__ import annotations

import pandas as pd
import yaml

from sweeps.spec import expand_resolved


def expected_configurations(spec_text: str) -> pd.DataFrame:
    """One row per configuration the resolved spec defines (one per Optuna cell), with the
    config keys as columns and ``trials``: configurations the row stands for (1, or the
    Optuna trials per cell)."""
    search = yaml.safe_load(spec_text).get("search") or {}
    n_trials = int(search.get("n_trials") or 1) if search.get("kind") == "optuna" else 1
    return pd.DataFrame.from_records(
        [{**cell.params, "trials": n_trials if cell.optuna_space else 1}
         for cell in expand_resolved(spec_text)])
