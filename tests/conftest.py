"""Fixtures of every test directory: ``store``, an empty MLflow store of each kind a sweep
can track into (as optuna runs its storage tests against every storage), and ``browser``,
headless Chromium (:mod:`tests.browser`).

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

__all__ = ["browser", "mlflow_server", "postgres", "server_stores", "store"]

LONGEST_FIRST = ("tests/sweeps/test_resume.py", "tests/sweeps/test_runner.py",
                 "tests/analysis/test_report_cli.py", "tests/cluster/test_two_node.py",
                 "tests/cluster/test_tracking_outage.py", "tests/cluster/test_load.py")
"""The modules that take longest, 1.5-5 minutes each on 2 cores (``--durations=0``, summed
per module): collected first, in this order, so that pytest-xdist's ``loadscope``, which
hands modules out in collection order, starts them first and the short ones fill in around
them, rather than one long module running alone at the end of the session."""


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
