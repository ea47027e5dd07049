"""``--help`` of every ``ortho`` command and sub-command is written for users: it answers at
once with exit status 0, says what the command does, gives an example, states the default of
every option that has one, and shows no developer notes (module docstrings, reST markup,
design documents)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator

import pytest

from sweeps.cli import build_parser, main

DEVELOPER_WORDS = ("module", ":func:", ":class:", ":mod:", ":data:", "``", "DESIGN.md",
                   "STACK.md", "entry point", "docstring", "TODO")
"""What a user-facing help text never contains."""


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
              ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (sub-)command of ``parser`` as its argument path and its parser, the parser
    itself first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


COMMANDS = dict(_commands(build_parser()))


def test_every_command_is_covered():
    names = {" ".join(path) for path in COMMANDS}
    assert {"", "train", "sweep", "sweep run", "sweep submit", "sweep resume", "sweep status",
            "data", "data download", "report", "ui"} <= names


@pytest.mark.parametrize("path", list(COMMANDS), ids=lambda p: " ".join(p) or "ortho")
def test_help_is_for_users(path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*path, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    description = COMMANDS[path].description or ""
    assert len(description.split()) >= 8, "says what the command does"
    assert "Example" in text and f"ortho {' '.join(path)}".strip() in text.split("Example")[-1]
    assert not [w for w in DEVELOPER_WORDS if w in text]


@pytest.mark.parametrize("path", list(COMMANDS), ids=lambda p: " ".join(p) or "ortho")
def test_every_default_is_stated(path):
    """Every option that takes a value and may be left out says what happens without it,
    including one whose default (None) the command works out itself."""
    for action in COMMANDS[path]._actions:
        if action.option_strings and action.nargs != 0 and not action.required:
            assert "default" in (action.help or ""), (path, action.dest)


def test_help_from_a_fresh_process_lists_the_commands_of_other_packages():
    """The whole command line, with the commands of the other packages, in a new process
    (the in-process tests above find its modules imported already; test_cli_imports.py
    checks that building it imports no heavy package, which keeps it quick)."""
    proc = subprocess.run([sys.executable, "-m", "sweeps.cli", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Examples:" in proc.stdout and "the MLflow UI" in proc.stdout  # a plugin command
