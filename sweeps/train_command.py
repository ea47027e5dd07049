"""``ortho train EXPERIMENT [--set key=value ...] [--json]``: one configuration or one pack,
trained in this process without Ray or MLflow.

A ``--set`` value with commas makes a pack: ``--set lr=0.1,0.01 --set variant=plain,oinit``
trains the four combinations together (DESIGN.md "Packs"); the values of a key the members of
a pack must share (the experiment's ``PACK_FIELDS``) train one pack after another. Progress
goes to stderr while training (:class:`ProgressPrinter`: a bar for each pack on a terminal, a
line every few seconds elsewhere, then how many members ended each way); the summary
(or, with ``--json``, a JSON document) goes to stdout, each member named from the ``--set``
keys in the papers' symbols (``OINIT α=0.01``). ``--keys`` prints the experiment's config keys
as a table.

One member's failure never ends the pack (:mod:`ortho_core.experiments.isolation`): an
``oinit`` member whose pre-training does not converge ends ``failed`` with its error while
the others train. The exit status is 0 when every member trained, 1 when some failed (named
on stderr; their errors are in the summary or the JSON), 2 for bad input, 130 when
interrupted: Ctrl-C ends with what each member had reached by then on stderr
(:func:`reached_text`: its last step and the latest metrics it reported, the outcome of a
member of a pack that had ended, or that its pack had not started), as nothing of an
interrupted training is kept anywhere else.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import shutil
import sys
import time
from collections import Counter
from collections.abc import Container, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ortho_core import experiments
from ortho_core.config import field_docs, from_dict, to_dict
from ortho_core.errors import ConfigError, OrthoError
from ortho_core.experiments.data_check import check_data
from ortho_core.experiments.isolation import train_isolated
from ortho_core.reporting import Outcome, Report, Result
from sweeps.contract import run_name

if TYPE_CHECKING:
    from tqdm import tqdm

PROGRESS_KEYS = ("seq_len", "train_loss", "train_accuracy", "val_error", "test_accuracy",
                 "spectral_radius", "grad_norm")
"""Metrics shown on a progress line when the experiment reports any of them; otherwise the
first ``PROGRESS_WIDTH`` metrics of the report are shown (``train_accuracy``: the curve K's
Fig. 12 compares, which ``lcw-mlp`` reports every epoch)."""
PROGRESS_WIDTH = 6
REACHED_PREFIXES = ("val_", "test_")
"""Besides :data:`PROGRESS_KEYS`, the metrics an interrupted run shows for each member (its
latest validation and test numbers)."""
LINE_INTERVAL = 10.0
"""Seconds between progress lines where stderr is no terminal (CI logs, pipes)."""
MEANING_WIDTH = 40
"""Narrowest the meaning column of ``--keys`` is wrapped to (wider on a wide terminal)."""


HELP = """\
Train one configuration of an experiment, or a pack of them at once, in this process (no
Ray, no MLflow). Progress goes to stderr: a bar on a terminal, a line every few seconds
elsewhere. Each configuration's outcome (solved, unsolved, diverged or failed) and results
go to stdout.

Settings not given keep their defaults (--keys lists them). A value with commas makes a
pack: every combination is trained, e.g. --set lr=0.1,0.01 --set variant=plain,oinit trains
four configurations (several values of a key --keys marks * train one pack after another). A
configuration that fails does not stop the others.

Ctrl-C stops it and prints what each configuration had reached (its last step and latest
metrics).

Exit status: 0 when every configuration trained, 1 when some failed, 2 for bad input, 130
when interrupted."""
"""What ``ortho train --help`` says (user text)."""

HELP_EXAMPLES = """\
Examples:
  ortho train synthetic --keys
  ortho train synthetic --set protocol=fixed --set seq_len=10 --set variant=plain,oinit"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ortho train`` to the ``ortho`` parser."""
    p = sub.add_parser("train", help="train one configuration or a pack of them here",
                       description=HELP, epilog=HELP_EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("experiment", help="one of: " + ", ".join(experiments.EXPERIMENTS))
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="set a setting (repeatable); comma-separated values make a pack "
                   "(default: the experiment's defaults, see --keys)")
    p.add_argument("--json", action="store_true",
                   help="print the results as JSON on stdout instead of text")
    p.add_argument("--keys", action="store_true",
                   help="list the experiment's settings with defaults and meaning, then exit")
    p.set_defaults(func=run)


def parse_overrides(pairs: Sequence[str]) -> dict[str, list[str]]:
    """``["lr=0.1,0.01", "task=adding"]`` -> ``{"lr": ["0.1", "0.01"], "task": ["adding"]}``.
    A key set twice, or a value listed twice, is a ``ConfigError`` naming the key (the last
    one would win silently, or two members would train the same configuration)."""
    out: dict[str, list[str]] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError("--set", "KEY=VALUE", pair)
        values = [v.strip() for v in value.split(",")]
        if any(v == "" for v in values):
            raise ConfigError(key, "a non-empty value (or comma-separated values)", value)
        if key in out:
            raise ConfigError(key, "one --set of it (list its values as one, comma-separated)",
                              f"{','.join(out[key])} and {value}")
        if len(set(values)) < len(values):
            raise ConfigError(key, "distinct values", value)
        out[key] = values
    return out


def build_packs(experiment: str, pairs: Sequence[str]) -> tuple[Any, list[Any], list[list[int]]]:
    """The experiment module, its validated configurations (the cartesian product of
    ``--set`` lists) and their packs: the indices of the configurations that share the
    values of the experiment's ``PACK_FIELDS`` (one pack unless a list sets one of those),
    in order of first appearance."""
    from sweeps.spec.profiles import MAX_PACK_SIZE

    module = experiments.get(experiment)
    overrides = parse_overrides(pairs)
    size = math.prod(len(values) for values in overrides.values())
    if size > MAX_PACK_SIZE:  # before the product is built: it could be any size
        raise ConfigError("--set", f"at most {MAX_PACK_SIZE} configurations (the product of "
                          "the comma-separated lists)", size)
    keys = list(overrides)
    configs = [from_dict(module.Config, dict(zip(keys, combo, strict=True)))
               for combo in itertools.product(*overrides.values())]
    packs: dict[str, list[int]] = {}
    for i, cfg in enumerate(configs):
        shape = repr([getattr(cfg, name) for name in module.PACK_FIELDS])
        packs.setdefault(shape, []).append(i)
    return module, configs, list(packs.values())


class ProgressPrinter:
    """The progress of a pack of ``n_members`` configurations on ``stream`` (default stderr)
    while it trains: on a terminal (``tqdm`` decides, as with its ``disable=None``) a bar
    counting steps, with the members that diverged so far (their latest report holds a NaN
    or an infinite value) and the latest report's metrics; elsewhere the same as one plain
    line at most every ``interval`` seconds (the first report at once), so that logs stay
    short. With ``planned``, the pack's planned steps (its experiment's ``planned_steps``,
    the largest of its members'), the bar has that total and a line says ``step 400/1000``.
    :meth:`close` takes the bar away; :meth:`ended` prints how the members ended (a
    trainer reports no member's end before the pack's, so solved and done are counted then).
    :attr:`reached` keeps each member's latest step and metrics for an interrupted run.
    """

    def __init__(self, n_members: int, stream: TextIO | None = None,
                 interval: float = LINE_INTERVAL, desc: str | None = None,
                 start: float | None = None, planned: int | None = None) -> None:
        from tqdm import tqdm

        from sweeps.status import bar_columns

        self.n_members = n_members
        self.stream = stream or sys.stderr
        self.interval = interval
        self.start = time.monotonic() if start is None else start
        """When the training began (``time.monotonic()``; the first pack's start for all)."""
        self._last = -float("inf")
        self._diverged: set[int] = set()
        self.reached: dict[int, Report] = {}
        """Each member's latest report, its metrics merged over every report it made (a
        metric some reports leave out keeps its latest value)."""
        self.label = desc
        """The pack's name when ``ortho train`` trains several in turn (``pack 2/4``)."""
        self.planned = planned
        bar = tqdm(desc=desc or (f"pack of {n_members}" if n_members > 1 else None),
                   total=planned, unit="step", file=self.stream, leave=False, miniters=0,
                   disable=None, **bar_columns(self.stream))
        self.bar: tqdm | None = None if bar.disable else bar
        """The bar on a terminal; None where lines are printed instead."""

    def _shown(self, report: Report) -> str:
        shown = shown_metrics(report.metrics)
        diverged = f"{len(self._diverged)} diverged, " if self._diverged else ""
        who = f"member {report.member}/{self.n_members} " if self.n_members > 1 else ""
        return diverged + who + shown

    def __call__(self, report: Report) -> None:
        before = self.reached.get(report.member)
        merged = {**before.metrics, **report.metrics} if before else dict(report.metrics)
        self.reached[report.member] = Report(report.member, report.step, merged)
        if all(math.isfinite(v) for v in report.metrics.values()):
            self._diverged.discard(report.member)
        else:
            self._diverged.add(report.member)
        if self.bar is not None:
            self.bar.set_postfix_str(self._shown(report), refresh=False)
            self.bar.update(max(0, report.step - self.bar.n))
            return
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        self._last = now
        where = f"{self.label}: " if self.label else ""
        of = "" if self.planned is None else f"/{self.planned}"
        print(f"[{now - self.start:7.1f}s] {where}step {report.step}{of} "
              f"{self._shown(report)}", file=self.stream, flush=True)

    def close(self) -> None:
        """Take the bar away (nothing to do for lines)."""
        if self.bar is not None:
            self.bar.close()

    def ended(self, results: Sequence[Result]) -> None:
        """Print how many configurations ended each way (``4 configuration(s) done in
        8.7 s: 3 solved, 1 diverged``)."""
        counts = Counter(r.outcome for r in results)
        parts = [f"{counts[o]} {o.value}" for o in Outcome if counts[o]]
        print(f"{len(results)} configuration(s) done in {time.monotonic() - self.start:.1f} s: "
              + ", ".join(parts), file=self.stream, flush=True)


def _varying(configs: Sequence[Any]) -> list[str]:
    """Config keys whose values differ across the pack (shown in the summary)."""
    rows = [to_dict(c) for c in configs]
    return [k for k in rows[0] if any(r[k] != rows[0][k] for r in rows[1:])]


def member_names(configs: Sequence[Any], keys: Sequence[str] | None = None) -> list[str]:
    """Each member's name (:func:`sweeps.naming.run_name`, the papers' symbols) from the
    ``--set`` ``keys``: those that differ across a pack, all of them for one configuration;
    without ``keys``, the config keys that differ across the pack."""
    varying = _varying(configs)
    named = varying if keys is None else (
        [k for k in keys if k in varying] if len(configs) > 1 else list(keys))
    return [run_name(to_dict(c), named) for c in configs]


def summary_text(experiment: str, configs: Sequence[Any], results: Sequence[Result],
                 seconds: float, keys: Sequence[str] | None = None) -> str:
    """A human summary: one block per member, named from the ``--set`` ``keys``
    (:func:`member_names`), with its results."""
    lines = [f"ortho train {experiment}: {len(configs)} configuration(s) in {seconds:.1f} s"]
    names = member_names(configs, keys)
    for i, (name, res) in enumerate(zip(names, results, strict=True)):
        lines.append(f"  [{i}] {name}: {res.outcome.value}")
        if res.error is not None:
            lines.append(f"      error: {res.error.strip().splitlines()[-1]}")
        lines.extend(f"      {k} = {v:.6g}" if isinstance(v, float) else f"      {k} = {v}"
                     for k, v in res.summary.items())
    return "\n".join(lines)


def shown_metrics(metrics: Mapping[str, float], prefixes: tuple[str, ...] = ()) -> str:
    """``metrics`` as a progress line shows them: those of :data:`PROGRESS_KEYS` and any
    whose name starts with one of ``prefixes``, else the first :data:`PROGRESS_WIDTH`."""
    keys = [k for k in PROGRESS_KEYS if k in metrics]
    keys += [k for k in metrics if prefixes and k.startswith(prefixes) and k not in keys]
    keys = keys or list(metrics)[:PROGRESS_WIDTH]
    return " ".join(f"{k}={metrics[k]:.4g}" for k in keys)


def reached_text(experiment: str, names: Sequence[str], reached: Mapping[int, Report],
                 seconds: float, ended: Mapping[int, Result] | None = None,
                 begun: Container[int] | None = None) -> str:
    """What each member of an interrupted training had reached after ``seconds``, from its
    latest report in ``reached`` (by member index; :attr:`ProgressPrinter.reached`): its step
    and metrics, or that it had reported nothing yet; with several packs, the outcome of a
    member of a pack that had ended (``ended``), and that a member of a pack not yet
    started (not in ``begun``) had not started."""
    lines = [f"ortho train {experiment}: stopped after {seconds:.1f} s; reached so far:"]
    for i, name in enumerate(names):
        report = reached.get(i)
        done = (ended or {}).get(i)
        shown = "" if report is None else (
            f"step {report.step} {shown_metrics(report.metrics, REACHED_PREFIXES)}".rstrip())
        if done is not None:
            state = done.outcome.value + (f" at {shown}" if shown else "")
        elif begun is not None and i not in begun:
            state = "not started"
        else:
            state = shown or "nothing reported yet"
        lines.append(f"  [{i}] {name}: {state}")
    return "\n".join(lines)


_LITERAL = re.compile(r"``(.+?)``")
_ROLE = re.compile(r":[a-z]+:`(~?)([^`]+)`")


def plain_text(doc: str) -> str:
    """A field docstring's reStructuredText as a terminal shows it: ````x```` as x, a
    cross-reference ``:func:`~a.b.c``` as c (``~``: its last part) or a.b.c."""
    doc = _LITERAL.sub(r"\1", doc)
    return _ROLE.sub(lambda m: m.group(2).rpartition(".")[2] if m.group(1) else m.group(2), doc)


def keys_table(module: Any, columns: int) -> str:
    """The experiment's config keys, defaults and meanings as an aligned table whose meaning
    column is wrapped to fit ``columns`` characters (at least :data:`MEANING_WIDTH`); a key
    of the experiment's ``PACK_FIELDS``, which every member of a pack shares, is marked
    ``*`` (several values of it train one pack after another). Then the keys of a member's
    summary (the experiment's ``SUMMARY``), which a spec's ``metric`` names, and those of its
    reports (``METRICS``), which a scheduler's ``metric_step`` names."""
    from tabulate import tabulate

    docs = field_docs(module.Config)
    shared = set(module.PACK_FIELDS)
    rows = [(key + (" *" if key in shared else ""), repr(value),
             plain_text(docs.get(key, "")))
            for key, value in to_dict(module.Config()).items()]
    used = max(len(r[0]) for r in rows) + max(len(r[1]) for r in rows) + 4
    table = tabulate(rows, headers=("key", "default", "meaning"), tablefmt="simple",
                     maxcolwidths=[None, None, max(MEANING_WIDTH, columns - used)],
                     disable_numparse=True)
    def meanings(keys: dict[str, str], header: str) -> str:
        return tabulate(list(keys.items()), headers=(header, "meaning"), tablefmt="simple",
                        disable_numparse=True,
                        maxcolwidths=[None, max(MEANING_WIDTH, columns - max(map(len, keys)) - 2)])

    return (table + ("\n\n* shared by a pack: several values train one pack after another"
                     if shared else "")
            + "\n\nWhat a member's summary holds (a spec's metric names one of them):\n\n"
            + meanings(module.SUMMARY, "summary")
            + "\n\nWhat its reports hold at each evaluation (a spec's scheduler.metric_step "
            "names one of them):\n\n" + meanings(module.METRICS, "metric"))


def out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` is a failed allocation: Python's ``MemoryError``, torch's
    ``OutOfMemoryError`` (a GPU's), or the ``RuntimeError`` of torch's CPU allocator."""
    import torch

    return isinstance(err, (MemoryError, torch.OutOfMemoryError)) or (
        isinstance(err, RuntimeError) and "can't allocate memory" in str(err))


def memory_detail(err: BaseException) -> str:
    """How much the failed allocation asked for, where torch says it (``7,451 GiB asked``),
    else its exception's name."""
    asked = re.search(r"allocate (\d+) bytes", str(err)) or re.search(
        r"allocate ([\d.]+ [KMGT]iB)", str(err))
    if asked is None:
        return type(err).__name__
    text = asked.group(1)
    if not text.isdigit():
        return f"{text} asked"
    size, unit = float(text), "bytes"
    for larger in ("KiB", "MiB", "GiB", "TiB"):
        if size < 1024:
            break
        size, unit = size / 1024, larger
    return f"{size:,.3g} {unit} asked" if unit != "bytes" else f"{int(size)} bytes asked"


def run(args: argparse.Namespace) -> int:
    """Validate, train, and print progress and the summary; returns the exit status."""
    if args.keys:
        print(keys_table(experiments.get(args.experiment), shutil.get_terminal_size().columns))
        return 0
    module, configs, packs = build_packs(args.experiment, args.overrides)
    if len(packs) > 1:  # a later pack's missing file must not cost an earlier pack's work
        check_data(module, configs)
    keys = list(parse_overrides(args.overrides))
    started = time.monotonic()
    ended: dict[int, Result] = {}
    reached: dict[int, Report] = {}
    begun: set[int] = set()
    progress = None
    for number, pack in enumerate(packs, start=1):
        begun.update(pack)
        label = f"pack {number}/{len(packs)}" if len(packs) > 1 else None
        progress = ProgressPrinter(len(configs), desc=label, start=started,
                                   planned=max(module.planned_steps(configs[i]) for i in pack))

        def relay(report: Report, pack: list[int] = pack,
                  progress: ProgressPrinter = progress) -> None:
            progress(Report(pack[report.member], report.step, report.metrics))

        try:
            trained = train_isolated(module.train, [configs[i] for i in pack], relay)
        except (MemoryError, RuntimeError) as err:
            if not out_of_memory(err):
                raise
            raise OrthoError(f"out of memory ({memory_detail(err)}): the settings "
                             f"{' '.join(args.overrides) or '(the defaults)'} need more than "
                             "this machine has; smaller sizes (hidden, batch_size, seq_len, "
                             "the pack) need less") from None
        except KeyboardInterrupt:
            progress.close()
            print(reached_text(args.experiment, member_names(configs, keys),
                               reached | progress.reached, time.monotonic() - started,
                               ended, begun), file=sys.stderr, flush=True)
            raise  # the command line says "interrupted" and exits 130
        finally:
            progress.close()
        reached |= progress.reached
        ended |= dict(zip(pack, trained, strict=True))
    results = [ended[i] for i in range(len(configs))]
    assert progress is not None  # a pack at least
    progress.ended(results)  # every pack's printer counts from the first pack's start
    seconds = time.monotonic() - started
    if args.json:
        doc = [{"name": n, "config": to_dict(c), "outcome": r.outcome.value,
                "summary": r.summary} | ({"error": r.error} if r.error is not None else {})
               for n, c, r in zip(member_names(configs, keys), configs, results, strict=True)]
        json.dump(doc, sys.stdout, indent=2)
        print()
    else:
        print(summary_text(args.experiment, configs, results, seconds, keys))
    failed = [str(i) for i, r in enumerate(results) if r.outcome is Outcome.FAILED]
    if failed:
        print(f"ortho train: {len(failed)} of {len(results)} configuration(s) failed "
              f"(member {', '.join(failed)}; their errors are in the output above)",
              file=sys.stderr)
    return 1 if failed else 0
