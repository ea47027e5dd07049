"""``ortho train EXPERIMENT [--set key=value ...] [--json]``: one configuration or one pack,
trained in this process without Ray or MLflow.

A ``--set`` value with commas makes a pack: ``--set lr=0.1,0.01 --set variant=open,oinit``
trains the four combinations together (DESIGN.md "Packs"). Progress goes to stderr while
training (a live counter on a terminal, a line every few seconds elsewhere); the summary
(or, with ``--json``, a JSON document) goes to stdout. ``--keys`` prints the experiment's
config keys as a table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ortho_core import experiments
from ortho_core.config import check_pack, field_docs, from_dict, to_dict
from ortho_core.errors import ConfigError
from ortho_core.reporting import Report, Result

if TYPE_CHECKING:
    from tqdm import tqdm

PROGRESS_KEYS = ("seq_len", "train_loss", "val_error", "test_accuracy", "spectral_radius",
                 "grad_norm")
"""Metrics shown on a progress line when the experiment reports any of them; otherwise the
first ``PROGRESS_WIDTH`` metrics of the report are shown."""
PROGRESS_WIDTH = 6
LINE_INTERVAL = 10.0
"""Seconds between progress lines where stderr is no terminal (CI logs, pipes)."""
MEANING_WIDTH = 40
"""Narrowest the meaning column of ``--keys`` is wrapped to (wider on a wide terminal)."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ortho train`` to the ``ortho`` parser."""
    p = sub.add_parser("train", help="train one configuration or pack in this process",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("experiment", help="one of: " + ", ".join(experiments.EXPERIMENTS))
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="set a config key; comma-separated values make a pack")
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    p.add_argument("--keys", action="store_true",
                   help="list the experiment's config keys with defaults and meaning, then exit")
    p.set_defaults(func=run)


def parse_overrides(pairs: Sequence[str]) -> dict[str, list[str]]:
    """``["lr=0.1,0.01", "task=adding"]`` -> ``{"lr": ["0.1", "0.01"], "task": ["adding"]}``."""
    out: dict[str, list[str]] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError("--set", "KEY=VALUE", pair)
        values = [v.strip() for v in value.split(",")]
        if any(v == "" for v in values):
            raise ConfigError(key.strip(), "a non-empty value (or comma-separated values)", value)
        out[key.strip()] = values
    return out


def build_pack(experiment: str, pairs: Sequence[str]) -> tuple[Any, list[Any]]:
    """The experiment module and its validated pack (the cartesian product of ``--set`` lists)."""
    module = experiments.get(experiment)
    overrides = parse_overrides(pairs)
    keys = list(overrides)
    configs = [from_dict(module.Config, dict(zip(keys, combo, strict=True)))
               for combo in itertools.product(*overrides.values())]
    check_pack(configs, module.PACK_FIELDS)
    return module, configs


class ProgressPrinter:
    """A reporter that shows the latest report on ``stream`` (default stderr): a ``tqdm``
    counter of steps with the report's metrics on a terminal (``tqdm`` decides, as with its
    ``disable=None``), else one plain line at most every ``interval`` seconds (the first
    report at once), so that logs stay short. :meth:`close` takes the counter away."""

    def __init__(self, n_members: int, stream: TextIO | None = None,
                 interval: float = LINE_INTERVAL) -> None:
        from tqdm import tqdm

        self.n_members = n_members
        self.stream = stream or sys.stderr
        self.interval = interval
        self.start = time.monotonic()
        self._last = -float("inf")
        bar = tqdm(unit="step", file=self.stream, dynamic_ncols=True, leave=False,
                   miniters=0, disable=None)
        self.bar: tqdm | None = None if bar.disable else bar
        """The counter on a terminal; None where lines are printed instead."""

    def _shown(self, report: Report) -> str:
        keys = [k for k in PROGRESS_KEYS if k in report.metrics]
        keys = keys or list(report.metrics)[:PROGRESS_WIDTH]
        shown = " ".join(f"{k}={report.metrics[k]:.4g}" for k in keys)
        who = f"member {report.member}/{self.n_members} " if self.n_members > 1 else ""
        return who + shown

    def __call__(self, report: Report) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(self._shown(report), refresh=False)
            self.bar.update(max(0, report.step - self.bar.n))
            return
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        self._last = now
        print(f"[{now - self.start:7.1f}s] step {report.step} {self._shown(report)}",
              file=self.stream, flush=True)

    def close(self) -> None:
        """End the counter (nothing to do for lines)."""
        if self.bar is not None:
            self.bar.close()


def _varying(configs: Sequence[Any]) -> list[str]:
    """Config keys whose values differ across the pack (shown in the summary)."""
    rows = [to_dict(c) for c in configs]
    return [k for k in rows[0] if any(r[k] != rows[0][k] for r in rows[1:])]


def summary_text(experiment: str, configs: Sequence[Any], results: Sequence[Result],
                 seconds: float) -> str:
    """A human summary: one block per member with its distinguishing keys and results."""
    varying = _varying(configs)
    lines = [f"ortho train {experiment}: {len(configs)} configuration(s) in {seconds:.1f} s"]
    for i, (cfg, res) in enumerate(zip(configs, results, strict=True)):
        label = ", ".join(f"{k}={getattr(cfg, k)}" for k in varying) or "configuration"
        lines.append(f"  [{i}] {label}: {res.outcome.value}")
        lines.extend(f"      {k} = {v:.6g}" if isinstance(v, float) else f"      {k} = {v}"
                     for k, v in res.summary.items())
    return "\n".join(lines)


def keys_table(module: Any, columns: int) -> str:
    """The experiment's config keys, defaults and meanings as an aligned table whose meaning
    column is wrapped to fit ``columns`` characters (at least :data:`MEANING_WIDTH`)."""
    from tabulate import tabulate

    docs = field_docs(module.Config)
    rows = [(key, repr(value), " ".join(docs.get(key, "").split()))
            for key, value in to_dict(module.Config()).items()]
    used = max(len(r[0]) for r in rows) + max(len(r[1]) for r in rows) + 4
    return tabulate(rows, headers=("key", "default", "meaning"), tablefmt="simple",
                    maxcolwidths=[None, None, max(MEANING_WIDTH, columns - used)],
                    disable_numparse=True)


def run(args: argparse.Namespace) -> int:
    """Validate, train, and print progress and the summary; returns the exit status."""
    if args.keys:
        print(keys_table(experiments.get(args.experiment), shutil.get_terminal_size().columns))
        return 0
    module, configs = build_pack(args.experiment, args.overrides)
    started = time.monotonic()
    progress = ProgressPrinter(len(configs))
    try:
        results = module.train(configs, progress)
    finally:
        progress.close()
    seconds = time.monotonic() - started
    if args.json:
        doc = [{"config": to_dict(c), "outcome": r.outcome.value, "summary": r.summary}
               for c, r in zip(configs, results, strict=True)]
        json.dump(doc, sys.stdout, indent=2)
        print()
    else:
        print(summary_text(args.experiment, configs, results, seconds))
    return 0
