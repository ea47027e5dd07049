"""What ``analysis`` may know of ``sweeps``: the names of the MLflow layout, where the store
lives, and the sweep's expected cells (DESIGN.md, "Layers" and "What MLflow holds").

This module is the whole contract between the two packages, and it depends on the standard
library only: ``analysis`` reads what ``sweeps.tracking`` wrote without importing MLflow's
writer, pydantic, YAML or the spec code. ``sweeps.tracking`` takes its names from here, so
each is defined once.

The layout, in brief: one experiment per spec; one parent run per sweep (:data:`ROLE` =
:data:`ROLE_SWEEP`) tagged :data:`SWEEP_ID`, :data:`SPEC`, :data:`PROFILE`,
:data:`SPEC_SHA256`, :data:`N_CONFIGS`, with the artifacts
:data:`RESOLVED_ARTIFACT` and :data:`EXPECTED_CELLS_ARTIFACT`; one child run per
configuration (:data:`ROLE` = :data:`ROLE_CONFIGURATION`, :data:`PARENT`,
:data:`TRIAL_KEY`, :data:`OUTCOME`, :data:`NODE`); on both, the code that ran them
(:data:`GIT_SHA`, :data:`GIT_DIRTY`, :data:`VERSION`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import socket
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

SWEEP_ID = "ortho.sweep_id"
"""Parent and child: the sweep's id."""
SPEC = "ortho.spec"
"""Parent: the spec's name (also the experiment's)."""
PROFILE = "ortho.profile"
"""Parent: the profile applied."""
SPEC_SHA256 = "ortho.spec_sha256"
"""Parent: SHA-256 of the resolved spec text."""
GIT_SHA = "ortho.git_sha"
"""Parent and child: the commit the code came from (``unknown`` where nothing tells)."""
GIT_DIRTY = "ortho.git_dirty"
"""Parent and child: ``true`` when that code differed from the commit (uncommitted or
untracked files), ``false``, or ``unknown``."""
VERSION = "ortho.version"
"""Parent and child: the package's version."""
ROLE = "ortho.role"
""":data:`ROLE_SWEEP` on a parent run, :data:`ROLE_CONFIGURATION` on a child run (what
searches filter on)."""
ROLE_SWEEP = "sweep"
ROLE_CONFIGURATION = "configuration"
N_CONFIGS = "ortho.n_configs"
"""Parent: how many configurations the sweep has in all."""
METRIC = "ortho.metric"
"""Parent: the summary that ranks configurations."""
MODE = "ortho.mode"
"""Parent: ``max`` or ``min``, whether a larger or smaller :data:`METRIC` is better."""
TRIAL_KEY = "ortho.trial_key"
"""Child: the stable hash of the resolved configuration."""
OUTCOME = "ortho.outcome"
"""Child, once it ends: ``solved``, ``unsolved``, ``diverged`` or ``failed``."""
NODE = "ortho.node"
"""Child: the Ray node id it ran on (distinct even for two nodes on one host)."""
NODE_IP = "ortho.node_ip"
HOSTNAME = "ortho.hostname"
ATTEMPT = "ortho.attempt"
"""Child: how many runs of its trial key were started, this one included."""
CELL = "ortho.cell"
"""Child: index of the spec cell the configuration belongs to."""
OPTUNA_PARAMS = "ortho.optuna_params"
"""Child of an Optuna cell: JSON of the values Optuna chose (read back on resume)."""
SUMMARY = "ortho.summary"
"""Child: JSON of ``Result.summary`` (exact types; also logged as metrics)."""
BUDGET = "ortho.budget"
"""Child: JSON ``{"steps": N, "ends_early": bool}``, the step of the last report of its
configuration when it trains its whole budget (its experiment's ``planned_steps``) and
whether it can end before by its protocol (``ends_early``): how far a running configuration
is, which a sweep's progress shows (:func:`sweeps.status.in_flight`)."""
STOPPED_EARLY = "ortho.stopped_early"
"""Child: ``true`` when the early-stopping scheduler ended it."""
DRIVER = "ortho.driver"
"""Parent: ``host:pid`` of the process that drives the sweep (set again by a resume)."""
HEARTBEAT = "ortho.heartbeat"
"""Parent: when the driver last said it was alive (seconds since the epoch)."""
RESUMED = "ortho.resumed"
"""Parent of a resumed sweep: JSON ``{"at": seconds since the epoch, "done": n}``, when the
latest resume started and how many configurations had finished by then, so that the time
left is estimated at that run's rate, not over the hours between runs."""
OPTUNA_STORAGE = "ortho.optuna_storage"
"""Parent of a sweep with Optuna cells: the Optuna storage URL holding its studies, its
credentials masked (one study per cell, named :data:`STUDY_NAME`)."""
OPTUNA_SAMPLER = "ortho.optuna_sampler"
"""Parent of a sweep with Optuna cells: the sampler its studies ask (``search.sampler``:
``tpe``, ``random``, ``cmaes``, ``grid``), which a report names."""
STUDY_NAME = "{sweep_id}/cell-{cell}"
"""The name of an Optuna cell's study in :data:`OPTUNA_STORAGE` (``str.format`` with the
sweep's id and the cell's index), for ``optuna.load_study`` or ``optuna-dashboard``."""
PACK_SIZE = "ortho.pack_size"
"""Parent of a sweep whose spec says ``pack_size: auto``: the pack size K it chose from its
measured throughput curve (:mod:`sweeps.pack_size`); a resume packs with it again."""
PACK_SIZE_CURVE = "ortho.pack_size_curve"
"""Parent, beside :data:`PACK_SIZE`: JSON ``{K: configs·iterations per second}`` of the
pack sizes the probe measured on a trial's device (``{}`` when K was not measured)."""
PACK_SIZE_SETUP = "ortho.pack_size_setup"
"""Parent, beside :data:`PACK_SIZE_CURVE`: JSON ``{K: seconds}`` of each probed pack's set-up
(its wall time outside its training iterations), weighed against a configuration's
iterations where the experiment states them (``{}`` when not measured or not weighed)."""
STORED_INFINITY = sys.float_info.max
"""What MLflow's SQL store keeps for an infinite metric value (a diverged loss): the largest
finite float, with the infinity's sign; what reads it back takes it for ±inf again."""
CONFIGS_PER_HOUR = "configs_per_hour"
"""Parent, a metric logged whenever its driver ends it: configurations finished per hour of
wall time by that run of the driver (``ortho sweep run``, or a resume: what it finished, not
counting those finished before it), its start (Ray, the store) included."""
RUN_SECONDS = "run_seconds"
"""Parent, a metric beside :data:`CONFIGS_PER_HOUR`: the wall time of that run (seconds)."""
OPTUNA_REPEATS = "optuna_repeats"
"""Parent, a metric of a sweep with Optuna cells, logged whenever its driver ends it: the
points its studies proposed again, each told a known value (or failed) instead of being
trained, which spent a trial of its cell's budget (:mod:`sweeps.searcher`)."""
PARENT = "mlflow.parentRunId"
"""Child: the parent run's id (MLflow's own tag)."""
RUN_NAME = "mlflow.runName"
"""Parent and child: the run's name as MLflow's UI shows it (MLflow's own tag): a child's
names the configuration keys that vary within its sweep (:mod:`sweeps.naming`), a parent's
its profile and the end of its sweep id (``cpu · ff2c``; the experiment is the spec)."""
NOTE = "mlflow.note.content"
"""Parent: the description MLflow's UI shows (the spec's description, profile and sweep id)."""

RESOLVED_ARTIFACT = "resolved_spec.yaml"
"""Parent: the resolved spec (YAML)."""
SPEC_ARTIFACT_DIR = "spec"
"""Parent: the spec file the sweep was started from, under this directory."""
EXPECTED_CELLS_ARTIFACT = "expected_cells.json"
"""Parent: the cells the resolved spec defines (:func:`read_expected_cells`); absent from
sweeps tracked before it was written."""
TRIALS = "trials"
"""Key of an expected cell: how many configurations it stands for (1 for a grid cell,
``search.n_trials`` for an Optuna cell)."""
SEARCHED = "searched"
"""Key of an expected cell: the config keys its Optuna search chooses (empty for a grid
cell), which tells an Optuna cell of ``n_trials: 1`` from a grid cell
(:func:`is_optuna_cell`); absent from the cells of sweeps tracked before it."""
DEFAULTED = "defaulted"
"""Key of an expected cell: the config keys other cells set that its groups leave unset,
which it holds at the trainer's default (the value its runs log); absent when there are
none, and from the cells of sweeps tracked before it, which leave such keys out."""
METRICS_CSV = "metrics.csv"
"""Child: every reported step, one column per metric."""
TRACEBACK = "traceback.txt"
"""Child of a failed configuration: its error."""


SYMBOLS: dict[str, str] = {
    "lr": "α", "penalty": "λ", "pretrain_lr": "αₚ", "init_std": "σ", "spectral_radius": "ρ",
    "seq_len": "T", "clip": "τ", "switch_norm": "ψ", "momentum": "β", "direction": "d"}
"""Config key -> the papers' symbol of it (DESIGN.md "Names"), in the order run names list
them."""
VARIANT_NAMES: dict[str, str] = {
    "plain": "plain", "open": "OPEN", "oinit": "OINIT", "lcw": "LCW", "bn": "BN", "wn": "WN",
    "relu": "ReLU", "orth": "orthogonal", "orth_relu": "Orth/ReLU"}
"""``variant`` -> the papers' name of it (M: OPEN, OINIT; K: LCW, BN, WN; N: ReLU,
orthogonal, Orth/ReLU)."""
TASK_NAMES: dict[str, str] = {
    "temporal_order": "Temporal Order", "temporal_order_3bit": "3-bit Temporal Order",
    "adding": "Adding", "permutation": "Random Permutation"}
"""``task`` -> M's name of the synthetic problem."""
DIRECTION_NAMES: dict[str, str] = {
    "gradient": "anti-gradient", "simplex": "simplex", "simplex_switch": "simplex with switching"}
"""``direction`` -> G's name of the descent direction."""


WORDS: dict[str, dict[str, str]] = {"variant": VARIANT_NAMES, "direction": DIRECTION_NAMES}
"""Keys a run name shows by their value alone, first (the papers' names where they have
one)."""
TRAILING: dict[str, dict[str, str]] = {"task": TASK_NAMES, "dataset": {}}
"""Keys a run name shows by their value alone, after the numbers."""
SEEDS = ("seed", "data_seed")
"""Keys a run name shows last."""


def format_value(value: Any) -> str:
    """``value`` as a name shows it: numbers in at most four significant digits with short
    exponents (``0.01``, ``1``, ``1e-5``), sequences joined by commas. Run names
    (:mod:`sweeps.naming`) and a report's missing configurations show values so."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return re.sub(r"e([+-])0*(\d)", lambda m: "e" + m[1].replace("+", "") + m[2],
                      f"{value:.4g}")
    if isinstance(value, (list, tuple)):
        return ",".join(format_value(v) for v in value)
    return str(value)


def _order(key: str) -> tuple[int, int]:
    if key in WORDS:
        return 0, list(WORDS).index(key)
    if key in SYMBOLS:
        return 1, list(SYMBOLS).index(key)
    if key in TRAILING:
        return 3, list(TRAILING).index(key)
    if key in SEEDS:
        return 4, SEEDS.index(key)
    return 2, 0


LABELS = (*WORDS, *TRAILING)
"""Keys a run name shows by their value alone (the variant, direction, task, dataset): a key
that comes with one of them, set by its groups and left at its default by the others, is
told by it (:func:`varying_keys`)."""


def varying_keys(cells: Iterable[Any],
                 resolved: Sequence[Mapping[str, Any]] | None = None) -> tuple[str, ...]:
    """The config keys that vary within a sweep of ``cells`` (``sweeps.spec.Cell``, with
    ``params`` and ``optuna_space``), in the order they first appear.

    With ``resolved``, each cell's params as the trainer resolves them
    (:func:`sweeps.spec.resolved_params`), a key also varies when those differ (``task:
    adding`` in one group, the default temporal order in another), unless it is not one of
    :data:`LABELS` and the labels that vary tell its values apart (each combination of them
    has one value of it: the paper profile's ``penalty_form: unsquared`` comes with OPEN,
    ``length_jitter: true`` with adding)."""
    cells = list(cells)
    values: dict[str, set[str]] = {}
    searched: set[str] = set()
    for cell in cells:
        for key, value in cell.params.items():
            values.setdefault(key, set()).add(repr(value))
        searched.update(cell.optuna_space)
        for key in cell.optuna_space:
            values.setdefault(key, set())
    written = {k for k, seen in values.items() if len(seen) > 1 or k in searched}
    if resolved is None:
        return tuple(k for k in values if k in written)
    if len(resolved) != len(cells):
        raise ValueError(f"{len(resolved)} resolved params for {len(cells)} cells")

    def differs(key: str) -> bool:
        return len({repr(p[key]) for p in resolved if key in p}) > 1

    labels = [k for k in values if k in LABELS and (k in written or differs(k))]

    def told(key: str) -> bool:
        """Whether each combination of the varying labels has one value of ``key``."""
        seen: dict[tuple[str, ...], str] = {}
        for p in resolved:
            if key in p and seen.setdefault(tuple(repr(p.get(k)) for k in labels),
                                            repr(p[key])) != repr(p[key]):
                return False
        return True

    return tuple(k for k in values if k in written or (
        differs(k) and (k in LABELS or not told(k))))


def run_name(params: Mapping[str, Any], keys: Iterable[str]) -> str:
    """The name of the configuration ``params`` from its values of ``keys`` (those it sets),
    ordered as :mod:`sweeps.naming` says (words, symbols, other keys, task and dataset,
    seeds); ``configuration`` when it sets none of them. Runs are named so, and a report names
    the configurations no run holds the same way."""
    parts = []
    for key in sorted((k for k in dict.fromkeys(keys) if k in params), key=_order):
        value = params[key]
        labels = WORDS.get(key) or TRAILING.get(key)
        if labels is not None:
            parts.append(labels.get(value, format_value(value)) if isinstance(value, str)
                         else format_value(value))
        else:
            parts.append(f"{SYMBOLS.get(key, key)}={format_value(value)}")
    return " ".join(parts) or "configuration"


class LocationError(ValueError):
    """A store location the user gave that cannot be used (``home``, ``tracking_uri``): the
    field, what was expected and the value, worded as ``ortho_core``'s ``ConfigError`` (which
    this standard-library-only module cannot import). The ``ortho`` command answers both with
    exit status 2 before anything is opened."""

    def __init__(self, field: str, expected: str, value: object) -> None:
        self.field, self.expected, self.value = field, expected, value
        super().__init__(f"{field}: expected {expected} (got {value!r})")


def home_dir(home: str | os.PathLike[str] | None = None) -> Path:
    """The sweeps' home: ``home``, else ``$ORTHO_HOME``, else ``./ortho-runs``; absolute.
    :class:`LocationError` (``home``) when it names something other than a folder."""
    raw = home if home is not None else os.environ.get("ORTHO_HOME") or "ortho-runs"
    path = Path(raw).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise LocationError("home", "a folder (or a path where one can be made), not a file",
                            str(path))
    return path


def is_file(path: Path) -> bool:
    """Whether ``path`` is a regular file; False for a name the system cannot look up (too
    long, or holding a NUL byte)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def unwritable(folder: str | os.PathLike[str]) -> str | None:
    """Why no folder this process can write in can be at ``folder`` (a few words: ``/x is a
    file``, ``cannot make /proc/x: no such file or directory``, ``cannot write in /mnt/ro:
    read-only file system``), or None when one can. Only the kernel knows (``/proc``, a
    read-only mount, root's rights), so the folders it lacks are made and a file is written
    in it, then all of it is removed again: a command that stops before its work leaves
    nothing."""
    path = Path(folder).expanduser().resolve()
    nearest = path
    while not nearest.is_dir():
        if os.path.lexists(nearest):
            return f"{nearest} is {'a file' if nearest.is_file() else 'not a folder'}"
        nearest = nearest.parent
    missing = [p for p in (path, *path.parents) if p != nearest and p.is_relative_to(nearest)]
    made: list[Path] = []
    step = "make"
    try:
        for part in reversed(missing):
            step = f"make {part}"
            part.mkdir()
            made.append(part)
        step = f"write in {path}"
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        return f"cannot {step}: {(err.strerror or str(err)).lower()}"
    finally:
        for part in reversed(made):
            with contextlib.suppress(OSError):  # no longer empty: another process uses it
                part.rmdir()
    return None


def check_places(home: Path, uri: str) -> None:
    """Refuse a sweeps' ``home`` (:func:`home_dir`), and the folder of a SQLite store
    ``uri`` elsewhere, that this process cannot make or write in (:func:`unwritable`):
    :class:`LocationError` naming ``home`` or ``tracking_uri``. A command that runs sweeps
    (``ortho sweep run``, ``resume``, ``ortho reproduce``) asks before any work, since the
    store, Tune's state (by default) and a database store's artifacts are written there."""
    why = unwritable(home)
    if why is not None:
        raise LocationError("home", f"a folder this user can write in, or a path where one "
                            f"can be made ({why})", str(home))
    db = sqlite_path(uri)
    why = None if db is None or db.parent == home else unwritable(db.parent)
    if why is not None:
        raise LocationError("tracking_uri", f"a SQLite file in a folder this user can write "
                            f"in, or where one can be made ({why})", uri)


def store_options(home: Path, uri: str) -> list[str]:
    """The options that name the store at ``home`` / ``uri`` again, for the commands a sweep
    or a reproduction tells the user to run next from the same folder: ``--home`` unless
    ``home`` is the default there (:func:`home_dir`), ``--tracking-uri`` (credentials masked:
    the user types the password back) unless ``uri`` is that home's embedded store, even where
    ``$ORTHO_TRACKING_URI`` gave it: the command may be run in another environment than the
    one that printed it (a submitted sweep's job has its own, which holds no password); one
    with a password that ``$ORTHO_TRACKING_URI`` gave is left to it, since its masked form
    would not open the store. A default home that cannot be resolved (``./ortho-runs`` a
    file) is not the store's: ``--home`` is given."""
    try:
        default_home = home_dir(None)
    except LocationError:
        default_home = None
    options = [] if home == default_home else ["--home", str(home)]
    given_again = uri == tracking_uri(None, home) and redact(uri) != uri
    if uri == embedded_store(home) or given_again:
        return options
    return [*options, "--tracking-uri", redact(uri)]


def spec_named(text: str) -> str:
    """The spec a command's argument names: a spec file's stem (a spec's name is its file's:
    ``my-runs.yaml`` -> ``my-runs``), else the text as given."""
    path = Path(text)
    return path.stem if path.suffix in (".yaml", ".yml") else text


def given(text: str) -> str:
    """An option's value on the command line that is not empty: ``--home ""`` or
    ``--data-dir ""`` would otherwise read as not given, and the default be used in silence
    (``argparse.ArgumentTypeError``: exit 2 naming the option)."""
    import argparse

    if not text:
        raise argparse.ArgumentTypeError("expected a value, not an empty string")
    return text


def could_name_a_spec(name: str) -> bool:
    """Whether ``name`` is one a spec file can have: not empty, no blanks, path separators,
    control characters or both kinds of quote (which no MLflow search can hold)."""
    return (bool(name) and name.isprintable() and not any(c in name for c in " /\\")
            and not ("'" in name and '"' in name))


def embedded_store(home: Path) -> str:
    """The tracking URI of ``home``'s embedded SQLite store."""
    return f"sqlite:///{home / 'mlflow.db'}"


DATABASE_PORTS = {"postgresql": 5432, "postgres": 5432, "mysql": 3306, "mssql": 1433}
"""The port of a database server whose URI names none, by scheme (without ``+driver``)."""
REACH_TIMEOUT_S = 4.0
"""Seconds :func:`unreachable` waits for a connection."""


def server_address(uri: str) -> tuple[str, int] | None:
    """(host, port) of the server a tracking URI names, to be reached directly: a tracking
    server (``http(s)://``, port 80 or 443 when it names none) or a database server
    (:data:`DATABASE_PORTS`); None for SQLite, a database reached through a local socket, or
    a tracking server reached through a proxy (``$HTTPS_PROXY``, ``$HTTP_PROXY``, unless
    ``$NO_PROXY`` names it), which only the proxy connects to. A port that is not a number is
    a :class:`LocationError` naming ``tracking_uri``."""
    from urllib.parse import urlsplit
    from urllib.request import getproxies, proxy_bypass

    scheme = uri_kind(uri)
    parts = urlsplit(uri)
    default = DATABASE_PORTS.get(scheme) or {"http": 80, "https": 443}.get(scheme)
    if default is None or not parts.hostname:
        return None
    if scheme in ("http", "https") and scheme in getproxies() \
            and not proxy_bypass(parts.hostname):
        return None
    try:
        return parts.hostname, parts.port or default
    except ValueError:
        raise LocationError("tracking_uri", "a URI whose port is a number", redact(uri)) from None


def uri_kind(uri: str) -> str:
    """The scheme of ``uri`` without its ``+driver``, lower case: ``postgresql`` for
    ``postgresql+psycopg2://...``."""
    return uri.partition("://")[0].split("+")[0].lower()


def first_line(text: str) -> str:
    """The first line of ``text`` that is not blank (what a database driver or Ray said,
    without the paragraph of advice or the link that follows it); ``text`` stripped when it
    has none."""
    return next((line.strip() for line in text.splitlines() if line.strip()), text.strip())


def unreachable(host: str, port: int) -> str | None:
    """Why no TCP connection to ``host:port`` opens within :data:`REACH_TIMEOUT_S` (a few
    words ending "at HOST:PORT"), or None when one does: what a server there must at least
    do, asked before a client that retries for minutes (MLflow, SQLAlchemy, Ray) is pointed
    at it."""
    try:
        socket.create_connection((host, port), timeout=REACH_TIMEOUT_S).close()
    except OSError as err:
        why = (f"no answer within {REACH_TIMEOUT_S:.0f} s" if isinstance(err, TimeoutError)
               else (err.strerror or str(err)).lower())
        return f"{why} at {host}:{port}"
    return None


TRACKING_SCHEMES = ("sqlite", "postgresql", "postgres", "mysql", "mssql", "http", "https")
"""The schemes of the tracking URIs MLflow 3 opens (a database, with an optional ``+driver``,
or a tracking server); MLflow refuses its old file store (``./mlruns``, ``file:``)."""


def tracking_uri(uri: str | None, home: Path) -> str:
    """The tracking URI, absolute, so that trials in other working directories agree.

    ``uri`` None falls back to ``$ORTHO_TRACKING_URI``, then to the embedded store
    ``sqlite:///<home>/mlflow.db`` (``$MLFLOW_TRACKING_URI`` is not consulted: with no flags
    everything stays under ``home``). A relative SQLite path is made absolute against this
    process's working directory; other URIs (``http://``, ``https://``, ``postgresql://``,
    ...) pass unchanged. A URI of none of :data:`TRACKING_SCHEMES` (a plain path, ``file:``,
    a typo) is a :class:`LocationError` (``tracking_uri``).
    """
    uri = uri or os.environ.get("ORTHO_TRACKING_URI") or None
    if uri is None:
        return embedded_store(home)
    kind = uri_kind(uri)
    if "://" not in uri or kind not in TRACKING_SCHEMES \
            or (kind == "sqlite" and not uri.startswith("sqlite:///")):
        raise LocationError("tracking_uri", "an MLflow store: sqlite:///PATH, "
                            "postgresql://USER@HOST/DB, mysql://..., or a tracking server's "
                            "http(s)://HOST:PORT", redact(uri))
    return absolute_sqlite(uri) if kind == "sqlite" else uri


def finite_or_none(value: Any) -> float | None:
    """``value`` as a float if it is a finite real number, else None: a reported metric that
    is missing, diverged (NaN, ±inf) or not a number. A bool is not a number here, though
    Python counts it an int."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def epoch_seconds(millis: int | None) -> float | None:
    """An MLflow time (milliseconds since the epoch; None or 0 where unset) in seconds."""
    return millis / 1000 if millis else None


def absolute_sqlite(uri: str) -> str:
    """``sqlite:///PATH`` with PATH made absolute against this process's working directory
    (``~`` expanded)."""
    return f"sqlite:///{Path(uri[len('sqlite:///'):]).expanduser().resolve()}"


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, else None."""
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


NO_STORE = ("an MLflow store holding sweeps (none here: run `ortho sweep run SPEC` first, or "
            "pass --tracking-uri or --home)")
"""What a command that reads sweeps (``ortho report``, ``ortho sweep status``, ``resume``,
``studies``) expected of a ``tracking_uri`` whose SQLite file does not exist: their
``ConfigError`` with field ``tracking_uri`` (exit status 2); the file is not created."""


POSTGRES_DRIVER = "postgresql+psycopg2"
"""The SQLAlchemy dialect and driver a PostgreSQL store is opened with: psycopg2
(``psycopg2-binary``, a dependency of this package)."""


def database_url(uri: str) -> str:
    """``uri`` as a store is opened with: a bare ``postgresql://`` or ``postgres://`` names
    :data:`POSTGRES_DRIVER`, since SQLAlchemy 2.1 reads it as psycopg 3, which this package
    does not install (MLflow would fail on "No module named 'psycopg'", Optuna on "Failed to
    import DB access module"). Any other URI, a named driver included, is returned as it is.
    A tracking URI is shown as the user gave it and only MLflow's engine gets this form; an
    Optuna storage is recorded in it (:func:`sweeps.studies.storage_url`), so that the URL a
    parent run records opens as it is in ``optuna.load_study``."""
    scheme, sep, rest = uri.partition("://")
    return f"{POSTGRES_DRIVER}://{rest}" if sep and scheme in ("postgresql", "postgres") else uri


_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)([^\s/?#@:]*):(\S*)@")
"""``scheme://user:password@``; the password runs to the last ``@`` of the word, so that one
written with a raw ``@``, ``/`` or ``?`` in it is masked whole."""
_WEB_TOKEN = re.compile(r"((?:https?|wss?)://)([^\s/?#:]+)@", re.IGNORECASE)
"""``http(s)://token@``: a web URI's user info without a password is a token as often as a
name (``https://<token>@host``, how GitHub and many proxies take one), so it is masked whole,
to the last ``@`` before the host (a token written with a raw ``@``); a database's user alone
(``postgresql://ortho@db``) is a name and stays."""
_SECRET_QUERY = re.compile(r"([?&][^\s=&#]*(?:password|passwd|pwd|secret|token)[^\s=&#]*=)"
                           r"[^\s&#]*", re.IGNORECASE)


MASK = "***"
"""What :func:`redact` puts in place of a credential."""


def redact(text: str) -> str:
    """``text`` with the credentials of every URI in it masked: the password of
    ``scheme://user:password@host``, the user info of ``http(s)://token@host`` and the
    values of query parameters that name a password, secret or token
    (``postgresql://u:***@db/mlflow``, ``https://***@host``, ``...?sslpassword=***``).
    Whatever ``sweeps`` or ``analysis`` prints of a URI goes through it."""
    text = _WEB_TOKEN.sub(rf"\1{MASK}@", _USERINFO.sub(rf"\1\2:{MASK}@", text))
    return _SECRET_QUERY.sub(rf"\1{MASK}", text)


def read_expected_cells(text: str) -> list[dict[str, Any]]:
    """The cells of an :data:`EXPECTED_CELLS_ARTIFACT`: one dict per cell, its config keys
    with the values as the spec writes them (and, since they were written, the trainer's
    defaults of the keys other cells set, named by :data:`DEFAULTED`), plus :data:`TRIALS`
    and (since it was written) :data:`SEARCHED`. ``ValueError`` when ``text`` is not such a
    list."""
    cells = json.loads(text)
    if not isinstance(cells, list) or not all(
            isinstance(c, dict) and isinstance(c.get(TRIALS), int)
            and isinstance(c.get(SEARCHED, []), list)
            and isinstance(c.get(DEFAULTED, []), list) for c in cells):
        raise ValueError(f"{EXPECTED_CELLS_ARTIFACT}: not a list of cells with "
                         f"{TRIALS!r} counts and {SEARCHED!r} and {DEFAULTED!r} lists")
    return cells


def is_optuna_cell(cell: Mapping[str, Any]) -> bool:
    """Whether an expected cell is searched by Optuna: it has :data:`SEARCHED` keys, or, in
    the cells of a sweep tracked before they were written, more than one trial."""
    return bool(cell[SEARCHED]) if SEARCHED in cell else int(cell[TRIALS]) > 1
