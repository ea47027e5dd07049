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

    An error found while checking a profile other than the one asked for names it:
    ``t.yaml:7: profile 'paper': fixed.hidden: expected an integer >= 1 (got 0)``.

    Attributes:
        file: the spec file as the user named it (the file name for a shipped spec).
        line: 1-based line in ``file``, or None when the error has no place in it.
        profile: the profile whose resolved form is invalid, or None (the one asked for,
            or the spec as written).
    """

    def __init__(self, file: str, line: int | None, field: str, expected: str,
                 value: object = None, profile: str | None = None) -> None:
        super().__init__(field, expected, value)
        self.file = file
        self.line = line
        self.profile = profile

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        within = "" if self.profile is None else f"profile {self.profile!r}: "
        return f"{where}: {within}{super().__str__()}"

    def in_profile(self, profile: str) -> SpecError:
        """This error, found in the resolved form of ``profile`` (named in the message)."""
        return SpecError(self.file, self.line, self.field, self.expected, self.value, profile)

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        """Pickle by the constructor's arguments (an error may cross a Ray process)."""
        return (type(self), (self.file, self.line, self.field, self.expected, self.value,
                             self.profile))


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


MAX_DEPTH = 32
"""Deepest nesting of mappings and lists in a spec (the shipped specs nest 5 levels)."""


class _TooDeep(Exception):
    """The YAML nests deeper than :data:`MAX_DEPTH`, at ``line``."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads ``1e-4`` (no dot) as a float, as YAML 1.2 does, and stops
    at nesting deeper than :data:`MAX_DEPTH` (before PyYAML's recursion exhausts Python's
    stack, slowly).

    YAML 1.1, which PyYAML implements, reads it as the string "1e-4"; rates are written that
    way all the time.
    """

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH + 1:
                raise _TooDeep(self.peek_event().start_mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


MAX_SPEC_BYTES = 1_000_000
"""Largest spec file read (the shipped specs are under 10 kB): a larger file is refused
before it is read whole."""

MAX_SPEC_NODES = 100_000
"""Most keys and list items a spec may hold, counting what YAML aliases repeat: an alias
bomb (each anchor repeating the one before it several times) is refused before it is
built."""

def _record(node: yaml.Node, path: Location, source: SpecSource, budget: list[int]) -> None:
    """Record the line of every key and item below ``node``; reject duplicate and
    non-scalar keys, nesting beyond :data:`MAX_DEPTH` and more than :data:`MAX_SPEC_NODES`
    nodes (``budget`` holds how many may still be visited)."""
    if len(path) > MAX_DEPTH:
        raise source.error(path, f"at most {MAX_DEPTH} levels of nested mappings and lists",
                           len(path))
    budget[0] -= 1
    if budget[0] < 0:
        raise SpecError(source.file, node.start_mark.line + 1, format_path(path),
                        f"at most {MAX_SPEC_NODES} keys and list items (YAML aliases "
                        "counted each time they are used)")
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise SpecError(source.file, key_node.start_mark.line + 1, format_path(path),
                                "keys that are plain names, not mappings or lists")
            key = key_node.value
            if key in seen:
                raise SpecError(source.file, key_node.start_mark.line + 1,
                                format_path((*path, key)), "each key once in a mapping", key)
            seen.add(key)
            source.lines[(*path, key)] = key_node.start_mark.line + 1
            _record(value_node, (*path, key), source, budget)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            source.lines[(*path, i)] = item.start_mark.line + 1
            _record(item, (*path, i), source, budget)


def _read_text(path: Path, file: str) -> str:
    """The text of ``path``: at most :data:`MAX_SPEC_BYTES` of UTF-8."""
    try:
        with path.open("rb") as stream:
            raw = stream.read(MAX_SPEC_BYTES + 1)
    except OSError as err:
        raise ConfigError("spec", "a readable YAML file", str(path)) from err
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError(file, None, "spec", f"a file of at most {MAX_SPEC_BYTES} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        raise SpecError(file, line, "yaml", f"UTF-8 text (byte {err.start} is "
                        f"{raw[err.start:err.start + 1]!r})") from None


def read_yaml(path: Path, file: str) -> tuple[dict[str, Any], SpecSource]:
    """Parse the spec at ``path``: its data (a mapping) and its :class:`SpecSource`.

    ``file`` is the name messages show. A file that is not UTF-8 text, malformed YAML
    (non-printable characters included), duplicate keys, sizes beyond
    :data:`MAX_SPEC_BYTES`, :data:`MAX_SPEC_NODES` or :data:`MAX_DEPTH` and a document that
    is not a mapping raise :class:`SpecError`.
    """
    source = SpecSource(file=file, path=path)
    text = _read_text(path, file)
    try:
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            if node is not None:
                _record(node, (), source, [MAX_SPEC_NODES])
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else None
        raise SpecError(file, line, "yaml", f"well-formed YAML ({err.problem})") from err
    except yaml.reader.ReaderError as err:
        line = text[:err.position].count("\n") + 1
        raise SpecError(file, line, "yaml", f"printable text (character {err.character:#x} "
                        f"at offset {err.position} is not allowed in YAML)") from None
    except yaml.YAMLError as err:
        raise SpecError(file, None, "yaml", f"well-formed YAML ({err})") from err
    except _TooDeep as err:
        raise SpecError(file, err.line, "yaml", f"at most {MAX_DEPTH} levels of nested "
                        "mappings and lists") from None
    if not isinstance(data, dict):
        raise SpecError(file, 1, "(top level)", "a mapping of spec keys", data)
    return data, source
