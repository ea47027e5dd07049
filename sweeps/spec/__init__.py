"""Sweep specs: the schema, loading with line-accurate errors, profiles and cells.

A spec (``sweeps/specs/<name>.yaml``, format in sweeps/specs/README.md) names an experiment, the
config keys it fixes, the keys it sweeps and the profiles (``smoke``, ``cpu``, ``paper``) that
override them. Everything is checked before any work starts:

- :func:`load_spec` reads the YAML (refusing what is not UTF-8 text, non-printable
  characters, alias bombs and deep nesting) and checks its structure and every profile's
  merged shape (unknown keys, types, rates, empty lists, Optuna dimensions in a grid search,
  packs under an early-stopping scheduler, and sizes no machine could run, counted before
  anything is expanded: ``profiles.check_size``);
- :func:`resolve` applies one profile, expands the grid into :class:`Cell`\\ s and builds the
  experiment's ``Config`` for every cell (Optuna dimensions at each end or choice), so that
  an unknown config key or a bad value is reported with its field and line; it checks every
  other profile the same way (the spec is valid whole or not at all);
- :func:`expand_resolved` expands a resolved spec's text (the artifact a sweep keeps) into
  the same cells by the same code, without building any ``Config``: what ``analysis``
  compares a sweep's runs against.

Errors are :class:`SpecError` (a ``ConfigError``: the CLI exits with status 2), e.g.
``synthetic-max-length.yaml:14: space.lr.log_range: expected two positive numbers low < high
(got [0.1, -1])``.

The modules, each importing only those above it:

- :mod:`~sweeps.spec.space`: the dimensions a key is swept over (grid and Optuna);
- :mod:`~sweeps.spec.source`: the YAML with the line of every key; :class:`SpecError`;
- :mod:`~sweeps.spec.schema`: the keys of a spec as written (:class:`Spec`);
- :mod:`~sweeps.spec.profiles`: a profile applied, and the checks of the merged shape;
- :mod:`~sweeps.spec.cells`: the cells, :func:`expand_resolved`, :func:`resolved_params`
  (each cell with the trainer's values of the keys other cells set) and :func:`trial_key`;
- :mod:`~sweeps.spec.loading`: :func:`load_spec` and the shipped specs;
- :mod:`~sweeps.spec.resolved`: :func:`resolve` and :class:`ResolvedSpec`.

This package imports neither the trainers' code (until :func:`resolve` or :func:`trial_key`)
nor torch, Ray or MLflow, so that the CLI checks a spec in a fraction of a second. ``analysis``
does not import it (the layer contracts forbid it): it reads the resolved spec and the cells
a sweep stored with its parent run.

    >>> spec = resolve(load_spec("synthetic-max-length"), "smoke")
    >>> len(spec.cells()), sorted({cell.params["variant"] for cell in spec.cells()})
    (8, ['oinit', 'open', 'plain'])
"""

from sweeps.spec.cells import Cell, expand_resolved, resolved_params, trial_key
from sweeps.spec.loading import available_specs, load_spec
from sweeps.spec.resolved import ResolvedSpec, resolve
from sweeps.spec.schema import PROFILES, OptunaSettings, Spec
from sweeps.spec.source import SpecError
from sweeps.spec.space import ChoiceDim, Dimension, FloatDim

__all__ = [
    "PROFILES",
    "Cell",
    "ChoiceDim",
    "Dimension",
    "FloatDim",
    "OptunaSettings",
    "ResolvedSpec",
    "Spec",
    "SpecError",
    "available_specs",
    "expand_resolved",
    "load_spec",
    "resolve",
    "resolved_params",
    "trial_key",
]
