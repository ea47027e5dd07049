"""Where a spec's keys are written, so that every error points into the file.

:func:`read_yaml` parses once with :func:`yaml.compose`, records the line of each mapping key
and sequence item under its path (``("space", "lr", "log_range")``), rejects duplicate keys
(PyYAML would silently keep the last) and then constructs the plain data.
:meth:`SpecSource.error` and :func:`validation_error` turn a path, or pydantic's first error,
into a :class:`SpecError` at its line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ortho_core.errors import ConfigError
from sweeps.spec.space import TAGS

Location = tuple[str | int, ...]
"""A location in the spec: mapping keys and list indices from the top."""


class SpecError(ConfigError):
    """A spec is invalid: names the YAML file, the line and the dotted field path.

    ``str(err)`` reads ``synthetic-max-length.yaml:14: space.lr.log_range: expected two
    positive numbers low < high (got [0.1, -1])``; the ``ortho`` CLI turns it into exit
    status 2 like every :class:`ConfigError`.

    Attributes:
        file: the spec file as the user named it (the file name for a shipped spec).
        line: 1-based line in ``file``, or None when the error has no place in it.
    """

    def __init__(self, file: str, line: int | None, field: str, expected: str,
                 value: object = None) -> None:
        super().__init__(field, expected, value)
        self.file = file
        self.line = line

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {super().__str__()}"

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        """Pickle by the constructor's arguments (an error may cross a Ray process)."""
        return (type(self), (self.file, self.line, self.field, self.expected, self.value))


def format_path(path: Sequence[str | int]) -> str:
    """``("groups", 1, "space", "penalty")`` -> ``groups[1].space.penalty``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


@dataclass(frozen=True)
class SpecSource:
    """Where a spec came from, and the line of each of its paths."""

    file: str
    """The file as shown in messages."""
    path: Path
    """The file on disk."""
    lines: dict[Location, int] = field(default_factory=dict, repr=False)
    """Path -> 1-based line of its key (or list item)."""

    def line(self, path: Sequence[str | int]) -> int:
        """The line of ``path``, or of its longest prefix present in the file (1 at worst)."""
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return 1

    def error(self, path: Sequence[str | int], expected: str, value: object = None) -> SpecError:
        """A :class:`SpecError` for ``path``, located at its line."""
        return SpecError(self.file, self.line(path), format_path(path), expected, value)


def validation_error(err: ValidationError, source: SpecSource) -> SpecError:
    """The first of pydantic's errors as a :class:`SpecError` at its field and line."""
    first = err.errors()[0]
    loc = tuple(p for p in first["loc"] if p not in TAGS and p != "[key]")
    if first["type"] == "unknown_key":
        return source.error((*loc, first["ctx"]["key"]), first["msg"])
    if first["type"] == "missing":
        return source.error(loc, "a value (the key is required)")
    expected = first["msg"].removeprefix("Value error, ").removeprefix("Input should be ")
    return source.error(loc, expected, first["input"])


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads ``1e-4`` (no dot) as a float, as YAML 1.2 does.

    YAML 1.1, which PyYAML implements, reads it as the string "1e-4"; rates are written that
    way all the time.
    """


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


def _record(node: yaml.Node, path: Location, source: SpecSource) -> None:
    """Record the line of every key and item below ``node``; reject duplicate keys."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                raise SpecError(source.file, key_node.start_mark.line + 1,
                                format_path((*path, key)), "each key once in a mapping", key)
            seen.add(key)
            source.lines[(*path, key)] = key_node.start_mark.line + 1
            _record(value_node, (*path, key), source)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            source.lines[(*path, i)] = item.start_mark.line + 1
            _record(item, (*path, i), source)


def read_yaml(path: Path, file: str) -> tuple[dict[str, Any], SpecSource]:
    """Parse the spec at ``path``: its data (a mapping) and its :class:`SpecSource`.

    ``file`` is the name messages show. Malformed YAML, duplicate keys and a document that
    is not a mapping raise :class:`SpecError`.
    """
    source = SpecSource(file=file, path=path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError("spec", "a readable YAML file", str(path)) from err
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _record(node, (), source)
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else None
        raise SpecError(file, line, "yaml", f"well-formed YAML ({err.problem})") from err
    except yaml.YAMLError as err:
        raise SpecError(file, None, "yaml", f"well-formed YAML ({err})") from err
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise SpecError(file, 1, "(top level)", "a mapping of spec keys", data)
    return data, source
