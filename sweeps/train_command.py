"""``ortho train EXPERIMENT [--set key=value ...] [--json]``: one configuration or one pack,
trained in this process without Ray or MLflow.

A ``--set`` value with commas makes a pack: ``--set lr=0.1,0.01 --set variant=open,oinit``
trains the four combinations together (DESIGN.md "Packs"). Progress goes to stderr while
training; the summary (or, with ``--json``, a JSON document) goes to stdout.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from ortho_core import experiments
from ortho_core.config import check_pack, field_docs, from_dict, to_dict
from ortho_core.errors import ConfigError
from ortho_core.reporting import Report, Result

PROGRESS_KEYS = ("seq_len", "train_loss", "val_error", "test_accuracy", "spectral_radius",
                 "grad_norm")
"""Metrics shown on a progress line when the experiment reports any of them; otherwise the
first ``PROGRESS_WIDTH`` metrics of the report are shown."""
PROGRESS_WIDTH = 6


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
    """A reporter that prints at most one line every ``interval`` seconds, to ``stream``."""

    def __init__(self, n_members: int, stream: TextIO = sys.stderr, interval: float = 1.0):
        self.n_members = n_members
        self.stream = stream
        self.interval = interval
        self.start = time.monotonic()
        self._last = -float("inf")

    def __call__(self, report: Report) -> None:
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        self._last = now
        keys = [k for k in PROGRESS_KEYS if k in report.metrics]
        keys = keys or list(report.metrics)[:PROGRESS_WIDTH]
        shown = " ".join(f"{k}={report.metrics[k]:.4g}" for k in keys)
        who = f"member {report.member}/{self.n_members} " if self.n_members > 1 else ""
        print(f"[{now - self.start:7.1f}s] {who}step {report.step} {shown}",
              file=self.stream, flush=True)


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


def run(args: argparse.Namespace) -> int:
    """Validate, train, and print progress and the summary; returns the exit status."""
    if args.keys:
        module = experiments.get(args.experiment)
        docs = field_docs(module.Config)
        for key, value in to_dict(module.Config()).items():
            print(f"{key} = {value!r}\n    {docs.get(key, '')}")
        return 0
    module, configs = build_pack(args.experiment, args.overrides)
    started = time.monotonic()
    results = module.train(configs, ProgressPrinter(len(configs)))
    seconds = time.monotonic() - started
    if args.json:
        doc = [{"config": to_dict(c), "outcome": r.outcome.value, "summary": r.summary}
               for c, r in zip(configs, results, strict=True)]
        json.dump(doc, sys.stdout, indent=2)
        print()
    else:
        print(summary_text(args.experiment, configs, results, seconds))
    return 0
