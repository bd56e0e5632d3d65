"""Looking at servers rather than calling tools: ``Kit.check`` (connect to every server
up front and report), and resources and prompts (listed, read and got through the
server's session under its deadline, each logged as a ``read`` event)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from ticket_server.client.audit import ms
from ticket_server.client.session import KitError

if TYPE_CHECKING:
    from ticket_server.client.kit import Kit

T = TypeVar("T")


@dataclass(frozen=True)
class ServerCheck:
    """What ``Kit.check`` found for one server."""

    server: str
    ok: bool
    error: str | None = None
    method: str | None = None
    protocol_version: str | None = None
    server_name: str | None = None
    server_version: str | None = None
    tools: int = 0
    pinned_missing: tuple[str, ...] = ()  # pinned in the configuration, not listed

    def line(self) -> str:
        if not self.ok:
            return f"{self.server}: FAILED: {self.error}"
        missing = (
            f"; pinned but not listed: {', '.join(self.pinned_missing)}"
            if self.pinned_missing
            else ""
        )
        return (
            f"{self.server}: ok ({self.method}, {self.protocol_version}, "
            f"{self.server_name} {self.server_version}), {self.tools} tool(s){missing}"
        )


@dataclass(frozen=True)
class CheckReport:
    servers: tuple[ServerCheck, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(s.ok and not s.pinned_missing for s in self.servers)

    def lines(self) -> list[str]:
        return [s.line() for s in self.servers]


async def check(kit: Kit) -> CheckReport:
    """Connect to every server now, list its tools, and report per server: the
    handshake, the tool count, pinned tools it does not list, or why it failed."""
    found: dict[str, ServerCheck] = {}

    async def one(name: str) -> None:
        config = kit.config.servers[name]
        try:
            listed = await kit.tools(
                name,
                refresh=True,
                deadline_seconds=config.connect_seconds + config.deadline_seconds,
            )
        except KitError as exc:
            found[name] = ServerCheck(name, ok=False, error=str(exc))
            return
        shake = kit.sessions[name].handshake
        names = {t.name for t in listed}
        found[name] = ServerCheck(
            name,
            ok=True,
            method=shake.method if shake else None,
            protocol_version=shake.protocol_version if shake else None,
            server_name=shake.server_name if shake else None,
            server_version=shake.server_version if shake else None,
            tools=len(listed),
            pinned_missing=tuple(sorted(set(config.tools) - names)),
        )

    async with anyio.create_task_group() as tg:
        for name in kit.config.servers:
            tg.start_soon(one, name)
    report = CheckReport(tuple(found[name] for name in kit.config.servers))
    for entry in report.servers:
        kit.audit.emit(
            "check",
            server=entry.server,
            ok=entry.ok,
            error=entry.error,
            pinned_missing=list(entry.pinned_missing),
        )
    return report


async def _read(kit: Kit, server: str, what: str, op: Callable[[Any], Awaitable[T]]) -> T:
    config = kit.server(server)
    started = time.perf_counter()
    outcome = "error"
    try:
        value = await kit.sessions[server].run(
            op, deadline_seconds=config.deadline_seconds, what=what
        )
        outcome = "ok"
        return value
    finally:
        kit.audit.emit(
            "read",
            server=server,
            what=what,
            outcome=outcome,
            ms=ms(time.perf_counter() - started),
        )


async def resources(kit: Kit, server: str) -> list[Any]:
    """Every resource ``server`` lists (all pages): MCP ``Resource`` objects."""

    async def op(client: Any) -> list[Any]:
        found, cursor = [], None
        while True:
            page = await client.list_resources(cursor=cursor)
            found.extend(page.resources)
            cursor = page.next_cursor
            if not cursor:
                return found

    return await _read(kit, server, "resources/list", op)


async def read_resource(kit: Kit, server: str, uri: str) -> list[Any]:
    """The contents of ``uri`` on ``server`` (text or blob ``ResourceContents``)."""

    async def op(client: Any) -> list[Any]:
        return list((await client.read_resource(uri)).contents)

    return await _read(kit, server, f"resources/read {uri}", op)


async def prompts(kit: Kit, server: str) -> list[Any]:
    """Every prompt ``server`` lists (all pages): MCP ``Prompt`` objects."""

    async def op(client: Any) -> list[Any]:
        found, cursor = [], None
        while True:
            page = await client.list_prompts(cursor=cursor)
            found.extend(page.prompts)
            cursor = page.next_cursor
            if not cursor:
                return found

    return await _read(kit, server, "prompts/list", op)


async def get_prompt(
    kit: Kit, server: str, name: str, arguments: Mapping[str, str] | None = None
) -> Any:
    """``server``'s prompt ``name`` filled with ``arguments``: a ``GetPromptResult``."""

    async def op(client: Any) -> Any:
        return await client.get_prompt(name, dict(arguments or {}))

    return await _read(kit, server, f"prompts/get {name}", op)


async def list_all_tools(client: Any) -> list[Any]:
    """Every tool a connected ``mcp.Client`` lists, all pages, fresh from the server."""
    tools, cursor = [], None
    while True:
        # The kit keeps its own listing; the SDK's response cache must not answer for the server.
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
