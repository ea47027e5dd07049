"""Reports: the :class:`Report` a spec's report module builds, and the steps around it (find
the module, open the store, load the sweep, write the files).

A report module (``analysis.reports.*``) adds a spec by a line in
:data:`analysis.reports.REPORTS`: ``"spec": "module:function"``, where ``function(runs,
histories) -> Report`` gets the loaded sweep and, when figures are wanted, a
:class:`~analysis.load.Histories` for metric histories (None otherwise, so that a
terminal-only report reads no history at all). Builders are imported lazily, like the
trainers in ``ortho_core.experiments``. The report's claims (:mod:`analysis.claims`) are
computed from the same runs; :mod:`analysis.html` renders it all as one page.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from analysis.cache import RunCache
from analysis.caveats import caveats, profile_caveat
from analysis.claims import NOT_MEASURED, Claim, claims_markdown, explain
from analysis.expected import expected_configurations
from analysis.figures import Figure
from analysis.load import Histories, SweepRuns, load_sweep, no_runs
from analysis.reports import GENERIC, REPORTS
from analysis.store import cache_dir, open_store, resolve_tracking_uri
from analysis.tables import SUFFIX, Format, Provenance, Table
from sweeps.contract import TRIALS, is_optuna_cell


@dataclass
class Report:
    """What ``ortho report SPEC`` prints and writes."""

    runs: SweepRuns
    """The sweep the report was built from."""
    tables: list[Table]
    """Tables, in print order."""
    figures: list[Figure] = field(default_factory=list)
    """Figures (empty when built without histories)."""
    claims: list[Claim] = field(default_factory=list)
    """The papers' claims this sweep can be held to, each with its verdict
    (:mod:`analysis.claims`), in print order."""

    def render(self, fmt: Format = "md") -> str:
        """Every table in ``fmt``, separated by blank lines; in markdown, the verdict lines
        after them."""
        tables = "\n".join(table.render(fmt) for table in self.tables)
        if fmt != "md" or not self.claims:
            return tables
        return tables + "\n" + claims_markdown(self.claims)

    def write(self, out_dir: str | Path, fmt: Format = "md") -> list[Path]:
        """Write each table as ``<name>.<suffix>``, each figure with data as ``<name>.png``
        and the verdict lines as ``<spec>-verdicts.md`` (in any format: they are sentences;
        named by the spec, as the tables are by theirs, so that the reports of several specs
        share a folder) under ``out_dir``; returns the paths written."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for table in self.tables:
            path = out / f"{table.name}{SUFFIX[fmt]}"
            path.write_text(table.render(fmt), encoding="utf-8")
            written.append(path)
        written += [figure.save(out) for figure in self.figures if not figure.empty]
        if self.claims:
            path = out / f"{self.runs.sweep.spec}-verdicts.md"
            path.write_text(claims_markdown(self.claims), encoding="utf-8")
            written.append(path)
        return written


Builder = Callable[[SweepRuns, Histories | None], Report]


def builder(spec: str) -> Builder:
    """The report builder of ``spec``: its own (:data:`~analysis.reports.REPORTS`), else the
    generic one that ranks its configurations (:mod:`analysis.reports.generic`)."""
    module, _, name = REPORTS.get(spec, GENERIC).partition(":")
    return getattr(importlib.import_module(module), name)


def expected(runs: SweepRuns) -> pd.DataFrame | None:
    """The configurations the sweep's resolved spec defines (None when the parent run holds
    no ``expected_cells.json``: a sweep tracked before it was written)."""
    return None if runs.expected_cells is None else expected_configurations(runs.expected_cells)


SAMPLER_NAMES = {"tpe": "TPE", "random": "random sampling", "cmaes": "CMA-ES",
                 "grid": "grid sampler"}
"""How a report names the Optuna sampler of a sweep's studies (tag ``ortho.optuna_sampler``)."""


def search(runs: SweepRuns) -> str:
    """How Optuna chose the sweep's configurations, ``Optuna TPE, 6 trials in each of 2 cells``
    (the trials from the cells the spec defines, when known); empty for a grid sweep."""
    sweep = runs.sweep
    if not sweep.optuna_storage:
        return ""
    sampler = sweep.optuna_sampler
    text = "Optuna" + (f" {SAMPLER_NAMES.get(sampler, sampler)}" if sampler else "")
    cells = runs.expected_cells or []
    if not cells:
        return text
    searched = [int(c[TRIALS]) for c in cells if is_optuna_cell(c)]
    if not searched:  # cells of one trial tracked before they named their searched keys
        return f"{text}, 1 trial a cell"
    n, grid = max(searched), len(cells) - len(searched)
    return (f"{text}, {n} trial{'' if n == 1 else 's'} in "
            + ("its cell" if len(searched) == 1 else f"each of {len(searched)} cells")
            + (f" (and {grid} grid cell{'' if grid == 1 else 's'})" if grid else ""))


def provenance(runs: SweepRuns) -> Provenance:
    """The provenance line of a table drawn from ``runs`` (configurations expected: the
    parent run's ``ortho.n_configs``, else the resolved spec's count)."""
    n_expected = runs.sweep.n_configs
    spec = expected(runs)
    if n_expected is None and spec is not None:
        n_expected = int(spec["trials"].sum())
    return Provenance(spec=runs.sweep.spec, profile=runs.sweep.profile,
                      sweep_id=runs.sweep.sweep_id, n_runs=runs.n_runs,
                      n_configurations=len(runs.runs), outcomes=runs.outcomes,
                      n_expected=n_expected, repeats=runs.sweep.repeats, search=search(runs),
                      git_sha=runs.sweep.git_sha, git_dirty=runs.sweep.git_dirty)


def claims_not_run(spec: str, profile: str, why: str) -> list[Claim]:
    """The claims ``spec``'s report states, each not measured because ``why``: those of a
    spec that a reproduction left out, so that its paper's page still lists and counts them."""
    report = builder(spec)(no_runs(spec, profile), None)
    return [replace(c, status=NOT_MEASURED, evidence=why) for c in report.claims]


def build_report(spec: str, sweep_id: str | None = None, tracking_uri: str | None = None,
                 home: str | Path | None = None, figures: bool = False,
                 use_cache: bool = True) -> Report:
    """Load sweep ``sweep_id`` of ``spec`` (default: the latest) from the store and build its
    report; ``figures`` also draws its figures' data (reading metric histories).

    Raises ``ConfigError`` for a missing store (``tracking_uri``), a spec without sweeps in
    the store (``spec``) or an unknown sweep (``sweep``), each listing what exists.
    """
    build = builder(spec)
    uri = resolve_tracking_uri(tracking_uri, home)
    client = open_store(uri)
    cache = RunCache(cache_dir(uri, home)) if use_cache else None
    runs = load_sweep(client, spec, sweep_id, cache=cache, tracking_uri=uri)
    report = build(runs, Histories(client, runs, cache) if figures else None)
    report.claims = explain(report.claims, caveats(runs.sweep.spec, runs.sweep.profile),
                            profile_caveat(runs.sweep.profile))
    return report
