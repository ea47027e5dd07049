"""Typed errors of ``ortho_core``.

Every error a user can cause by bad input is a :class:`ConfigError` (or a subclass) that
names the offending field and what was expected, so that the ``ortho`` CLI can turn it
into exit status 2 with a precise message before any work starts.
"""

from __future__ import annotations


class OrthoError(Exception):
    """Base class of all errors raised on purpose by ortho-sweeps."""


class ConfigError(OrthoError, ValueError):
    """A configuration value is invalid.

    Attributes:
        field: the configuration key (DESIGN.md name, e.g. ``lr``) or a dotted path.
        expected: what a valid value looks like, in words.
        value: the value that was given.
    """

    def __init__(self, field: str, expected: str, value: object = None) -> None:
        self.field = field
        self.expected = expected
        self.value = value
        got = "" if value is None else f" (got {value!r})"
        super().__init__(f"{field}: expected {expected}{got}")

    def __reduce__(self) -> tuple:
        """Pickle by constructor arguments, so the error survives crossing a Ray process."""
        return (type(self), (self.field, self.expected, self.value))


class DataError(ConfigError):
    """A dataset file is missing, unreadable or fails its checksum.

    ``field`` is the file's path; ``expected`` says what should be there.
    """


class MemberError(OrthoError):
    """Some members of a pack cannot train, through no fault of the others.

    ``members`` are their indices in the pack the trainer was given; the pack's isolation
    (:mod:`ortho_core.experiments.isolation`) ends them as failed and trains the rest.
    """

    def __init__(self, message: str, members: tuple[int, ...] = ()) -> None:
        self.members = tuple(members)
        super().__init__(message)

    def __reduce__(self) -> tuple:
        """Pickle with ``members``, so the error survives crossing a Ray process."""
        return (type(self), (str(self), self.members))


class PretrainError(MemberError, RuntimeError):
    """Orthogonal pre-training (OINIT, M eq. 16-18) did not converge within its step limit."""
