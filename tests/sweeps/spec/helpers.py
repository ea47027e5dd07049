"""Spec texts and helpers the spec tests share: a small spec with three groups (BASE) and
its Optuna variant (OPTUNA)."""

from __future__ import annotations

from pathlib import Path

from ortho_core import experiments
from ortho_core.config import from_dict
from sweeps.spec import load_spec, resolve

BASE = """\
name: t
experiment: synthetic
description: a test spec
metric: {name: max_seq_len_solved, mode: max}
fixed:
  hidden: 8
  max_iters: 10
space:
  task: [temporal_order, adding]
  lr: {log_range: [1.0e-3, 1.0e-1], num: 3}
groups:
  - fixed: {variant: plain}
  - fixed: {variant: open}
    space: {penalty: [1.0, 0.1]}
  - fixed: {variant: oinit, pretrain_lr: 0.1}
repeats: 1
seed: 0
profiles:
  smoke: {fixed: {task: adding}, repeats: 2}
  cpu: {space: {lr: [0.01]}, pack_size: 4}
  paper: {}
"""
"""A synthetic spec with two grid dimensions and three groups (one sweeps ``penalty``); the
tests point at its line numbers, so edit it together with them."""

OPTUNA = BASE.replace("  lr: {log_range: [1.0e-3, 1.0e-1], num: 3}",
                      "  lr: {low: 1.0e-4, high: 0.1, log: true}\n"
                      "  hidden: {low: 4, high: 16, int: true}\n"
                      "  init: {choice: [normalised, gaussian]}"
                      ).replace("  hidden: 8\n", "").replace(
                          "metric:", "search: {kind: optuna, n_trials: 5, seed: 3}\nmetric:")
"""BASE as an Optuna search: ``lr``, ``hidden`` and ``init`` are Optuna dimensions."""


def write(tmp_path: Path, text: str, name: str = "t") -> str:
    """Write ``text`` as ``<name>.yaml`` under ``tmp_path``; its path."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def cells_of(tmp_path: Path, text: str, profile: str = "paper") -> list:
    """The cells of the spec ``text`` with ``profile`` applied."""
    return resolve(load_spec(write(tmp_path, text)), profile).cells()


def config_of(experiment: str, params: dict) -> object:
    """The trainer's ``Config`` of one cell's params."""
    return from_dict(experiments.get(experiment).Config, params)
