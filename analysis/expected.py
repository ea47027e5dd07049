"""The configurations a sweep should hold, read from the resolved spec its parent run keeps
as an artifact, so that a report can tell a finished table from a partial one.

The resolved spec (``sweeps.spec.ResolvedSpec.text``) has one profile applied: top-level
``fixed`` and ``space``, conditional ``groups``, ``repeats``, ``seed`` and ``search``. This
expands it the way the runner does (sweeps/specs/README.md): per group, the group's keys replace the
top level's (a key fixed in a group is no longer swept, and the other way round), the grid
dimensions' cartesian product gives the cells, each repeated with ``seed + r``, and
``data_seed`` defaults to ``seed``. Optuna dimensions are not enumerated: each cell stands for
``search.n_trials`` configurations (column ``trials``).

No trainer's ``Config`` is built (that would import training code): values are as the spec
writes them, which is what MLflow's params hold once parsed back.
"""

from __future__ import annotations

import itertools
from typing import Any

import pandas as pd
import yaml
from pydantic import TypeAdapter

from sweeps.space import SpaceEntry, grid_values

_ENTRY = TypeAdapter(SpaceEntry)


def _expand(fixed: dict[str, Any], space: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    """The grid points of one group, and whether it has Optuna dimensions."""
    grid: list[tuple[str, list[Any]]] = []
    has_optuna = False
    for key, raw in space.items():
        values = grid_values(_ENTRY.validate_python(raw))
        if values is None:
            has_optuna = True
        else:
            grid.append((key, values))
    points = [{**fixed, **dict(zip([k for k, _ in grid], combo, strict=True))}
              for combo in itertools.product(*(values for _, values in grid))]
    return points, has_optuna


def expected_configurations(spec_text: str) -> pd.DataFrame:
    """One row per configuration the resolved spec defines (one per Optuna cell), with the
    config keys as columns and ``trials``: configurations the row stands for (1, or the
    Optuna trials per cell)."""
    doc = yaml.safe_load(spec_text)
    top_fixed, top_space = dict(doc.get("fixed") or {}), dict(doc.get("space") or {})
    seed, repeats = int(doc.get("seed") or 0), int(doc.get("repeats") or 1)
    search = doc.get("search") or {}
    n_trials = int(search.get("n_trials") or 1) if search.get("kind") == "optuna" else 1
    rows = []
    for group in doc.get("groups") or [{}]:
        fixed, space = dict(top_fixed), dict(top_space)
        for key, value in (group.get("fixed") or {}).items():
            fixed[key] = value
            space.pop(key, None)
        for key, entry in (group.get("space") or {}).items():
            space[key] = entry
            fixed.pop(key, None)
        points, has_optuna = _expand(fixed, space)
        for point in points:
            point.setdefault("data_seed", seed)
            rows += [{**point, "seed": seed + r, "trials": n_trials if has_optuna else 1}
                     for r in range(repeats)]
    return pd.DataFrame.from_records(rows)
