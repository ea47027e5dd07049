"""The registry of experiments: name -> module holding its ``Config`` and ``train``.

Every experiment module defines:

- ``Config``: a dataclass of the DESIGN.md keys with a docstring per field; its
  ``__post_init__`` validates ranges (raising ``ConfigError``).
- ``PACK_FIELDS``: the fields that must be equal across the members of a pack (the
  "shape"); every other field may differ per member.
- ``train(configs, reporter) -> list[Result]``: trains the pack (DESIGN.md "Packs").
- ``SUMMARY``: every key a member's ``Result.summary`` can hold, with its meaning (what a
  spec's ``metric`` may name, and what ``ortho train --keys`` lists); some keys are there
  only for some configurations, as their meanings say.
- ``METRICS``: every key a ``Report.metrics`` can hold, with its meaning (what a spec's
  ``scheduler.metric_step`` may name); a key holding ``{l}`` stands for one per layer, the
  layer's number in its place (:func:`reports_metric`).
- ``planned_steps(config) -> int``: the ``step`` of the last report a member of
  ``config`` makes when it trains its whole budget (no divergence, nothing ending it early),
  in the trainer's own unit (iterations, samples, time steps: what its reports'
  ``Report.step`` counts, also the MLflow step of its metrics): the denominator of a sweep's
  progress. Its docstring says when a member can end before it by the protocol itself.

and may define ``ends_early(config) -> bool``: whether a member can end before that step by
the protocol itself (solved, stalled or out of its curriculum; not by diverging), defined
where that can happen (without it, every member that does not diverge is taken to train its
whole budget, and ``pack_size: auto`` times every member as doing so, see below);
``ADDED_FIELDS``: fields added after sweeps of it were tracked, left out of
a configuration's trial key while they hold their default, so that stored keys stay valid;
``FORMER_DEFAULTS``: fields whose default changed after sweeps of it were tracked, hashed
into a trial key at their former default while they hold the new one, for the same reason;
``data_files(config)``: the dataset files the configuration reads, which a sweep checks
before it starts (:mod:`ortho_core.experiments.data_check`); and
``probe_config(config) -> Config``: the same configuration cut to a throughput probe, the
hook of a sweep's ``pack_size: auto`` (:mod:`sweeps.pack_size`). A probe configuration has
the same shape and cost per training iteration as ``config`` (every ``PACK_FIELDS`` value
that sets the cost kept) on a budget of a few dozen iterations that reports at least twice,
with a small evaluation set and pre-training cut short (:data:`PROBE_PRETRAIN_TOL`): the
probe times the iterations between a member's first and last report. An experiment without
it gets the default pack size that :mod:`sweeps.pack_size` states. With it,
``iteration_budget(config) -> int``: the most training iterations the configuration takes,
counted at the cost of its probe's iterations, against which ``pack_size: auto`` weighs each
trial's fixed costs (without it, the choice weighs iterations alone); and where
``ends_early`` holds for the configurations, ``pack_size: auto`` times a pack's later
iterations as training fewer members.

Modules are imported lazily so that ``ortho train`` only pays for the experiment it runs.
"""

from __future__ import annotations

import importlib
import re
from types import ModuleType

from ortho_core.errors import ConfigError

EXPERIMENTS: dict[str, str] = {
    "synthetic": "ortho_core.experiments.synthetic",
    "orth-pretrain-convergence": "ortho_core.experiments.pretrain_convergence",
    "ff-mnist": "ortho_core.experiments.ff_mnist",
    "lcw-mlp": "ortho_core.experiments.lcw_mlp",
    "polyphonic": "ortho_core.experiments.polyphonic",
    "temporal-gradients": "ortho_core.experiments.temporal_gradients",
    "deep-orthogonal": "ortho_core.experiments.deep_orthogonal",
    "pixel-mnist": "ortho_core.experiments.pixel_mnist",
}

PROBE_PRETRAIN_TOL = 1e12
"""``pretrain_tol`` of a probe configuration: above the Eᵖ of any initial weights, so that
pre-training (done before the first report, so not timed) stops at once."""


def reports_metric(module: ModuleType, name: str) -> bool:
    """Whether ``module``'s reports can hold the metric ``name``: a key of its ``METRICS``,
    or one with a number where such a key has ``{l}``."""
    return any(re.fullmatch(re.escape(key).replace(r"\{l\}", "[0-9]+"), name)
               for key in module.METRICS)


def get(name: str) -> ModuleType:
    """The module of experiment ``name``; ``ConfigError`` naming ``experiment`` if unknown."""
    if name not in EXPERIMENTS:
        raise ConfigError("experiment", "one of " + ", ".join(EXPERIMENTS), name)
    return importlib.import_module(EXPERIMENTS[name])
