"""Helpers for the hardening tests: a client held open on a background event loop
(for Hypothesis, whose examples run synchronously), callers with tokens, the leak
check that tolerates echoed input."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Coroutine
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TypeVar

from fastmcp import Client, FastMCP

from tests.conftest import sqlite_url
from tests.helpers import LEAK
from ticket_server.settings import Settings

T = TypeVar("T")

# The masked fallback FastMCP sends for an exception no layer turned into a message:
# it means a bad input reached code that did not expect it.
MASKED_FALLBACK = re.compile(r"^Error calling tool\b")


def add_caller(db_path: Path, name: str, **options: Any) -> str:
    """Register a caller in the database at ``db_path``; returns its bearer token."""
    from ticket_server.access.callers import open_store

    async def main() -> str:
        store = open_store(Settings(database_url=sqlite_url(db_path)))
        try:
            token = await store.add(name, options.pop("scopes", ["tickets:read"]), **options)
        finally:
            await store.aclose()
        assert token is not None
        return token

    return asyncio.run(main())


class BackgroundClients:
    """In-memory ``fastmcp.Client`` connections, one per protocol revision, held open by
    one task of an event loop running in a thread (a server's locks belong to one loop).
    ``call`` is synchronous, so Hypothesis can drive it."""

    def __init__(self, server: FastMCP, modes: tuple[str, ...] = ("legacy", "2026-07-28")) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="bg-clients", daemon=True)
        self.thread.start()
        self._server, self._modes = server, modes
        self.clients: dict[str, Client] = {}
        self._done: asyncio.Event | None = None
        self._holder: Any = None

    def __enter__(self) -> BackgroundClients:
        opened: asyncio.Future[None] = self.run(self._future())

        async def hold() -> None:
            self._done = asyncio.Event()
            async with AsyncExitStack() as stack:
                for mode in self._modes:
                    self.clients[mode] = await stack.enter_async_context(
                        Client(self._server, mode=mode, timeout=60)
                    )
                opened.set_result(None)
                await self._done.wait()

        self._holder = asyncio.run_coroutine_threadsafe(hold(), self.loop)
        self.run(asyncio.wait_for(asyncio.shield(opened), 60))
        return self

    async def _future(self) -> asyncio.Future[None]:
        return self.loop.create_future()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(
        self, mode: str, name: str, arguments: dict[str, Any], timeout: float = 60
    ):  # -> mcp CallToolResult
        return self.run(self.clients[mode].call_tool_mcp(name, arguments), timeout)

    def __exit__(self, *exc: object) -> None:
        try:
            if self._done is not None:
                self.loop.call_soon_threadsafe(self._done.set)
            if self._holder is not None:
                self._holder.result(60)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


def _haystack(sent: Any) -> str:
    """Everything a message may legitimately echo of what was sent."""
    try:
        dumped = json.dumps(sent, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        dumped = ""
    return (repr(sent) + "\n" + dumped).lower()


def assert_no_leak_beyond_echo(text: str, sent: Any) -> None:
    """No internal detail (SQL, paths, exception names, tracebacks) in ``text``,
    except words that the client itself sent and the server echoes back."""
    haystack = _haystack(sent)
    for match in LEAK.finditer(text):
        assert match.group(0).lower() in haystack, (
            f"internal detail {match.group(0)!r} leaked in: {text[:500]!r}"
        )


def result_text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def has_lone_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)
