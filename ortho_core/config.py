"""Configuration as data: helpers shared by every experiment's ``Config`` dataclass.

Each experiment declares a dataclass whose fields are the DESIGN.md names with a docstring
under every field (cleanrl style). Values arrive from the CLI (strings) or from a sweep spec
(YAML scalars); :func:`from_dict` converts and validates them at the edge, raising
:class:`~ortho_core.errors.ConfigError` that names the field.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import itertools
import math
import re
import textwrap
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from ortho_core.errors import ConfigError

C = TypeVar("C")


def require(ok: bool, field: str, expected: str, value: object = None) -> None:
    """Raise ``ConfigError(field, expected, value)`` unless ``ok``."""
    if not ok:
        raise ConfigError(field, expected, value)


def positive(value: float, field: str) -> None:
    """Require a finite number > 0."""
    require(isinstance(value, (int, float)) and math.isfinite(value) and value > 0,
            field, "a finite number > 0", value)


def non_negative(value: float, field: str) -> None:
    """Require a finite number >= 0."""
    require(isinstance(value, (int, float)) and math.isfinite(value) and value >= 0,
            field, "a finite number >= 0", value)


def fraction(value: float, field: str) -> None:
    """Require a number in [0, 1]."""
    require(isinstance(value, (int, float)) and 0 <= value <= 1, field, "a fraction in [0, 1]",
            value)


def integer_at_least(value: object, field: str, minimum: int) -> None:
    """Require an integer (not a bool) >= ``minimum``."""
    require(isinstance(value, int) and not isinstance(value, bool) and value >= minimum,
            field, f"an integer >= {minimum}", value)


MAX_SEED = 2**32 - 1
"""Largest seed: seeds are 32-bit, as NumPy's legacy seeding requires, so that every library
a trainer might seed accepts them (``torch.Generator.manual_seed`` overflows from 2⁶⁴)."""


def seed_value(value: object, field: str) -> None:
    """Require a seed: an integer (not a bool) in 0..:data:`MAX_SEED`."""
    require(isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SEED,
            field, f"an integer in 0..{MAX_SEED} (seeds are 32-bit)", value)


def optional_count(value: object, field: str, high: int) -> None:
    """Require None or an integer (not a bool) in 1..``high`` (a size where None means
    "all")."""
    require(value is None or (isinstance(value, int) and not isinstance(value, bool)
                              and 1 <= value <= high),
            field, f"None or an integer in 1..{high}", value)


def batch_fits(batch_size: int, train_size: int | None, n_train: int) -> None:
    """Require a training subset (``train_size``; None: all ``n_train`` examples) that holds
    one batch and no more than the split: the message names ``batch_size`` beside the range,
    since either may be the one the user changed."""
    require(batch_size <= n_train, "batch_size", f"at most the {n_train} training examples",
            batch_size)
    require(train_size is None or (isinstance(train_size, int)
                                   and not isinstance(train_size, bool)
                                   and batch_size <= train_size <= n_train), "train_size",
            f"None or an integer in {batch_size}..{n_train} (one batch of batch_size = "
            f"{batch_size} at least)", train_size)


def one_of(value: object, choices: Sequence[object], field: str) -> None:
    """Require ``value`` to be one of ``choices``."""
    require(value in choices, field, "one of " + ", ".join(map(str, choices)), value)


_INTEGER = re.compile(r"\s*[+-]?[0-9]{1,4000}\s*")
"""An integer as text, read exactly (ASCII digits, within ``int``'s limit on digits)."""


def _convert(name: str, tp: Any, raw: Any) -> Any:
    """Convert ``raw`` (a string from the CLI or a YAML scalar) to the field type ``tp``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if raw is None or (isinstance(raw, str) and raw.lower() in ("none", "null", "")):
            return None
        return _convert(name, args[0], raw)
    if origin is typing.Literal:
        choices = typing.get_args(tp)
        one_of(raw, choices, name)
        return raw
    if tp is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in ("true", "1", "yes", "on"):
            return True
        if isinstance(raw, str) and raw.lower() in ("false", "0", "no", "off"):
            return False
        raise ConfigError(name, "true or false", raw)
    if tp is int:
        if isinstance(raw, bool):
            raise ConfigError(name, "an integer", raw)
        if isinstance(raw, int):
            return raw
        if isinstance(raw, str) and _INTEGER.fullmatch(raw):
            return int(raw)  # exactly: a float holds integers up to 2⁵³ only
        try:
            f = float(raw)
        except (TypeError, ValueError):
            raise ConfigError(name, "an integer", raw) from None
        if not f.is_integer():
            raise ConfigError(name, "an integer", raw)
        return int(f)
    if tp is float:
        if isinstance(raw, bool):
            raise ConfigError(name, "a number", raw)
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise ConfigError(name, "a number", raw) from None
    if tp is str:
        if not isinstance(raw, (str, int, float)) or isinstance(raw, bool):
            raise ConfigError(name, "a string", raw)
        return str(raw)
    if origin in (tuple, list):
        (item,) = typing.get_args(tp)[:1] or (str,)
        items = raw.split(",") if isinstance(raw, str) else list(raw)
        return tuple(_convert(name, item, x) for x in items)
    return raw


@functools.cache
def _fields(cls: type) -> tuple[dict[str, Any], frozenset[str]]:
    """The type of each field of dataclass ``cls`` and the names its constructor takes: read
    once per class (``typing.get_type_hints`` evaluates every annotation, some 150 µs a
    call for a trainer's Config)."""
    known = frozenset(f.name for f in dataclasses.fields(cls) if f.init)
    return typing.get_type_hints(cls), known


def from_dict(cls: type[C], values: Mapping[str, Any]) -> C:
    """Build ``cls`` from ``values``, converting types and rejecting unknown keys.

    The dataclass's own ``__post_init__`` then checks ranges. Raises ``ConfigError`` naming
    the first offending field.
    """
    hints, known = _fields(cls)
    for key in values:
        if key not in known:  # the key is what is wrong: no value quoted after the list
            raise ConfigError(key, "a known key: " + ", ".join(sorted(known)))
    kwargs = {k: _convert(k, hints[k], v) for k, v in values.items()}
    return cls(**kwargs)


def to_dict(config: Any) -> dict[str, Any]:
    """The configuration as a flat dict of plain values (what MLflow logs as params). A
    config's fields hold scalars and tuples (:func:`from_dict`), so its values are read as
    they are, without ``dataclasses.asdict``'s deep copy: a sweep computes this for every
    configuration of every profile (its trial keys), 0.1 ms each that way."""
    return {f.name: (list(v) if isinstance(v := getattr(config, f.name), tuple) else v)
            for f in dataclasses.fields(config)}


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of a dataclass, read from its source (cleanrl style)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return {}
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for stmt, nxt in itertools.pairwise(body):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)):
            docs[stmt.target.id] = " ".join(nxt.value.value.split())
    return docs


def check_pack(configs: Sequence[Any], shape_fields: Sequence[str]) -> None:
    """Require a non-empty pack whose members agree on every field in ``shape_fields``."""
    require(len(configs) > 0, "configs", "at least one configuration", len(configs))
    first = configs[0]
    for cfg in configs[1:]:
        require(type(cfg) is type(first), "configs", "configurations of one experiment",
                type(cfg).__name__)
        for name in shape_fields:
            require(getattr(cfg, name) == getattr(first, name), name,
                    f"the same value in every member of a pack ({getattr(first, name)!r})",
                    getattr(cfg, name))
