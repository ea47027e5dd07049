"""The suite's own scheduling (:data:`tests.conftest.LONGEST_FIRST`): a module renamed or
removed would silently stop being started first, and pytest-xdist's reordering by test count
(its default since 3.7) would silently start the longest modules last."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import LONGEST_FIRST

ROOT = Path(__file__).resolve().parents[1]


def test_the_longest_modules_named_first_exist() -> None:
    assert [m for m in LONGEST_FIRST if not (ROOT / m).is_file()] == []


def test_modules_are_handed_out_in_collection_order(pytestconfig: pytest.Config) -> None:
    if not hasattr(pytestconfig, "workerinput"):
        pytest.skip("not run by pytest-xdist (-n 0)")
    assert pytestconfig.getoption("loadscopereorder") is False
