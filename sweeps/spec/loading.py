"""Finding a spec by name or path and loading it, checked for every profile.

:func:`load_spec` checks all that does not need the trainer; :func:`sweeps.spec.resolve`
checks the rest for the profile it applies.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from ortho_core.errors import ConfigError
from sweeps.contract import could_name_a_spec, is_file
from sweeps.spec.profiles import (
    Effective,
    check_levels,
    check_scheduler,
    check_search,
    check_size,
)
from sweeps.spec.schema import PROFILES, Profile, Spec
from sweeps.spec.source import SpecError, read_yaml, validation_error

SPEC_DIR = resources.files("sweeps") / "specs"
"""The shipped specs (package data)."""


def available_specs() -> list[str]:
    """Names of the shipped specs, sorted."""
    return sorted(p.name.removesuffix(".yaml") for p in SPEC_DIR.iterdir()
                  if p.name.endswith(".yaml"))


def _locate(name_or_path: str) -> tuple[Path, str]:
    """The file of a spec name or path, and the name messages show."""
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        path = Path(name_or_path)
        if not is_file(path):
            raise ConfigError("spec", "an existing YAML file", name_or_path)
        return path, name_or_path
    shipped = SPEC_DIR / f"{name_or_path}.yaml"
    if not is_file(Path(str(shipped))):
        here = f"{name_or_path}.yaml"  # a spec of one's own in this folder, named by its name
        hint = f"; to run the one here, pass ./{here}" if is_file(Path(here)) else ""
        raise ConfigError("spec", "the name of a shipped spec (" + ", ".join(available_specs())
                          + f") or a path to a YAML file{hint}", name_or_path)
    return Path(str(shipped)), shipped.name


def load_spec(name_or_path: str) -> Spec:
    """Read and check a spec: a shipped spec's name or a path to a YAML file.

    Checks everything that does not need the trainer: the schema, the name against the file,
    and for every profile (each of :data:`PROFILES` the file leaves out added, overriding
    nothing) the merged fixed and swept keys and the
    sweep's size (:func:`~sweeps.spec.profiles.check_size`, counted without expanding it). Raises
    :class:`SpecError` (file, line, field) or ``ConfigError`` (field ``spec``) for an unknown
    name.
    """
    path, file = _locate(name_or_path)
    data, source = read_yaml(path, file)
    try:
        spec = Spec.model_validate(data)
    except ValidationError as err:
        raise validation_error(err, source) from None
    spec._source = source
    if not could_name_a_spec(spec.name):  # its sweeps could not be found by name
        raise source.error(("name",), "a name without blanks, path separators, control "
                           "characters or both kinds of quote", spec.name)
    if spec.name != path.stem:
        raise source.error(("name",), f"the file's stem {path.stem!r}", spec.name)
    written = spec._written = frozenset(spec.profiles)
    for profile in PROFILES:
        spec.profiles.setdefault(profile, Profile())
    check_levels(spec)
    for profile in spec.profiles:
        eff = Effective.of(spec, profile)
        check_search(eff, source)
        check_scheduler(eff, source)
        try:
            check_size(eff, source)
        except SpecError as err:  # a profile the file does not write is the spec itself
            raise (err.in_profile(profile) if profile in written else err) from None
    return spec
