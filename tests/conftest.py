"""Shared fixtures: a migrated, seeded database per test (SQLite and PostgreSQL), a
server on it, and in-memory clients in both protocol revisions.

Every test that uses `settings` (or `database_url`) runs once per backend; a test that
needs the SQLite file itself (`db_path`) or is marked `sqlite_only` runs on SQLite only.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from fastmcp import Client, FastMCP

from ticket_server import db
from ticket_server.server import build_server
from ticket_server.settings import Settings
from ticket_server.admin.seeding import seed
from tests.postgres import PostgresServer, postgres_for_tests

MODES = ["legacy", "2026-07-28"]
BACKENDS = ["sqlite", "postgresql"]
_databases = itertools.count()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sqlite_only: the test is about SQLite itself")
    config.addinivalue_line("markers", "slow: a bounded load-shaped test")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        only_sqlite = "db_path" in metafunc.fixturenames or metafunc.definition.get_closest_marker("sqlite_only")
        metafunc.parametrize("backend", ["sqlite"] if only_sqlite else BACKENDS)


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
    postgres.psql(f"DROP DATABASE IF EXISTS {name}")
    postgres.psql(f"CREATE DATABASE {name}")
    db.upgrade(postgres.url(name))
    asyncio.run(seed(Settings(database_url=postgres.url(name))))
    return name


@pytest.fixture
def database_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh copy of the sample database on ``backend``."""
    if backend == "sqlite":
        path = tmp_path / "tickets.db"
        shutil.copy(request.getfixturevalue("template_db"), path)
        yield sqlite_url(path)
        return
    postgres: PostgresServer = request.getfixturevalue("postgres")
    template = request.getfixturevalue("postgres_template")
    name = f"test_{os.getpid()}_{next(_databases)}"
    postgres.psql(f"CREATE DATABASE {name} TEMPLATE {template}")
    yield postgres.url(name)
    postgres.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def empty_database_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database (no schema) on ``backend``."""
    if backend == "sqlite":
        yield sqlite_url(tmp_path / "empty.db")
        return
    postgres: PostgresServer = request.getfixturevalue("postgres")
    name = f"empty_{os.getpid()}_{next(_databases)}"
    postgres.psql(f"CREATE DATABASE {name}")
    yield postgres.url(name)
    postgres.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def db_path(database_url: str) -> Path:
    """The SQLite file of this test's database (SQLite-only tests)."""
    return Path(database_url.removeprefix("sqlite+aiosqlite:///"))


@pytest.fixture
def settings(database_url: str) -> Settings:
    # Tests that are not about rate limits must never meet one.
    return Settings(database_url=database_url, database_timeout=3.0, tool_rate_limit="100000/minute")


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
