"""Headless Chromium for the tests that check what a researcher sees in a browser: Debian's
``chromium`` (which ``bash scripts/install.sh --test`` installs as it does PostgreSQL), driven
by Playwright with that system browser (Playwright never downloads one here).

Skipped, with the reason, where Chromium or Playwright is missing, except under CI (``$CI``
set), where the proof must run and a missing browser fails.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

WAIT_MS = 60_000
"""Longest the browser waits for an element (a UI renders slowly on a busy machine)."""


def _missing(reason: str) -> None:
    reason += "; `bash scripts/install.sh --test` installs it"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium, the system's own."""
    executable = shutil.which("chromium")
    if executable is None:
        _missing("Chromium is not installed (no `chromium` on PATH)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("Playwright is not installed (the `test` extra has it)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable)
        yield chromium
        chromium.close()
