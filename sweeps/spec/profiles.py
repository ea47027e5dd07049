"""Profiles applied to a spec: the keys in force in each group, and the checks of that shape.

A profile overrides the spec's settings and replaces fixed and swept keys key by key, at
every level (:class:`Effective`). What :func:`sweeps.spec.load_spec` checks for every profile
without the trainer is here: no level fixes or sweeps ``seed`` or both fixes and sweeps a key
(:func:`check_levels`), Optuna dimensions only in an Optuna search (:func:`check_search`),
packs of one under an early-stopping scheduler (:func:`check_scheduler`), and a sweep no
machine could run refused by its counts before anything is expanded (:func:`check_size`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ortho_core.config import MAX_SEED
from sweeps.spec.schema import Group, Spec
from sweeps.spec.source import Location, SpecSource
from sweeps.spec.space import ChoiceDim, FloatDim, LogRange, Range

MAX_CONFIGURATIONS = 100_000
"""Most configurations one sweep (one profile of a spec) may train: grid points times
repeats, times ``search.n_trials`` in the cells Optuna searches. The largest shipped
profile trains 174; a sweep of a hundred thousand short trials already takes days on a
cluster, and MLflow holds one run per configuration."""

MAX_PACK_SIZE = 1024
"""Most configurations one trial may train together (``pack_size``). A pack holds every
member's weights and optimiser state in one process, and no experiment states its memory
per member; the shipped specs use at most 50."""

SEED_KEY = "seed"
"""The config key a spec may not fix or sweep: it is the top-level ``seed`` + repeat index."""


Keys = dict[str, tuple[Any, Location]]
"""Config key -> (value or space entry, the path it was written at)."""

Level = tuple[Mapping[str, Any], Mapping[str, Any], Location]
"""The fixed keys, the swept keys and the path of one level of a spec."""


@dataclass
class Effective:
    """A spec with one profile applied; every value keeps the path it was written at.

    Fixed and swept keys come from levels applied in order, later ones replacing earlier
    ones: the spec's top level, the spec's group, the profile's top level; or, when the
    profile has groups of its own, the spec's top level, the profile's top level, the
    profile's group. So a key a profile sets holds in every group of the spec (``penalty:
    1`` fixes λ even where a group sweeps it); a profile that needs a key per group replaces
    the groups.
    """

    profile: str
    settings: dict[str, tuple[Any, Location]]
    """Every other setting (``search``, ``repeats``, ...), from the profile if it sets it."""
    top: tuple[Level, Level]
    """The spec's top level and the profile's."""
    groups: list[tuple[Group, Location]]
    """The groups in force with their paths; one empty group at path () if there are none."""
    own_groups: bool
    """Whether the groups are the profile's."""

    @classmethod
    def of(cls, spec: Spec, profile: str) -> Effective:
        """``spec`` with ``profile`` (one of its profiles) applied."""
        prof = spec.profiles[profile]
        here: Location = ("profiles", profile)
        settings = {}
        for name in ("search", "repeats", "seed", "resources", "pack_size", "max_failures",
                     "scheduler", "groups"):
            if name in prof.model_fields_set:
                settings[name] = (getattr(prof, name), (*here, name))
            else:
                settings[name] = (getattr(spec, name), (name,))
        groups_value, groups_path = settings.pop("groups")
        groups = [(g, (*groups_path, i)) for i, g in enumerate(groups_value or [])]
        top = ((spec.fixed, spec.space, ()), (prof.fixed or {}, prof.space or {}, here))
        return cls(profile, settings, top, groups or [(Group(), ())],
                   "groups" in prof.model_fields_set)

    def group(self, index: int) -> tuple[Keys, Keys]:
        """The fixed and swept keys in force in group ``index``."""
        group, path = self.groups[index]
        level = (group.fixed, group.space, path)
        spec_top, profile_top = self.top
        if self.own_groups:
            return _apply((spec_top, profile_top, level))
        return _apply((spec_top, level, profile_top))

    def value(self, name: str) -> Any:
        """The effective value of setting ``name`` (``repeats``, ``search``, ...)."""
        return self.settings[name][0]


def _apply(levels: tuple[Level, ...]) -> tuple[Keys, Keys]:
    """Fixed and swept keys after ``levels``, each replacing the keys the earlier ones set."""
    fixed: Keys = {}
    space: Keys = {}
    for level in levels:
        _override(fixed, space, *level)
    return fixed, space


def _override(fixed: dict[str, tuple[Any, Location]], space: dict[str, tuple[Any, Location]],
              new_fixed: Mapping[str, Any], new_space: Mapping[str, Any], path: Location) -> None:
    """Apply a more specific level's keys in place: a key fixed there is no longer swept."""
    for key, value in new_fixed.items():
        fixed[key] = (value, (*path, "fixed", key))
        space.pop(key, None)
    for key, entry in new_space.items():
        space[key] = (entry, (*path, "space", key))
        fixed.pop(key, None)


def _levels(spec: Spec) -> list[tuple[Location, Mapping[str, Any], Mapping[str, Any]]]:
    """Every (path, fixed, space) pair written in the spec, profiles included."""
    out: list[tuple[Location, Mapping[str, Any], Mapping[str, Any]]] = [
        ((), spec.fixed, spec.space)]
    out += [(("groups", i), g.fixed, g.space) for i, g in enumerate(spec.groups)]
    for name, prof in spec.profiles.items():
        out.append((("profiles", name), prof.fixed or {}, prof.space or {}))
        out += [(("profiles", name, "groups", i), g.fixed, g.space)
                for i, g in enumerate(prof.groups or [])]
    return out


def check_levels(spec: Spec) -> None:
    """No level fixes or sweeps ``seed``, nor both fixes and sweeps one key."""
    for path, fixed, space in _levels(spec):
        for part, keys in (("fixed", fixed), ("space", space)):
            for key in keys:
                if key == SEED_KEY:
                    raise spec.source.error((*path, part, key),
                                            "no seed here: set the top-level seed and repeats")
        for key in space:
            if key in fixed:
                raise spec.source.error((*path, "space", key),
                                        "a key either fixed or swept at one level, not both")


def check_search(eff: Effective, source: SpecSource) -> None:
    """Optuna dimensions only in an Optuna search, and an Optuna search has some."""
    search, search_path = eff.settings["search"]
    dims = [(key, entry, path) for i in range(len(eff.groups))
            for key, (entry, path) in eff.group(i)[1].items()
            if isinstance(entry, (FloatDim, ChoiceDim))]
    if search.kind == "grid":
        for key, _, path in dims:
            raise source.error(path, f"a grid dimension for {key} (a list, {{range: ..}} or "
                               "{log_range: ..}): Optuna dimensions need search.kind: optuna")
        for name in ("sampler", "n_trials", "seed"):
            if getattr(search, name) is not None:
                raise source.error((*search_path, name), "no Optuna setting in a grid search",
                                   getattr(search, name))
        return
    if not dims:
        raise source.error((*search_path, "kind"),
                           "grid when the space has no Optuna dimension", search.kind)
    if search.n_trials is None:
        raise source.error((*search_path, "n_trials"), "the number of Optuna trials per cell")
    if search.sampler == "grid":
        for key, entry, path in dims:
            if not isinstance(entry, ChoiceDim):
                raise source.error(path, f"a {{choice: [..]}} dimension for {key}: "
                                   "the grid sampler enumerates choices only")


def check_scheduler(eff: Effective, source: SpecSource) -> None:
    """Packs of one under an early-stopping scheduler: it stops a trial on one
    configuration's reports, and a trial trains a whole pack (``auto`` then means 1)."""
    scheduler, scheduler_path = eff.settings["scheduler"]
    pack_size, pack_path = eff.settings["pack_size"]
    if scheduler is not None and pack_size != "auto" and pack_size > 1:
        raise source.error(pack_path, f"1 when a scheduler is set (line "
                           f"{source.line(scheduler_path)}: early stopping judges one "
                           "configuration per trial)", pack_size)


def _grid_size(entry: Any) -> int:
    """How many values a space entry contributes to the grid (1 for an Optuna dimension),
    counted without listing them."""
    if isinstance(entry, (Range, LogRange)):
        return entry.num
    return len(entry) if isinstance(entry, list) else 1


def check_size(eff: Effective, source: SpecSource) -> None:
    """A sweep some machine could run: at most :data:`MAX_CONFIGURATIONS` configurations,
    packs of at most :data:`MAX_PACK_SIZE`, seeds up to :data:`MAX_SEED`.

    The configurations are counted arithmetically (per group, the product of its grid
    dimensions' sizes, times ``repeats``, times ``search.n_trials`` where Optuna searches),
    so a grid of billions of points is refused at once rather than expanded. The error
    points at the largest factor and gives the count.
    """
    repeats, repeats_path = eff.settings["repeats"]
    search, search_path = eff.settings["search"]
    factors: list[tuple[int, Location]] = [(repeats, repeats_path)]
    total = 0
    for index in range(len(eff.groups)):
        _, space = eff.group(index)
        sizes = {path: _grid_size(entry) for entry, path in space.values()}
        searched = search.kind == "optuna" and any(
            isinstance(entry, (FloatDim, ChoiceDim)) for entry, _ in space.values())
        trials = (search.n_trials or 1) if searched else 1
        total += math.prod(sizes.values()) * repeats * trials
        factors += [(size, path) for path, size in sizes.items()]
        if searched:
            factors.append((trials, (*search_path, "n_trials")))
    if total > MAX_CONFIGURATIONS:
        _, path = max(factors, key=lambda factor: factor[0])
        raise source.error(path, f"a sweep of at most {MAX_CONFIGURATIONS} configurations "
                           f"(this profile has {total}: split it, or sweep fewer values, "
                           "repeats or Optuna trials)", total)
    pack_size, pack_path = eff.settings["pack_size"]
    if isinstance(pack_size, int) and pack_size > MAX_PACK_SIZE:
        raise source.error(pack_path, f"packs of at most {MAX_PACK_SIZE} configurations "
                           "(a pack trains all its members in one process's memory)",
                           pack_size)
    seed, seed_path = eff.settings["seed"]
    if seed + repeats - 1 > MAX_SEED:
        raise source.error(seed_path, f"seed + repeats - 1 <= {MAX_SEED} (seeds are 32-bit)",
                           seed)
