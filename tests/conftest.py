"""Shared fixtures: a migrated, seeded SQLite database per test, a server on it, and
in-memory clients in both protocol revisions."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fastmcp import Client, FastMCP

from ticket_server import db
from ticket_server.server import build_server
from ticket_server.settings import Settings
from ticket_server.tickets.seeding import seed

MODES = ["legacy", "2026-07-28"]


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


@pytest.fixture
def db_path(template_db: Path, tmp_path: Path) -> Path:
    path = tmp_path / "tickets.db"
    shutil.copy(template_db, path)
    return path


@pytest.fixture
def settings(db_path: Path) -> Settings:
    return Settings(database_url=sqlite_url(db_path), database_timeout=3.0)


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
