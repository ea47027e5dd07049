"""The ``ortho`` command line: one entry point, one sub-command per job (DESIGN.md, "The
command line").

    ortho train EXPERIMENT [--set key=value ...] [--json]
    ortho sweep run|submit|resume|status|studies ...
    ortho report SPEC ...        (from ``analysis``, loaded through an entry point)
    ortho ui                     (from ``analysis``)

Sub-commands register themselves with ``register(subparsers)``; each sets ``func`` to a
callable that takes the parsed arguments and returns an exit status. Commands of other
packages are found through the ``ortho.commands`` entry-point group, so that ``sweeps``
never imports ``analysis``; they are loaded only when the command is not one of
:data:`BUILT_IN` (so ``ortho train`` and ``ortho sweep`` never import ``analysis``), and each
command imports what it needs (Ray, MLflow, pandas, torch) when it runs, so that ``--help``
answers at once. Any ``ConfigError`` or :class:`~sweeps.contract.LocationError`, and any
argument the parser rejects, becomes exit status 2 with a one-line message on stderr that
names the field (or the argument); the credentials of any URI in an error message are masked
(:func:`sweeps.contract.redact`). Output piped into a reader that leaves early (``ortho
report SPEC | head``) ends the command quietly with status 141 (128 + SIGPIPE, as a program
the signal ended), no traceback.
"""

from __future__ import annotations

import argparse
import errno
import os
import select
import signal
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any, NoReturn

from ortho_core.errors import ConfigError, OrthoError
from sweeps import data_command, sweep_command, train_command
from sweeps.contract import LocationError, redact

BUILT_IN: dict[str, Callable[[argparse._SubParsersAction], None]] = {
    "train": train_command.register,
    "sweep": sweep_command.register,
    "data": data_command.register,
}
"""This package's sub-commands, by name, and the function that adds each to the parser."""


DESCRIPTION = """\
Reproduce the experiments of the orthogonality papers: train a configuration here, run a
spec's sweep of configurations on Ray with every run tracked in MLflow, and read the results
as tables, figures and an HTML report beside the published numbers."""
"""What ``ortho --help`` says the command does (user text)."""

EXAMPLES = """\
Examples:
  ortho reproduce manchev --profile smoke    # run a paper's sweeps, write its HTML report
  ortho sweep run synthetic-max-length       # run one sweep (profile cpu)
  ortho train synthetic --keys               # list an experiment's settings

Run "ortho COMMAND --help" for a command's options."""
"""The examples ``ortho --help`` ends with."""


def one_line(text: str) -> str:
    """``text`` on one line: line breaks and other non-printable characters escaped as
    Python writes them (a spec key or ``--set`` value may hold any)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _reader_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it (``ortho report … | head``): the
    pipe then polls as an error."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll here, or no real stdout
        return False


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line on stderr (exit status 2),
    pointing at ``--help`` instead of printing the usage block; its sub-command parsers
    are of the same class. Options are taken as spelt in full only: an abbreviation that
    works today (``--prof``) would change meaning or break a user's script when an option
    with the same prefix is added."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: error: MESSAGE (see PROG --help)`` and exit with status 2."""
        self.exit(2, one_line(f"{self.prog}: error: {message} (see {self.prog} --help)")
                  + "\n")


def build_parser(plugins: bool = True) -> argparse.ArgumentParser:
    """The parser with the built-in sub-commands and, if ``plugins``, those of the
    ``ortho.commands`` entry points."""
    parser = Parser(prog="ortho", description=DESCRIPTION, epilog=EXAMPLES,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in BUILT_IN.values():
        register(sub)
    if plugins:
        for ep in sorted(entry_points(group="ortho.commands"), key=lambda e: e.name):
            ep.load()(sub)
    return parser


ACTION_DESTS = ("sweep_command", "data_action")
"""The ``dest`` of the built-in commands' own sub-commands (``ortho sweep run``,
``ortho data download``), whose words name the command in its error lines."""


def unwritable(err: BaseException) -> str | None:
    """What stops a command writing, where ``err`` (or an error it arose from) is a full disk
    or a read-only file or database: the store or the sweep's home, usually; None for any
    other error, which keeps its traceback."""
    seen: BaseException | None = err
    while seen is not None:
        text = str(seen).lower()
        if (isinstance(seen, OSError) and seen.errno == errno.ENOSPC) or "disk is full" in text:
            return "no space left on the device"
        if ((isinstance(seen, OSError) and seen.errno == errno.EROFS)
                or "readonly database" in text or "read-only file system" in text):
            return "a read-only file or database"
        seen = seen.__cause__ or seen.__context__
    return None


def command_words(args: argparse.Namespace) -> str:
    """The command that ran, as the user typed it: ``ortho sweep run``, ``ortho report``."""
    actions = [getattr(args, dest) for dest in ACTION_DESTS if getattr(args, dest, None)]
    return " ".join(["ortho", args.command, *actions])


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ortho`` command line; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(plugins=False) if argv[:1] and argv[0] in BUILT_IN else build_parser()
    args, extra = parser.parse_known_args(argv)
    name = command_words(args)
    if extra:  # argparse would name ``ortho``: they were typed to the sub-command
        Parser(prog=name).error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # here, so that a reader gone meanwhile is told apart below
        return status
    except BrokenPipeError:
        if not _reader_gone():  # another pipe broke (a child's, a socket's): not ours to hide
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except (ConfigError, LocationError) as err:
        print(one_line(redact(f"{name}: invalid {err}")), file=sys.stderr)
        return 2
    except OrthoError as err:
        print(redact(f"{name}: {err}"), file=sys.stderr)
        return 1
    except Exception as err:
        why = unwritable(err)
        if why is None:
            raise
        cause = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        print(one_line(redact(f"{name}: cannot write: {why} ({cause}); make room or fix the "
                              "permissions, then run it again (an interrupted sweep goes on "
                              "with `ortho sweep resume`)")), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
