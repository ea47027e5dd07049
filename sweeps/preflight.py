"""The datasets of a sweep, checked before Ray starts (DESIGN.md: "an unreadable data file
stops before any work starts").

:func:`check_data` builds every configuration of the spec (an Optuna cell: with each of its
dimensions at each end or choice, as the spec's own check does) and checks the files they
read (:func:`ortho_core.experiments.data_check.check_data`: the data directory, each file's
size and md5). A missing or corrupt file raises :class:`~ortho_core.errors.DataError`
naming it, which ``ortho sweep`` turns into exit status 2; before, every trial failed on it
and the sweep exited 1.

Where the check runs: on this machine, for a sweep on the embedded Ray (no ``--address``),
whose trials read this machine's files (``$ORTHO_DATA_DIR`` of this process, which its Ray
workers inherit, set by ``--data-dir`` where given, or the spec's ``data_dir``). With
``--address`` the trials read the files of the cluster's nodes (each node's own
``$ORTHO_DATA_DIR``, or the folder ``--data-dir`` names there),
which this machine need not have, so nothing is checked here: each trial's loader checks the
files of its node as before (:class:`~ortho_core.errors.DataError` naming the file as that
node sees it, in the run's ``traceback.txt``), and ``ortho sweep resume`` retries those
configurations once the files are in place.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

from ortho_core import experiments
from ortho_core.config import from_dict
from ortho_core.experiments.data_check import check_data as check_files
from sweeps.spec import Cell, ResolvedSpec, trial_key


def _configs(spec: ResolvedSpec, module: Any, finished: Collection[str]) -> Iterator[Any]:
    """The Config of every cell of ``spec`` left to train (grid cells whose trial key is in
    ``finished`` are left out); an Optuna cell's at each end or choice of its dimensions."""
    for cell in spec.cells():
        if not cell.optuna_space:
            if not finished or trial_key(spec.experiment, cell.params) not in finished:
                yield from_dict(module.Config, cell.params)
            continue
        yield from (from_dict(module.Config, {**cell.params, **extra})
                    for extra in _edges(cell))


def _edges(cell: Cell) -> list[dict[str, Any]]:
    """The Optuna points of ``cell`` that reach every end or choice of each dimension."""
    low = {key: dim.edges()[0] for key, dim in cell.optuna_space.items()}
    return [low] + [{**low, key: edge} for key, dim in cell.optuna_space.items()
                    for edge in dim.edges()[1:]]


def check_data(spec: ResolvedSpec, address: str | None,
               finished: Collection[str] = ()) -> int:
    """Check the dataset files of ``spec``'s configurations (those not ``finished``) when
    the sweep runs on the embedded Ray (``address`` None); the number of files checked
    (0 with an address: see the module docstring). Raises ``DataError`` naming a missing
    directory or a missing, truncated or corrupt file."""
    if address is not None:
        return 0
    module = experiments.get(spec.experiment)
    if getattr(module, "data_files", None) is None:
        return 0
    return check_files(module, _configs(spec, module, finished))
