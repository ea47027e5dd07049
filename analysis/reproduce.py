"""``ortho reproduce PAPER``: run every spec of a paper and write one HTML page of its report.

For each spec of the paper (:mod:`analysis.papers`) in the paper's order, with the profile:

- the latest sweep of that spec and profile in the store FINISHED with no failed
  configuration: reused, nothing started (``already finished: sweep ID``);
- the latest one interrupted (its parent run RUNNING or KILLED) or finished with failed
  configurations: ``ortho sweep resume ID`` (which refuses a sweep whose driver still runs);
- none, or the latest one ran a different spec (its ``ortho.spec_sha256`` is not the hash of
  the spec as the code resolves it now: the profile was resized, a default changed):
  ``ortho sweep run SPEC --profile P``, a new sweep (the old one stays in the store).

Sweeps run as child processes (``python -m sweeps.cli``), since ``analysis`` does not import
``sweeps``: their output goes straight to this terminal (the live progress), and Ctrl-C is
passed to the running child, whose sweep then stops resumable; the same command resumes it.
Before any child starts, one child (:mod:`sweeps.ready`) resolves every spec (its hash
decides whether a sweep in the store is still the spec's) and checks the data of the specs
left to run: a missing dataset stops everything with exit status 2, naming each spec, the
dataset, the file and the command that fetches it, unless ``--skip-missing-data`` leaves
those specs out (the page and the last line say which, and how to add them). A tracking URI
that holds a password reaches the children in their environment (``ORTHO_TRACKING_URI``),
never their command lines, which every user of the machine can read; any other, as
``--tracking-uri``, so that what a child prints to run later names it.

Then every spec's :class:`~analysis.report.Report` is built and the page written to
``<out>/<paper>.html`` (:mod:`analysis.html`): the paper's title, the count of verdicts that
hold, do not hold and were not measured, one section per spec, and the provenance of the
reproduction (profile, sweeps, machine, wall time). ``all`` writes every paper's page and
``<out>/index.html``. Exit status: 0; 1 when a sweep failed (the page is written from what
finished, and the last line names the spec); 2 for bad input or missing data, before any
work; 130 when interrupted.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from analysis.papers import ALL, DEFAULT_OUT, PAPERS, Paper
from analysis.store import open_store, resolve_tracking_uri
from ortho_core.errors import ConfigError, DataError, OrthoError
from sweeps import contract

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from analysis.claims import Claim
    from analysis.load import Sweep
    from analysis.report import Report

Action = Literal["reuse", "resume", "run"]


@dataclass
class Where:
    """The store and cluster the sweeps use (``--address``, ``--tracking-uri``, ``--home``)."""

    address: str | None = None
    tracking_uri: str | None = None
    home: str | None = None

    def uri(self) -> str:
        """The absolute tracking URI, as ``ortho sweep run`` resolves it."""
        return resolve_tracking_uri(self.tracking_uri, self.home)

    def child_argv(self, *args: str) -> list[str]:
        """``python -m MODULE ARGS`` with ``--address`` appended, and for a sweep command
        ``--home`` and a ``--tracking-uri`` that holds no password (one that does reaches
        the child in its environment, :meth:`child_env`, off the process table); the
        commands a sweep prints for later (``resume with: ...``) name the store either way
        (:func:`sweeps.contract.store_options`)."""
        argv = [sys.executable, "-m", *args]
        if self.address:
            argv += ["--address", self.address]
        if args[0] != "sweeps.cli":
            return argv
        if self.tracking_uri and contract.redact(self.uri()) == self.uri():
            argv += ["--tracking-uri", self.uri()]
        return argv + (["--home", self.home] if self.home else [])

    def options(self) -> list[str]:
        """``--address`` and the store's options (:func:`sweeps.contract.store_options`) that
        name this cluster and store again from this folder."""
        return ([] if not self.address else ["--address", self.address]) + \
            contract.store_options(contract.home_dir(self.home), self.uri())

    def child_env(self) -> dict[str, str]:
        """This environment, with a tracking URI that holds a password added (kept off the
        command line, where other users of the machine could read it)."""
        env = dict(os.environ)
        if self.tracking_uri and contract.redact(self.uri()) != self.uri():
            env["ORTHO_TRACKING_URI"] = self.uri()
        return env


@dataclass
class Step:
    """What happens to one spec."""

    spec: str
    action: Action
    sweep_id: str | None = None
    """The sweep reused or resumed; after a run, the new one (None until known)."""
    exit_status: int = 0
    """The child's exit status (0 when reused)."""
    missing: str | None = None
    """Why the spec was left out: its missing dataset (``--skip-missing-data``)."""
    outdated: str | None = None
    """For a run: the latest sweep of the spec and profile, which ran a different spec."""


@dataclass
class Outcome:
    """A paper's reproduction: its steps and what the page says."""

    paper: Paper
    steps: list[Step]
    verdicts: Counter[str] = field(default_factory=Counter)
    """Claims per status (``holds``, ``does not hold``, ``not measured``) and the failures the
    report explains (``explained``: a caveat gives the reason)."""
    page: Path | None = None
    not_holding: list[str] = field(default_factory=list)
    """The claims that do not hold (``G-T41``), in page order, each with ``*`` when the page
    explains why (:func:`not_holding`)."""

    @property
    def failed(self) -> list[Step]:
        """Steps whose sweep did not end cleanly (or whose report could not be built)."""
        return [s for s in self.steps if s.exit_status not in (0, 130)]


def latest_sweep(client: MlflowClient, spec: str, profile: str) -> Sweep | None:
    """The newest sweep of ``spec`` with ``profile`` in the store, None when there is none."""
    from analysis.load import list_sweeps

    try:
        sweeps = list_sweeps(client, spec)
    except ConfigError:
        return None
    return next((s for s in sweeps if s.profile == profile), None)


def has_failures(client: MlflowClient, sweep: Sweep) -> bool:
    """Whether a configuration run of ``sweep`` ended FAILED."""
    query = (f"tags.`{contract.SWEEP_ID}` = '{sweep.sweep_id}' and "
             f"tags.`{contract.ROLE}` = '{contract.ROLE_CONFIGURATION}' and "
             "attributes.status = 'FAILED'")
    return bool(client.search_runs([sweep.experiment_id], query, max_results=1))


def plan(paper: Paper, profile: str, where: Where, hashes: dict[str, str]) -> list[Step]:
    """Each spec's step, from what the store holds (an embedded store not created yet holds
    nothing) and ``hashes``, spec -> SHA-256 of the spec as resolved now."""
    uri = where.uri()
    if not _store_exists(uri):
        return [Step(spec, "run") for spec in paper.specs]
    client = open_store(uri)
    steps = []
    for spec in paper.specs:
        sweep = latest_sweep(client, spec, profile)
        if sweep is None:
            steps.append(Step(spec, "run"))
        elif sweep.spec_sha256 != hashes[spec]:
            steps.append(Step(spec, "run", outdated=sweep.sweep_id))
        elif sweep.status == "FINISHED" and not has_failures(client, sweep):
            steps.append(Step(spec, "reuse", sweep.sweep_id))
        else:
            steps.append(Step(spec, "resume", sweep.sweep_id))
    return steps


def readiness(specs: Sequence[str], profile: str, where: Where) -> dict[str, dict]:
    """Spec -> its readiness (:mod:`sweeps.ready`: its hash, datasets, missing files);
    ``ConfigError`` naming ``address`` when the child refuses the address, else naming
    ``spec`` with the child's message when it refuses the specs or the profile, before any
    sweep starts."""
    argv = where.child_argv("sweeps.ready", "--profile", profile, *specs)
    done = subprocess.run(argv, env=where.child_env(), capture_output=True, text=True)
    if done.returncode != 0:
        if done.returncode == 2 and done.stdout.startswith('{"address"'):
            refused = json.loads(done.stdout)["address"]
            raise ConfigError("address", refused["expected"], refused["value"])
        raise ConfigError("spec", "specs that resolve with the profile",
                          done.stderr.strip() or f"exit status {done.returncode}")
    entries = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return {entry["spec"]: entry for entry in entries}


def _datasets(entry: dict) -> str:
    return ", ".join(entry["datasets"]) or "a dataset"


def _fetch(entries: Sequence[dict]) -> list[str]:
    """The commands that fetch the datasets of ``entries``, each once."""
    return sorted({cmd for e in entries for cmd in e["datasets"].values() if cmd})


def missing_data_error(again: str, entries: Sequence[dict], others: bool) -> DataError:
    """The error that stops a reproduction whose specs lack data (field: the first missing
    file), after each spec's own message on stderr: the datasets and what to do. ``others``:
    whether specs that have their data would run (then ``--skip-missing-data`` is offered)."""
    for e in entries:
        print(f"{e['spec']} needs {_datasets(e)}: {e['missing']}", file=sys.stderr)
    fetch = _fetch(entries)
    by_hand = sorted({name for e in entries for name, cmd in e["datasets"].items()
                      if cmd is None})
    todo = (f"; fetch them with `{' && '.join(fetch)}`" if fetch else "") + (
        f"; put the files of {', '.join(by_hand)} where the lines above say (`ortho data` "
        "cannot fetch them)" if by_hand else "") + (
        f", or run the other specs now with `{again} --skip-missing-data`" if others else "")
    return DataError(entries[0]["file"], "the datasets of " + ", ".join(
        f"{e['spec']} ({_datasets(e)})" for e in entries) + todo)


def run_child(argv: list[str], env: dict[str, str]) -> int:
    """Run a sweep's child process in its own process group with this terminal's output,
    passing each Ctrl-C (SIGINT) on to it once, and a SIGTERM to this process on to it as a
    Ctrl-C (its sweep then ends interrupted, to be resumed, instead of running on without
    this process); its exit status."""
    child = subprocess.Popen(argv, env=env, process_group=0)
    previous = signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGINT))
    try:
        while True:
            try:
                return child.wait()
            except KeyboardInterrupt:
                child.send_signal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGTERM, previous)


def execute(step: Step, profile: str, where: Where, number: str) -> None:
    """Reuse, resume or run ``step``'s sweep; its exit status and sweep id are set."""
    if step.action == "reuse":
        print(f"{number} {step.spec}: already finished: sweep {step.sweep_id}", flush=True)
        return
    if step.action == "resume":
        args = ["sweeps.cli", "sweep", "resume", str(step.sweep_id)]
        print(f"{number} {step.spec}: resuming sweep {step.sweep_id}", flush=True)
    else:
        args = ["sweeps.cli", "sweep", "run", step.spec, "--profile", profile]
        anew = (f" anew: the spec changed since sweep {step.outdated}" if step.outdated
                else "")
        print(f"{number} {step.spec}: running its {profile} profile{anew}", flush=True)
    step.exit_status = run_child(where.child_argv(*args), where.child_env())
    if step.action == "run" and step.exit_status != 2 and _store_exists(where.uri()):
        sweep = latest_sweep(open_store(where.uri()), step.spec, profile)
        step.sweep_id = None if sweep is None else sweep.sweep_id


def _store_exists(uri: str) -> bool:
    """False for an embedded store not created yet (a sweep interrupted before it made its
    store); any other store is opened, and its errors raised, by the caller."""
    path = contract.sqlite_path(uri)
    return path is None or path.is_file()


def reports(steps: Sequence[Step], where: Where) -> list[tuple[Step, Report | str]]:
    """Each step's report, or the reason there is none."""
    from analysis.report import build_report

    built: list[tuple[Step, Report | str]] = []
    for step in steps:
        if step.missing is not None:
            built.append((step, f"not run here: {step.missing}"))
        elif step.sweep_id is None:
            built.append((step, f"no sweep: the run exited with status {step.exit_status} "
                                "before it started one"))
        else:
            try:
                built.append((step, build_report(step.spec, step.sweep_id, where.tracking_uri,
                                                 where.home, figures=True)))
            except OrthoError as err:
                step.exit_status = step.exit_status or 1
                built.append((step, f"no report: {contract.redact(str(err))}"))
    return built


def summary(counts: Counter[str]) -> str:
    """``3 hold, 1 do not (1 explained), 2 not measured``."""
    explained = (f" ({counts['explained']} explained)"
                 if counts["explained"] else "")
    return (f"{counts['holds']} hold, {counts['does not hold']} do not{explained}, "
            f"{counts['not measured']} not measured")


def not_holding(claims: Sequence[Claim]) -> list[str]:
    """The ids of the claims that do not hold, ``*`` after those whose page says why, each
    once in page order with ``×n`` after an id that n of them share (a table's claims carry
    the table's id: ``M-T2* ×2``, not ``M-T2*, M-T2*``)."""
    from analysis.claims import FAILS

    counts = Counter(c.source + ("*" if c.caveat else "") for c in claims if c.status == FAILS)
    return [f"{label} ×{n}" if n > 1 else label for label, n in counts.items()]


def result_lines(outcome: Outcome, page: Path) -> list[str]:
    """What ``ortho reproduce`` prints of a paper: its verdicts counted and where its page
    is, then which claims do not hold, so that the terminal names them without the page."""
    lines = [f"{outcome.paper.key}: {summary(outcome.verdicts)}; wrote {page}"]
    if outcome.not_holding:
        explained = any("*" in c for c in outcome.not_holding)
        lines.append(f"  do not hold: {', '.join(outcome.not_holding)}"
                     + (" (*: the page says why)" if explained else ""))
    return lines


def write_page(outcome: Outcome, profile: str, where: Where, out: Path,
               seconds: float, ui: str | None = None) -> Path:
    """Build the reports of ``outcome``'s steps and write ``<out>/<paper>.html``, its run
    links to the MLflow UI at ``ui`` (default: :func:`analysis.mlflow_ui.ui_for` the store)."""
    from analysis.html import claims_html, prose, render_page, render_section
    from analysis.report import claims_not_run

    sections = []
    for step, report in reports(outcome.steps, where):
        if isinstance(report, str):
            claims = claims_not_run(step.spec, profile, "its spec did not run here"
                                    if step.missing else "no report of its sweep here")
            outcome.verdicts.update(c.status for c in claims)
            sections.append(f'<section id="{escape(step.spec)}"><h2>{escape(step.spec)}</h2>'
                            f'<p class="notes">{prose(report)}</p>{claims_html(claims)}'
                            "</section>")
            continue
        outcome.verdicts.update(c.status for c in report.claims)
        outcome.verdicts.update("explained" for c in report.claims if c.caveat)
        outcome.not_holding += not_holding(report.claims)
        sections.append(render_section(report, ui))
    sweeps = "; ".join(f"{s.spec}: " + (f"sweep {s.sweep_id} ({s.action})" if s.sweep_id
                                        else "not run") for s in outcome.steps)
    provenance = {"paper": outcome.paper.title, "profile": profile,
                  "verdicts": summary(outcome.verdicts), "sweeps": sweeps,
                  "store": contract.redact(where.uri()),
                  "built": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                  "machine": f"{platform.node()} ({os.cpu_count()} CPUs, {platform.system()})",
                  "wall time": f"{seconds:.0f} s for this `ortho reproduce`"}
    out.mkdir(parents=True, exist_ok=True)
    page = out / f"{outcome.paper.key}.html"
    title = f"{outcome.paper.title} — reproduced, profile {profile}"
    page.write_text(render_page(title, sections, provenance), encoding="utf-8")
    outcome.page = page.resolve()
    return outcome.page


def write_index(outcomes: Sequence[Outcome], profile: str, out: Path) -> Path:
    """``<out>/index.html``: a link to each paper's page with its verdict counts."""
    from analysis.html import render_page

    items = "".join(f'<li><a href="{escape(o.paper.key)}.html">{escape(o.paper.title)}</a>'
                    f" — {escape(summary(o.verdicts))}</li>" for o in outcomes)
    page = out / "index.html"
    page.write_text(render_page(f"The papers reproduced, profile {profile}",
                                [f"<ul>{items}</ul>"]), encoding="utf-8")
    return page.resolve()


def reproduce(paper_key: str, profile: str, where: Where, out: Path,
              skip_missing_data: bool = False, ui: str | None = None) -> int:
    """``ortho reproduce``: see the module docstring; the exit status."""
    papers = list(PAPERS.values()) if paper_key == ALL else [PAPERS[paper_key]]
    start = time.monotonic()
    contract.check_places(contract.home_dir(where.home), where.uri())  # before any child
    again = shlex.join(["ortho", "reproduce", paper_key, "--profile", profile,
                        *where.options(),
                        *([] if out.resolve() == DEFAULT_OUT.resolve() else ["--out", str(out)]),
                        *(["--ui", ui] if ui else [])])
    ready = readiness([spec for p in papers for spec in p.specs], profile, where)
    hashes = {spec: entry["sha256"] for spec, entry in ready.items()}
    plans = {p.key: plan(p, profile, where, hashes) for p in papers}
    lacking = [ready[s.spec] for steps in plans.values() for s in steps
               if s.action != "reuse" and ready[s.spec]["missing"]]
    if lacking and not skip_missing_data:
        others = any(s.action != "reuse" and not ready[s.spec]["missing"]
                     for steps in plans.values() for s in steps)
        raise missing_data_error(again, lacking, others)
    outcomes = []
    for paper in papers:
        steps = plans[paper.key]
        for i, step in enumerate(steps, 1):
            entry = ready[step.spec]
            if step.action != "reuse" and entry["missing"]:
                step.missing = f"needs {_datasets(entry)} ({entry['missing']})"
                print(f"[{i}/{len(steps)}] {step.spec}: left out, needs {_datasets(entry)}",
                      flush=True)
                continue
            execute(step, profile, where, f"[{i}/{len(steps)}]")
            if step.exit_status == 130:
                print(f"interrupted: `{again}` resumes it", file=sys.stderr)
                return 130
        outcomes.append(Outcome(paper, steps))
    for outcome in outcomes:
        page = write_page(outcome, profile, where, out, time.monotonic() - start, ui)
        print("\n".join(result_lines(outcome, page)))
    if paper_key == ALL:
        print(f"wrote {write_index(outcomes, profile, out)}")
    if lacking:
        fetch = _fetch(lacking)
        print("left out for missing data: " + ", ".join(
            f"{e['spec']} ({_datasets(e)})" for e in lacking) + "; add them with "
            + (f"`{' && '.join(fetch)}` and " if fetch else "the data, then ")
            + f"`{again}` (finished sweeps are reused)")
    failed = [s for o in outcomes for s in o.failed]
    if failed:
        print("failed: " + ", ".join(
            f"{s.spec} (exit status {s.exit_status}"
            + (f"; `{shlex.join(['ortho', 'sweep', 'resume', s.sweep_id, *where.options()])}`"
               " retries it)" if s.sweep_id else ")")
            for s in failed), file=sys.stderr)
        return 1
    return 0
