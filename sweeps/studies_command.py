"""``ortho sweep studies``: what a sweep's Optuna studies hold, and optuna-dashboard on them.

    ortho sweep studies [SWEEP] [--optuna-storage URL] [--tracking-uri U] [--home DIR]
                        [--dashboard [--host 127.0.0.1] [--port 8080]]

The sweep is found as ``status`` finds it (default: the latest that has studies). Its studies
are read from the storage its parent run recorded (:data:`sweeps.contract.OPTUNA_STORAGE`),
unless ``--optuna-storage`` or ``$ORTHO_OPTUNA_STORAGE`` names one: the recorded URL has its
credentials masked, and another machine may reach the database by another address. One line
per cell's study (:data:`sweeps.contract.STUDY_NAME`) gives the keys that tell the cells
apart, its trials by state and its best trial's value and point.

With ``--dashboard`` the command then serves optuna-dashboard's web UI on that storage until
Ctrl-C, bound to 127.0.0.1 unless ``--host`` says otherwise. The server runs in this process
(optuna-dashboard's WSGI application under the standard library's server, one request at a
time), so the storage URL, which may hold a password, is on no command line.
"""

from __future__ import annotations

import argparse
import errno
import json
import shlex
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any, TextIO
from wsgiref.simple_server import WSGIRequestHandler, make_server

from ortho_core.errors import ConfigError
from sweeps import contract, tracking
from sweeps.lookup import SweepNotFound, find, open_store
from sweeps.status import count
from sweeps.studies import CELL_ATTR, INTERRUPTED_ATTR, KEY_ATTR, REPEAT_ATTR, sweep_storage

STATE_WORDS = {"COMPLETE": "complete", "RUNNING": "running", "WAITING": "queued",
               "FAIL": "failed", "PRUNED": "pruned"}
"""How a trial's state reads in a summary, in this order (then ``interrupted``,
``repeated``)."""


UNRECORDED = "(default)"
"""How a summary shows a key another cell sets and this cell's study does not record: a study
created before the studies held their cells' resolved params (:data:`CELL_ATTR`) recorded only
the keys its own cell sets, so the trainer ran it at that key's default."""


@dataclass
class StudySummary:
    """One cell's study, as ``ortho sweep studies`` prints it."""

    name: str
    """The study's name, ``<sweep_id>/cell-<index>``."""
    cell: dict[str, Any]
    """The config keys whose values tell this cell from the sweep's other cells."""
    states: Counter[str]
    """Trials by :data:`STATE_WORDS` word; points told again without training count as
    ``repeated``, failed trials whose training was cut short
    (:data:`sweeps.studies.INTERRUPTED_ATTR`) as ``interrupted``."""
    best: Any
    """The best COMPLETE trial (``optuna.trial.FrozenTrial``), None before any."""
    ties: int = 0
    """Other points whose COMPLETE trials reached the best trial's value (Optuna names the
    first of them; a report may rank them otherwise, e.g. by fewer iterations); a point told
    again counts once."""


def load_summaries(url: str, sweep_id: str) -> list[StudySummary]:
    """Every cell's study of ``sweep_id`` in ``url``, in cell order; ``ConfigError`` (field
    ``optuna_storage``) when the storage cannot be opened or holds none of them."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    prefix = contract.STUDY_NAME.format(sweep_id=sweep_id, cell="")
    try:
        storage = optuna.storages.get_storage(url)
        names = [n for n in optuna.get_all_study_names(storage)
                 if n.startswith(prefix) and n.removeprefix(prefix).isdigit()]
    except Exception as err:  # a malformed URL, a missing driver, an unreachable database
        raise ConfigError("optuna_storage", f"a storage this machine can open "
                          f"({tracking.redact(str(err))})", tracking.redact(url)) from err
    if not names:
        raise ConfigError("optuna_storage", f"the storage holding the studies of sweep "
                          f"{sweep_id} (it holds none named {prefix}<cell>)",
                          tracking.redact(url))
    names.sort(key=lambda n: int(n.removeprefix(prefix)))
    studies = [optuna.load_study(study_name=n, storage=storage) for n in names]
    cells = [s.user_attrs.get(CELL_ATTR, {}) for s in studies]
    varying = [k for k in dict.fromkeys(k for c in cells for k in c)
               if len({json.dumps(c.get(k), sort_keys=True) for c in cells}) > 1]
    return [StudySummary(study.study_name, {k: cell.get(k, UNRECORDED) for k in varying},
                         _states(study), *_best(study))
            for study, cell in zip(studies, cells, strict=True)]


def _states(study: Any) -> Counter[str]:
    states: Counter[str] = Counter()
    for trial in study.get_trials(deepcopy=False):
        if trial.user_attrs.get(REPEAT_ATTR):
            states["repeated"] += 1
        elif trial.user_attrs.get(INTERRUPTED_ATTR) and trial.state.name == "FAIL":
            states["interrupted"] += 1
        else:
            states[STATE_WORDS.get(trial.state.name, "other")] += 1
    return states


def _best(study: Any) -> tuple[Any, int]:
    """The study's best COMPLETE trial (None before any) and how many other points tie with
    it: a point told again (:data:`REPEAT_ATTR`) is the same configuration, not a tie."""
    import optuna

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not complete:
        return None, 0
    best = study.best_trial
    return best, len({_configuration(t) for t in complete if t.value == best.value}
                     - {_configuration(best)})


def _configuration(trial: Any) -> str:
    """What tells a trial's configuration apart: its trial key, else its point."""
    return trial.user_attrs.get(KEY_ATTR) or json.dumps(trial.params, sort_keys=True)


def _value(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _point(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={_value(v)}" for k, v in params.items())


def summary_line(summary: StudySummary, metric: str) -> str:
    """One study: ``cell-0 penalty=1: 6 trials (5 complete, 1 failed); best METRIC 10 at
    lr=0.00443 (trial 3)``, or ``(trial 3; 2 more points tie)`` when others reached it too."""
    name = summary.name.rsplit("/", 1)[-1]
    label = f"{name} {_point(summary.cell)}" if summary.cell else name
    total = sum(summary.states.values())
    words = [*STATE_WORDS.values(), "interrupted", "repeated", "other"]
    counts = ", ".join(f"{summary.states[w]} {w}" for w in words if summary.states[w])
    trials = count(total, "trial") + (f" ({counts})" if counts else "")
    if summary.best is None:
        return f"  {label}: {trials}; none complete yet"
    best = summary.best
    tie = ("" if not summary.ties else "; 1 more point ties" if summary.ties == 1
           else f"; {summary.ties} more points tie")
    return (f"  {label}: {trials}; best {metric} {_value(best.value)} at {_point(best.params)} "
            f"(trial {best.number}{tie})")


def print_summaries(record: tracking.SweepRecord, url: str, summaries: list[StudySummary],
                    stream: TextIO) -> None:
    """The header line and one line per study."""
    named = contract.STUDY_NAME.format(sweep_id=record.ref.sweep_id, cell="<cell>")
    n = len(summaries)
    print(f"sweep {record.ref.sweep_id} {record.spec}/{record.profile}: {n} Optuna "
          f"stud{'y' if n == 1 else 'ies'} in {tracking.redact(url)}, named {named}",
          file=stream)
    for summary in summaries:
        print(summary_line(summary, record.metric), file=stream)


class _QuietHandler(WSGIRequestHandler):
    """A request handler that logs no line per request (the dashboard polls every second)."""

    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing."""


def serve_dashboard(url: str, host: str, port: int, stream: TextIO) -> None:
    """optuna-dashboard on storage ``url`` at ``host:port`` (0: a free port) until Ctrl-C
    (``KeyboardInterrupt``: the command line exits 130, as ``ortho ui`` does) or SIGTERM
    or SIGHUP (``SystemExit`` with 128 + the signal). A port in use or an address that
    cannot be bound: ``ConfigError``."""
    import signal

    import optuna_dashboard

    app = optuna_dashboard.wsgi(url)
    try:
        server = make_server(host, port, app, handler_class=_QuietHandler)
    except OSError as err:
        in_use = err.errno == errno.EADDRINUSE
        hint = "; --port picks another, --port 0 a free one" if in_use else ""
        raise ConfigError("port" if in_use else "host",
                          f"an address this machine can listen on ({err.strerror or err}"
                          f"{hint})", f"{host}:{port}") from err
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    with server:
        print(f"Optuna dashboard on http://{host}:{server.server_port} (Ctrl-C stops it)",
              file=stream, flush=True)
        try:
            server.serve_forever()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _stop(signum: int, frame: object) -> None:
    """SIGTERM or SIGHUP (the terminal closed) stops the dashboard with status 128 + the
    signal's number."""
    raise SystemExit(128 + signum)


def cmd_studies(args: argparse.Namespace) -> int:
    """``ortho sweep studies``."""
    uri = tracking.tracking_uri(args.tracking_uri, tracking.home_dir(args.home))
    record = find(open_store(uri), args.sweep, with_studies=True)
    if record is None:
        raise SweepNotFound(f"no sweep with Optuna studies in {tracking.redact(uri)}")
    url = sweep_storage(record.optuna_storage, args.optuna_storage, record.ref.sweep_id,
                        uri)
    print_summaries(record, url, load_summaries(url, record.ref.sweep_id), sys.stdout)
    if args.dashboard:
        serve_dashboard(url, args.host, args.port, sys.stdout)
    else:
        again = ["ortho", "sweep", "studies", record.ref.sweep_id,
                 *contract.store_options(tracking.home_dir(args.home), uri)]
        if args.optuna_storage:
            again += ["--optuna-storage", contract.redact(args.optuna_storage)]
        print(f"browse them with: {shlex.join([*again, '--dashboard'])}")
    return 0
