"""The suite's own scheduling (:data:`tests.conftest.LONGEST_FIRST`): a module renamed or
removed would silently stop being collected first."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONGEST_FIRST

ROOT = Path(__file__).resolve().parents[1]


def test_the_longest_modules_named_first_exist() -> None:
    assert [m for m in LONGEST_FIRST if not (ROOT / m).is_file()] == []
