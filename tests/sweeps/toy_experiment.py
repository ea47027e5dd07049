"""A trainer for the sweep tests: instant, deterministic, and able to fail or dawdle on demand.

Registered into ``ortho_core.experiments.EXPERIMENTS`` as ``toy`` by the tests (Ray's
workers import it by module path). Each member reports ``loss = x / (step + 1)`` and
``value = x`` at steps 0..steps-1 and ends with summary ``score = 10 x``, ``loss`` (its last
report's) and ``threads`` (``torch.get_num_threads()`` while it trained); ``x > 0.5`` is
solved. Every call of :func:`train` appends one line per member to
``<counter_dir>/<key>.count`` so that tests can count how often a configuration was trained.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ortho_core.config import check_pack, non_negative
from ortho_core.reporting import Outcome, Report, Reporter, Result

PACK_FIELDS = ("device", "steps")


@dataclass
class Config:
    """A toy configuration."""

    x: float = 0.0
    """The value the member's metrics are made of."""
    steps: int = 3
    """Reports per member."""
    sleep: float = 0.0
    """Seconds to sleep after each step (lets a test interrupt a sweep midway)."""
    fail: int = 0
    """Raise in the first ``fail`` attempts at this configuration (counted in counter_dir)."""
    die: bool = False
    """End the trial's process at once (``os._exit``) when training starts, as a lost node
    would: nothing ends the member's run."""
    exit: bool = False
    """Raise ``SystemExit(0)`` when training starts, in every attempt, as a library calling
    ``sys.exit(0)`` would."""
    counter_dir: str = ""
    """Directory of the per-configuration training counters ("" = no counting)."""
    seed: int = 0
    """Seed (only part of the key here)."""
    data_seed: int = 0
    """Data seed (only part of the key here)."""
    device: str = "cpu"
    """Where it would train."""

    def __post_init__(self) -> None:
        non_negative(self.sleep, "sleep")


def counter_file(cfg: Config) -> Path:
    """The counter of ``cfg``: named after x and seed."""
    return Path(cfg.counter_dir) / f"x={cfg.x:g}-seed={cfg.seed}.count"


def attempts(cfg: Config) -> int:
    """How often ``cfg`` has been trained so far."""
    path = counter_file(cfg)
    return len(path.read_text().splitlines()) if path.exists() else 0


def probe_config(config: Config) -> Config:
    """A ``pack_size: auto`` probe trains the configuration as it is (:mod:`sweeps.pack_size`)."""
    return config


def planned_steps(config: Config) -> int:
    """The step of a member's last report: ``steps - 1``."""
    return config.steps - 1


METRICS: dict[str, str] = {"loss": "x / (step + 1)", "value": "x"}
"""The keys of a report's metrics."""

SUMMARY: dict[str, str] = {"score": "10 x", "loss": "x / steps, the last report's",
                           "threads": "torch's threads while it trained"}
"""The keys of a member's summary."""


def train(configs: Sequence[Config], reporter: Reporter) -> list[Result]:
    """Train the toy pack (see the module docstring)."""
    check_pack(configs, PACK_FIELDS)
    for cfg in configs:
        if cfg.counter_dir:
            with counter_file(cfg).open("a") as f:
                f.write(f"{os.getpid()}\n")
    for cfg in configs:
        if cfg.counter_dir and attempts(cfg) <= cfg.fail:
            raise RuntimeError(f"toy failure of x={cfg.x} (attempt {attempts(cfg)})")
    if any(c.exit for c in configs):
        raise SystemExit(0)
    if any(c.die for c in configs):
        os._exit(1)
    for step in range(configs[0].steps):
        for i, cfg in enumerate(configs):
            reporter(Report(member=i, step=step, metrics={"loss": cfg.x / (step + 1),
                                                          "value": cfg.x}))
        time.sleep(max(c.sleep for c in configs))
    threads = torch.get_num_threads()
    return [Result(Outcome.SOLVED if c.x > 0.5 else Outcome.UNSOLVED,
                   summary={"score": 10 * c.x, "loss": c.x / c.steps, "threads": threads})
            for c in configs]
