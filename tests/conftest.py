"""Fixtures of every test directory: ``store``, an empty MLflow store of each kind a sweep
can track into (as optuna runs its storage tests against every storage), ``browser``,
headless Chromium (:mod:`tests.browser`), and ``smoke_home``, the real smoke sweep of the
spec a test's ``@pytest.mark.smoke_sweep(SPEC)`` names (:mod:`tests.smoke`).

- ``sqlite``: the embedded default, a SQLite database in the test's ``tmp_path``;
- ``server``: an MLflow tracking server backed by PostgreSQL (:mod:`tests.servers`), started
  once per session; every test gets it empty (its tables truncated first), so that no test
  sees another's runs. Skipped, with the reason, where PostgreSQL is not installed (and
  failed instead under CI, see :func:`tests.servers.postgres`).

Tests that need a store to outlive one test (a store built once and only read) use
:func:`server_store`, which starts a server of its own on a database of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from sweeps.testing import sqlite_store
from tests.browser import browser
from tests.servers import MLflowServer, Postgres, mlflow_server, postgres, start_mlflow
from tests.smoke import SmokeSweeps, shared_root

__all__ = ["browser", "mlflow_server", "postgres", "server_stores", "store"]

LONGEST_FIRST = ("tests/sweeps/test_resume.py", "tests/sweeps/test_runner.py",
                 "tests/analysis/test_report_cli.py", "tests/cluster/test_two_node.py",
                 "tests/cluster/test_tracking_outage.py", "tests/cluster/test_load.py")
"""Modules that take longest (``--durations``, summed per module), collected first. Under
pytest-xdist 3.7+ this decides only among modules with the same number of tests: its
``loadscope`` hands modules out by their number of tests, most first, then in collection
order. Handing these out first (``--no-loadscope-reorder``) was tried and left off: see
``pyproject.toml``."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the modules of :data:`LONGEST_FIRST` first; every other test keeps its order."""
    rank = {module: i for i, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))


STORE_PARAMS = [pytest.param("sqlite"), pytest.param("server", marks=pytest.mark.cluster)]
"""The kinds of store every tracking, resume and analysis-loading test runs against, as
fixture params: the server's marked ``cluster`` (it starts a PostgreSQL-backed MLflow
server), so that ``-m "not cluster"`` starts no server."""


@dataclass(frozen=True)
class Store:
    """An empty store under test."""

    kind: str
    """``sqlite`` or ``server`` (:data:`STORE_PARAMS`)."""
    uri: str
    """Its tracking URI."""


def empty_server(postgres: Postgres, server: MLflowServer, database: str) -> str:
    """The URI of ``server`` (tracking into ``database`` of ``postgres``), emptied: every
    experiment with all it holds (runs, tags, params, metrics) removed, in PostgreSQL, so
    that nothing, not even a deleted experiment, is left to find or restore."""
    import psycopg2

    conn = psycopg2.connect(host="127.0.0.1", port=postgres.port, user=postgres.user,
                            password=postgres.password, dbname=database)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("TRUNCATE experiments CASCADE")
    finally:
        conn.close()
    return server.uri


def new_store(request: pytest.FixtureRequest, kind: str, directory: Path) -> Store:
    """An empty store of ``kind``: SQLite under ``directory``, or the session's server
    emptied."""
    if kind == "sqlite":
        return Store(kind, sqlite_store(directory))
    pg: Postgres = request.getfixturevalue("postgres")
    server: MLflowServer = request.getfixturevalue("mlflow_server")
    return Store(kind, empty_server(pg, server, "mlflow"))


@pytest.fixture(params=STORE_PARAMS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """An empty store of each kind (:data:`STORE_PARAMS`), for this test alone."""
    return new_store(request, request.param, tmp_path / "store")


class ServerStores:
    """MLflow servers backed by databases of their own, started on first use and stopped at
    the end of the session."""

    def __init__(self, postgres: Postgres, stack: ExitStack) -> None:
        self._postgres = postgres
        self._stack = stack
        self._uris: dict[str, str] = {}

    def uri(self, name: str) -> str:
        """The tracking URI of server ``name`` (database ``name``), started if need be."""
        if name not in self._uris:
            backend = self._postgres.create_database(name)
            self._uris[name] = self._stack.enter_context(start_mlflow(backend)).uri
        return self._uris[name]


@pytest.fixture(scope="session")
def server_stores(postgres: Postgres) -> Iterator[ServerStores]:
    """:class:`ServerStores` for the session (skipped where PostgreSQL is missing)."""
    with ExitStack() as stack:
        yield ServerStores(postgres, stack)


SMOKE_MARK = "smoke_sweep"
"""``@pytest.mark.smoke_sweep(SPEC)``: the test reads the real smoke sweep of SPEC from the
``smoke_home`` fixture (:mod:`tests.smoke`)."""
_SMOKE_SPECS = pytest.StashKey[list[str]]()


def pytest_configure(config: pytest.Config) -> None:
    """Register :data:`SMOKE_MARK` (the suite runs with ``--strict-markers``)."""
    config.addinivalue_line("markers", f"{SMOKE_MARK}(spec): the test reads the smoke sweep "
                            "of spec from smoke_home (run once per session, with those of "
                            "every other selected test, in one subprocess)")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Note the specs whose smoke sweeps the selected tests read (after ``-k``/``-m``
    deselected the others), so that the first of them runs exactly those."""
    specs = [mark.args[0] for item in session.items for mark in item.iter_markers(SMOKE_MARK)]
    session.config.stash[_SMOKE_SPECS] = list(dict.fromkeys(specs))


@pytest.fixture(scope="session")
def smoke_sweeps(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> SmokeSweeps:
    """The session's smoke sweeps, all in one home, run on first use (by one worker for all
    under pytest-xdist)."""
    return SmokeSweeps(shared_root(tmp_path_factory), request.config.stash.get(_SMOKE_SPECS, []))


@pytest.fixture
def smoke_home(request: pytest.FixtureRequest, smoke_sweeps: SmokeSweeps) -> Path:
    """The shared home (SQLite store ``mlflow.db``) holding the finished smoke sweep of the
    spec the test's ``smoke_sweep`` mark names (read-only: other specs' tests read it too)."""
    mark = request.node.get_closest_marker(SMOKE_MARK)
    if mark is None:
        raise pytest.UsageError(f"{request.node.nodeid} uses smoke_home without a "
                                f"@pytest.mark.{SMOKE_MARK}(spec) mark")
    return smoke_sweeps.home_of(mark.args[0])
