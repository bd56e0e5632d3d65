"""Assertions shared by the tests."""

from __future__ import annotations

import json
import re

# What must never reach a client: SQL, driver and exception names, paths, tracebacks.
LEAK = re.compile(
    r"Traceback|File \"|sqlalchemy|sqlite|aiosqlite|asyncpg|SELECT |INSERT |"
    r"OperationalError|DatabaseError|Exception|/tmp/|/home/|/root/|\.py\b|\.db\b",
    re.IGNORECASE,
)


def text_of(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def assert_no_leak(text: str) -> None:
    match = LEAK.search(text)
    assert match is None, f"internal detail {match.group(0)!r} leaked in: {text!r}"


def assert_text_mirrors_structured(result) -> None:
    """A tool with an output schema returns structuredContent and the same JSON as text."""
    structured = result.structured_content
    assert structured is not None
    parsed = json.loads(text_of(result))
    if set(structured) == {"result"} and not isinstance(parsed, dict):
        parsed = {"result": parsed}
    assert parsed == structured


async def create_caller(
    database_url: str, name: str, scopes: tuple[str, ...] = ("tickets:read",), **options
) -> str:
    """Create a caller in the database at ``database_url``; returns its token."""
    from ticket_server.access.callers import open_store
    from ticket_server.settings import Settings

    store = open_store(Settings(database_url=database_url))
    try:
        token = await store.add(name, list(scopes), **options)
        assert token is not None
        return token
    finally:
        await store.aclose()


def column(database, sql: str) -> list[str]:
    """Run ``sql`` on SQLite (a file or URL) or PostgreSQL (a URL) and return the first
    column of every row as text: for tests that change the database behind the server's
    back or check an answer against the database itself."""
    from pathlib import Path

    url = f"sqlite+aiosqlite:///{database}" if isinstance(database, Path) else database
    if url.startswith("postgresql"):
        from tests.postgres import server_at

        server, name = server_at(url)
        return [line.split("|")[0] for line in server.psql(sql, name).splitlines()]
    import sqlite3

    with sqlite3.connect(url.removeprefix("sqlite+aiosqlite:///")) as conn:
        return [str(row[0]) for row in conn.execute(sql).fetchall()]


def scalar(database, sql: str) -> str:
    """The first value of ``column(database, sql)``, "" when there is none."""
    values = column(database, sql)
    return values[0] if values else ""


async def call_any(client, name: str, arguments: dict | None = None):  # type: ignore[no-untyped-def]
    """``client.call_tool`` that also returns a protocol error (an unknown or refused tool
    is a JSON-RPC error, C13) as ``(True, its message)``; a result as
    ``(result.is_error, its text)``."""
    import fastmcp
    from mcp.shared.exceptions import MCPError

    try:
        if isinstance(client, fastmcp.Client):
            result = await client.call_tool(name, arguments or {}, raise_on_error=False)
        else:  # the MCP SDK's Client: an isError result is returned, never raised
            result = await client.call_tool(name, arguments or {})
    except MCPError as exc:
        return True, str(exc)
    return bool(result.is_error), text_of(result)
