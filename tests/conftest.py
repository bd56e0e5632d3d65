"""Shared fixtures: a migrated, seeded database per test (SQLite and PostgreSQL), a
server on it, and in-memory clients in both protocol revisions.

Every test that uses `settings` (or `database_url`) runs once per backend; a test that
needs the SQLite file itself (`db_path`) or is marked `sqlite_only` runs on SQLite only.

No test may skip: a run with a skipped test fails (`pytest_sessionfinish` below), so a
machine without PostgreSQL, redis-server or npm cannot pass by leaving their tests out.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastmcp import Client, FastMCP

from tests.policy import pytest_sessionfinish, pytest_terminal_summary  # noqa: F401 (hooks: no test may skip)
from tests.postgres import PostgresServer, postgres_for_tests
from ticket_server import db
from ticket_server.admin.seeding import seed
from ticket_server.server import build_server
from ticket_server.settings import Settings
from ticket_server.tools.toolsets import TOOLSETS

MODES = ["legacy", "2026-07-28"]
BACKENDS = ["sqlite", "postgresql"]
_databases = itertools.count()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sqlite_only: the test is about SQLite itself")
    config.addinivalue_line(
        "markers", "slow: a load-shaped test (bounded, but long); -m 'not slow' skips it"
    )
    config.addinivalue_line(
        "markers", "postgresql_only: the test needs PostgreSQL (its docstring says why)"
    )
    config.addinivalue_line(
        "markers",
        "one_engine: slow, and what it proves does not depend on the engine (the same "
        "SQL, or none, checked on both by faster tests): run on SQLite only",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        only_sqlite = "db_path" in metafunc.fixturenames or any(
            metafunc.definition.get_closest_marker(name) for name in ("sqlite_only", "one_engine")
        )
        only_postgresql = metafunc.definition.get_closest_marker("postgresql_only")
        metafunc.parametrize(
            "backend",
            ["sqlite"] if only_sqlite else ["postgresql"] if only_postgresql else BACKENDS,
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drop one corner of the in-memory matrix: the legacy revision on PostgreSQL.

    A test that takes both ``mode`` and ``backend`` runs on both engines and in both
    protocol revisions, but not in every pair: the revision is the transport's concern
    and the engine the repository's, and neither depends on the other (each pair that
    could differ, 2026-07-28 on PostgreSQL and legacy on SQLite, still runs). This keeps
    the suite within its time budget. Not a skip: the pair is never collected."""
    keep = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("mode") == "legacy" and params.get("backend") == "postgresql":
            continue
        keep.append(item)
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


@pytest.fixture(scope="session")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample database, migrated by Alembic and seeded once per run."""
    path = tmp_path_factory.mktemp("template") / "tickets.db"
    url = sqlite_url(path)
    db.upgrade(url)
    asyncio.run(seed(Settings(database_url=url)))
    return path


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    server = postgres_for_tests()
    yield server
    server.remove()


@pytest.fixture(scope="session")
def postgres_template(postgres: PostgresServer) -> str:
    """A migrated, seeded PostgreSQL database that each test's database is copied from."""
    name = f"tickets_template_{os.getpid()}"

    def create() -> None:
        postgres.psql(f"DROP DATABASE IF EXISTS {name}")
        postgres.psql(f"CREATE DATABASE {name}")
        db.upgrade(postgres.url(name))
        asyncio.run(seed(Settings(database_url=postgres.url(name))))

    # In a thread of its own: the first test to need it may be running an event loop
    # (a PostgreSQL variant chosen inside an async test, `postgres_database_url`).
    with ThreadPoolExecutor(1) as pool:
        pool.submit(create).result()
    return name


@pytest.fixture
def database_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh copy of the sample database on ``backend``."""
    if backend == "sqlite":
        path = tmp_path / "tickets.db"
        shutil.copy(request.getfixturevalue("template_db"), path)
        yield sqlite_url(path)
        return
    yield request.getfixturevalue("postgres_database_url")


@pytest.fixture
def postgres_database_url(postgres: PostgresServer, postgres_template: str) -> Iterator[str]:
    """A fresh copy of the sample database on PostgreSQL, whatever ``backend`` says: for
    the chosen PostgreSQL variants of SQLite-based process tests."""
    name = f"test_{os.getpid()}_{next(_databases)}"
    # FILE_COPY: a 12 MB copy in ~0.15 s against ~0.21 s through the WAL (the default
    # since PostgreSQL 15); its checkpoint is cheap with fsync off (tests/postgres.py).
    postgres.admin(f"CREATE DATABASE {name} TEMPLATE {postgres_template} STRATEGY FILE_COPY")
    yield postgres.url(name)
    postgres.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def empty_database_url(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[str]:
    """An empty database (no schema) on ``backend``."""
    if backend == "sqlite":
        yield sqlite_url(tmp_path / "empty.db")
        return
    postgres: PostgresServer = request.getfixturevalue("postgres")
    name = f"empty_{os.getpid()}_{next(_databases)}"
    postgres.admin(f"CREATE DATABASE {name}")
    yield postgres.url(name)
    postgres.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def db_path(database_url: str) -> Path:
    """The SQLite file of this test's database (SQLite-only tests)."""
    return Path(database_url.removeprefix("sqlite+aiosqlite:///"))


@pytest.fixture
def settings(database_url: str) -> Settings:
    # Tests that are not about rate limits must never meet one.
    # Every toolset: the tests drive every tool (the default offers fewer).
    return Settings(
        database_url=database_url,
        database_timeout=3.0,
        tool_rate_limit="100000/minute",
        toolsets=list(TOOLSETS),
    )


@pytest.fixture
def server(settings: Settings) -> FastMCP:
    return build_server(settings)


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def client(server: FastMCP, mode: str) -> AsyncIterator[Client]:
    async with Client(server, mode=mode) as c:
        yield c
