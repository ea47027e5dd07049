"""Run names a person reads (issue 15): a configuration's run is named by the values of the
config keys that vary within its sweep, in the papers' symbols (DESIGN.md "Names"), e.g.
``OPEN α=0.01 λ=1 Temporal Order``; the trial key stays a tag (``ortho.trial_key``).

- A key varies when the cells that set it give it two or more values, or when Optuna chooses
  it in some cell (:func:`sweeps.contract.varying_keys`), or when the cells as the trainer
  resolves them do (a key one group sets and another leaves at a different default: ``task:
  adding`` in one group only), unless the variant, direction, task or dataset already tells
  its values apart (the paper profile's OPEN ``penalty_form``, adding's ``length_jitter``). A
  key that only some groups set (``penalty`` of OPEN) is named where it is set and nowhere
  else.
- Words come first (the variant, the descent direction), then the symbols in the order of
  :data:`sweeps.contract.SYMBOLS`, then other keys as ``key=value``, then the task and
  dataset, then ``seed``/``data_seed``: repeats that differ only by seed read ``seed=N``.
- Names are unique within a sweep: grid configurations whose names would be alike (cells
  that differ only in a key some groups leave unset) are named by that key as well, and any
  still alike get their trial key's first characters (``[3fa2c1]``), as every Optuna member
  does (its values are shown to four digits, and it is named when its point is asked, before
  the other points are known).

The driver names the grid when it plans (:func:`sweeps.plan.build_plan`, from every cell of
the spec, finished ones included, so a resume gives the same names) and the Optuna members
when it asks their points (:mod:`sweeps.searcher`); a trial hands the name to the claim as
:data:`sweeps.contract.RUN_NAME`. A parent run is named ``profile · <end of the sweep id>``
(:func:`sweep_name`), with :func:`sweep_note` as its description.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sweeps.contract import run_name

KEY_CHARS = 6
"""Characters of the trial key that tell apart configurations whose names are alike."""


def _telling(group: Sequence[Mapping[str, Any]]) -> list[str]:
    """The keys some of ``group`` set differently from the others (or leave unset)."""
    keys = dict.fromkeys(k for params in group for k in params)
    _unset = object()
    return [k for k in keys if len({repr(p.get(k, _unset)) for p in group}) > 1]


def unique_names(named: Sequence[tuple[str, Mapping[str, Any]]],
                 keys: Iterable[str]) -> dict[str, str]:
    """Trial key -> name of each ``(trial key, params)``, every name distinct. Configurations
    whose names from ``keys`` are alike are named by the keys that tell them apart as well
    (a key only some of them set: ``penalty_form=unsquared``); any still alike get their
    first :data:`KEY_CHARS` trial key characters."""
    keys = tuple(keys)
    params = dict(named)
    names = {key: run_name(p, keys) for key, p in named}
    groups: dict[str, list[str]] = {}
    for key, name in names.items():
        groups.setdefault(name, []).append(key)
    for members in groups.values():
        if len(members) > 1:
            more = keys + tuple(_telling([params[k] for k in members]))
            names.update((k, run_name(params[k], more)) for k in members)
    counts = Counter(names.values())
    return {key: name if counts[name] == 1 else f"{name} [{key[:KEY_CHARS]}]"
            for key, name in names.items()}


def optuna_name(params: Mapping[str, Any], keys: Iterable[str], key: str) -> str:
    """The name of an Optuna member: its values of ``keys`` (Optuna's to four digits) and the
    first :data:`KEY_CHARS` characters of its trial ``key``, which tell apart points that
    round alike and stay with the point when a resume trains it again."""
    return f"{run_name(params, keys)} [{key[:KEY_CHARS]}]"


def sweep_name(profile: str, sweep_id: str) -> str:
    """A parent run's name: ``profile · <last part of the sweep id>``. The spec is the
    experiment's name, which MLflow shows above the runs; leading with it, as the name did
    before 2026-12-06, left the sweeps of one spec alike in the runs table's first
    characters."""
    return f"{profile} · {sweep_id.rsplit('-', 1)[-1]}"


def sweep_note(description: str, profile: str, sweep_id: str) -> str:
    """A parent run's description (MLflow's ``mlflow.note.content``, shown as Markdown): the
    spec's description line, the profile and the sweep id."""
    first = description.strip().splitlines()[0] if description.strip() else ""
    return "\n\n".join(p for p in (first, f"profile `{profile}`, sweep `{sweep_id}`") if p)
