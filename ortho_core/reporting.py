"""The contract between a trainer and whoever watches it (DESIGN.md: "A trainer is a plain
function ``(configs, reporter) -> results``").

A trainer trains a *pack* of K configurations and calls ``reporter(Report(...))`` at every
evaluation of every live member. It knows nothing of Ray or MLflow: ``sweeps`` connects the
reporter to both, and ``ortho train`` connects it to the terminal.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class Outcome(enum.StrEnum):
    """How a configuration ended (the MLflow tag ``ortho.outcome``)."""

    SOLVED = "solved"
    """Met the experiment's success criterion (for a max-length protocol: solved at least one T)."""
    UNSOLVED = "unsolved"
    """Ran its full budget without meeting the success criterion."""
    DIVERGED = "diverged"
    """A loss or weight became NaN or infinite; the member stopped updating."""
    FAILED = "failed"
    """The member could not train: the trainer raised for it (set by the pack's isolation,
    :mod:`ortho_core.experiments.isolation`, or by ``sweeps``; never by a trainer)."""


@dataclass(frozen=True)
class Report:
    """One evaluation of one pack member."""

    member: int
    """Index of the member in the pack (0..K-1)."""
    step: int
    """Training iteration at which the metrics were taken, counted from 0 over the whole run
    (monotone also across the stages of a max-length protocol)."""
    metrics: Mapping[str, float]
    """Metric name -> value (DESIGN.md names, e.g. ``train_loss``, ``val_error``,
    ``spectral_radius``, ``grad_norm_whh``, ``ortho_error``, ``grad_norm``)."""


@dataclass
class Result:
    """What a trainer returns for one member."""

    outcome: Outcome
    """Final outcome of the member."""
    summary: dict[str, float] = field(default_factory=dict)
    """Final summaries (e.g. ``max_seq_len``, ``best_accuracy``, ``iters_to_solve``,
    ``wall_time``)."""
    artifacts: dict[str, Any] = field(default_factory=dict)
    """Optional tabular or array outputs to keep with the run (name -> JSON-able value)."""
    error: str | None = None
    """Why a ``failed`` member failed (the error's message or traceback); None otherwise."""


Reporter = Callable[[Report], None]
"""Receives every evaluation of every member."""


class Trainer(Protocol):
    """Signature every experiment's ``train`` function has."""

    def __call__(self, configs: Sequence[Any], reporter: Reporter) -> list[Result]: ...

