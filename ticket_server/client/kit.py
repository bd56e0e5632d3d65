"""The kit: every configured server's session, their tool definitions, and the
gatekeeper and executor every call passes.

The path of one call (``Kit.call``)::

    gatekeeper  known server -> listed tool -> pinned -> permission -> arguments
                -> approval (human-controlled or side-effecting: the approval callback)
    executor    deadline per attempt; a failed attempt (server gone, deadline) is
                retried only when the envelope says idempotent, with one idempotency
                key for every attempt (in ``_meta``)
    audit       one JSON line per event, under the turn's trace id

A server's confirmation requests (legacy ``elicitation/create``; the elicitations of a
2026-07-28 ``InputRequiredResult``, which the SDK routes to the same callback) go to the
same approval callback.
"""

from __future__ import annotations

import contextvars
import inspect
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from ticket_server.client.adapters import ToolBlock
from ticket_server.client.audit import Audit, Sink, current_trace_id
from ticket_server.client.config import Envelope, KitConfig, ServerConfig, ToolConfig
from ticket_server.client.session import CallTimeout, KitError, ServerSession, ServerUnavailable
from ticket_server.client.tools import InvalidArguments, ToolDefinition

# Where the kit puts a call's idempotency key: a namespaced `_meta` key, as MCP has no
# standard field for it. Every retry of one call carries the same key.
IDEMPOTENCY_META_KEY = "dev.ticket-server/idempotency-key"


class CallRefused(KitError):
    """The gatekeeper refused the call; nothing was sent. ``str()`` says why."""


@dataclass(frozen=True)
class ApprovalRequest:
    """What the approval callback decides on.

    ``kind="call"``: the kit is about to call a tool whose envelope asks for a person
    (``reasons`` names which fields: ``human_controlled``, ``side_effecting``).
    ``kind="elicitation"``: the server asks for a confirmation or input while a call
    runs; ``message`` and ``requested_schema`` are the server's, and the text is the
    server's words, not the kit's."""

    kind: Literal["call", "elicitation"]
    server: str
    tool: str | None
    arguments: Mapping[str, Any] | None
    envelope: Envelope | None
    reasons: tuple[str, ...]
    trace_id: str
    message: str | None = None
    requested_schema: Mapping[str, Any] | None = None


# The application's decision: True (approve; for an elicitation, answer every boolean
# field of the requested schema with true), False (refuse / decline), or for an
# elicitation a dict: the content to send.
Approval = bool | dict[str, Any]
Approver = Callable[[ApprovalRequest], Approval | Awaitable[Approval]]

_current_call: contextvars.ContextVar[tuple[str, Mapping[str, Any]] | None] = (
    contextvars.ContextVar("kit_current_call", default=None)
)


async def ask_on_terminal(request: ApprovalRequest) -> Approval:
    """An approval callback for command-line applications: the question on stderr, the
    answer (y/N) from stdin, read in a worker thread so the event loop keeps running."""
    if request.kind == "call":
        question = (
            f"Allow {request.server}.{request.tool}({json.dumps(dict(request.arguments or {}), ensure_ascii=False)})"
            f" [{', '.join(request.reasons)}; {'reversible' if request.envelope and request.envelope.reversible else 'irreversible'}]? [y/N] "
        )
    else:
        question = f"Server {request.server} asks (its words): {request.message!r}. Confirm? [y/N] "
    print(question, end="", file=sys.stderr, flush=True)
    answer = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
    return answer.strip().lower() in ("y", "yes")


def _result_bytes(result: Any) -> int:
    return len(
        json.dumps(result.model_dump(by_alias=True, mode="json", exclude_none=True)).encode()
    )


class Kit:
    """Every server of a ``KitConfig``, governed. Use as ``async with Kit(config, ...)``.

    ``approve``: the approval callback (sync or async); without one, every call that
    needs a person is refused and every elicitation declined. ``audit``: a sink for
    the JSON events (a callable taking a dict), an ``Audit``, or None for stderr.

    Enter and leave the kit in one task (its sessions' task groups belong to it, an
    anyio rule: not in a pytest fixture's separate setup and teardown tasks); between
    the two, any task of the same event loop may call it."""

    def __init__(
        self,
        config: KitConfig,
        *,
        approve: Approver | None = None,
        audit: Audit | Sink | None = None,
    ) -> None:
        self.config = config
        self.approve = approve
        self.audit = audit if isinstance(audit, Audit) else Audit(audit)
        self.sessions: dict[str, ServerSession] = {}
        self._listings: dict[str, list[ToolDefinition]] = {}
        self._stale: set[str] = set()
        self._list_locks: dict[str, anyio.Lock] = {}
        self._in_flight: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
        self._stack: AsyncExitStack | None = None

    async def __aenter__(self) -> Kit:
        self._stack = AsyncExitStack()
        for name, server in self.config.servers.items():
            self.sessions[name] = await self._stack.enter_async_context(
                ServerSession(
                    server,
                    audit=self.audit,
                    elicitation_callback=self._elicitation_for(name),
                    on_notification=self._notified,
                )
            )
            self._list_locks[name] = anyio.Lock()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._stack is not None:
            stack, self._stack = self._stack, None
            await stack.aclose()

    # -- tool definitions --------------------------------------------------------------

    def server(self, name: str) -> ServerConfig:
        try:
            return self.config.servers[name]
        except KeyError:
            raise CallRefused(f"unknown server {name!r}: not in the configuration") from None

    async def tools(self, server: str, *, refresh: bool = False) -> list[ToolDefinition]:
        """Every tool ``server`` lists (all pages), pinned or inert, in listing order.
        Listed once, again after the server said ``tools/list_changed`` or on ``refresh``."""
        config = self.server(server)
        async with self._list_locks[server]:
            if refresh or server in self._stale or server not in self._listings:
                self._stale.discard(server)
                listed = await self.sessions[server].run(
                    list_all_tools, deadline_seconds=config.deadline_seconds, what="tools/list"
                )
                before = {t.name for t in self._listings.get(server, [])}
                self._listings[server] = [self._define(config, tool) for tool in listed]
                self.audit.emit(
                    "list",
                    server=server,
                    tools=len(listed),
                    new=sorted({t.name for t in listed} - before) if before else [],
                    inert=sorted(t.name for t in self._listings[server] if not t.pinned),
                )
            return self._listings[server]

    def _define(self, config: ServerConfig, tool: Any) -> ToolDefinition:
        return ToolDefinition(
            server=config.name,
            tool=tool,
            envelope=config.envelope_for(tool.name, tool.annotations),
            pinned=config.is_pinned(tool.name),
            visible=config.is_visible(tool.name),
        )

    async def visible_tools(self) -> list[ToolDefinition]:
        """The tools the model is shown: pinned and visible, server by server. The
        others stay reachable by name through ``call`` (pinned ones) or not at all."""
        shown: list[ToolDefinition] = []
        for name in self.config.servers:
            shown.extend(t for t in await self.tools(name) if t.pinned and t.visible)
        return shown

    async def tool_block(self) -> ToolBlock:
        """The visible set in every provider's shape, with the route back for tool calls."""
        return ToolBlock(self, await self.visible_tools())

    def pin(self, server: str, tool: str, settings: ToolConfig | None = None) -> None:
        """Make ``tool`` live on ``server`` (a decision of the application, at run time)
        with ``settings`` (default: the server's envelope)."""
        config = self.server(server)
        tools = {**config.tools, tool: settings or ToolConfig()}
        updated = config.model_copy(update={"tools": tools})
        self.config = self.config.model_copy(
            update={"servers": {**self.config.servers, server: updated}}
        )
        self.sessions[server].config = updated
        self._stale.add(server)

    async def _notified(self, session: ServerSession, notification: Any) -> None:
        if getattr(notification, "method", None) == "notifications/tools/list_changed":
            self._stale.add(session.name)

    # -- gatekeeper and executor -------------------------------------------------------

    async def definition(self, server: str, tool: str) -> ToolDefinition:
        """The definition of a pinned ``tool``; ``CallRefused`` when unknown or inert."""
        found = next((t for t in await self.tools(server) if t.name == tool), None)
        if found is None:  # perhaps added since the last listing
            found = next(
                (t for t in await self.tools(server, refresh=True) if t.name == tool), None
            )
        if found is None:
            raise CallRefused(f"server {server} has no tool {tool!r}")
        if not found.pinned:
            raise CallRefused(
                f"tool {server}.{tool} is not pinned in the configuration: it stays inert"
            )
        return found

    async def call(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        deadline_seconds: float | None = None,
    ) -> Any:
        """Call ``server``'s ``tool`` through the gatekeeper and executor; the MCP
        ``CallToolResult`` (which may carry ``isError``).

        Raises ``CallRefused``, ``InvalidArguments`` (nothing sent), ``CallTimeout``,
        ``ServerUnavailable`` (after the retries an idempotent envelope allows)."""
        trace_id = current_trace_id()
        arguments = dict(arguments or {})
        try:
            definition = await self.definition(server, tool)
            envelope = definition.envelope
            if (
                envelope.required_permission
                and envelope.required_permission not in self.config.permissions
            ):
                raise CallRefused(
                    f"tool {server}.{tool} needs permission {envelope.required_permission!r}, "
                    "which this application does not hold"
                )
            definition.validate(arguments)
            if envelope.needs_approval:
                await self._approve_call(definition, arguments, trace_id)
        except (CallRefused, InvalidArguments) as exc:
            self.audit.emit(
                "refused", server=server, tool=tool, reason=str(exc), error=type(exc).__name__
            )
            raise
        return await self._execute(definition, arguments, deadline_seconds)

    async def _approve_call(
        self, definition: ToolDefinition, arguments: dict[str, Any], trace_id: str
    ) -> None:
        envelope = definition.envelope
        reasons = tuple(
            reason
            for reason, applies in (
                ("human_controlled", envelope.surface == "human_controlled"),
                ("side_effecting", envelope.side_effecting),
            )
            if applies
        )
        where = f"{definition.server}.{definition.name}"
        if self.approve is None:
            raise CallRefused(
                f"tool {where} needs a person's approval ({', '.join(reasons)}) and none can be asked"
            )
        request = ApprovalRequest(
            kind="call",
            server=definition.server,
            tool=definition.name,
            arguments=arguments,
            envelope=envelope,
            reasons=reasons,
            trace_id=trace_id,
        )
        answer = await self._ask(request)
        self.audit.emit(
            "approval",
            server=definition.server,
            tool=definition.name,
            kind="call",
            reasons=list(reasons),
            approved=bool(answer),
        )
        if not answer:
            raise CallRefused(f"tool {where}: a person refused the call")

    async def _ask(self, request: ApprovalRequest) -> Approval:
        assert self.approve is not None
        answer = self.approve(request)
        if inspect.isawaitable(answer):
            answer = await answer
        return answer

    async def _execute(
        self, definition: ToolDefinition, arguments: dict[str, Any], deadline: float | None
    ) -> Any:
        config = self.server(definition.server)
        deadline = deadline or config.deadline_for(definition.name)
        idempotent = definition.envelope.idempotent
        meta = {IDEMPOTENCY_META_KEY: uuid.uuid4().hex} if idempotent else None
        attempts = 1 + (config.retries if idempotent else 0)
        session = self.sessions[definition.server]
        in_flight = self._in_flight.setdefault(definition.server, [])
        this_call = (definition.name, arguments)

        async def op(client: Any) -> Any:
            token = _current_call.set((definition.name, arguments))
            try:
                return await client.call_tool(
                    definition.name, arguments, read_timeout_seconds=deadline, meta=meta
                )
            finally:
                _current_call.reset(token)

        in_flight.append(this_call)
        try:
            return await self._attempts(definition, session, op, attempts, deadline, idempotent)
        finally:
            in_flight.remove(this_call)

    async def _attempts(
        self,
        definition: ToolDefinition,
        session: ServerSession,
        op: Any,
        attempts: int,
        deadline: float,
        idempotent: bool,
    ) -> Any:
        for attempt in range(1, attempts + 1):
            started = time.perf_counter()
            fields: dict[str, Any] = {
                "tool": definition.name,
                "attempt": attempt,
                "idempotent": idempotent,
            }
            try:
                result = await session.run(
                    op, deadline_seconds=deadline, what=f"tools/call {definition.name}"
                )
            except (ServerUnavailable, CallTimeout) as exc:
                self.audit.emit(
                    "call",
                    server=definition.server,
                    outcome="failed",
                    error=str(exc),
                    ms=round((time.perf_counter() - started) * 1000, 1),
                    **fields,
                )
                if attempt == attempts:
                    raise
                continue
            except Exception as exc:
                self.audit.emit(
                    "call",
                    server=definition.server,
                    outcome="error",
                    error=str(exc)[:300],
                    ms=round((time.perf_counter() - started) * 1000, 1),
                    **fields,
                )
                raise KitError(f"{definition.server}.{definition.name}: {exc}") from exc
            self.audit.emit(
                "call",
                server=definition.server,
                outcome="isError" if result.is_error else "ok",
                result_bytes=_result_bytes(result),
                ms=round((time.perf_counter() - started) * 1000, 1),
                **fields,
            )
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    # -- the server's confirmation requests --------------------------------------------

    def _elicitation_for(self, server: str) -> Callable[..., Awaitable[Any]]:
        async def elicit(context: Any, params: Any) -> Any:
            from mcp_types import ElicitResult

            # 2026-07-28: the elicitation runs in the calling task; legacy: in the session's
            # reader, where the call is known only when it is the one in flight.
            current = _current_call.get()
            in_flight = self._in_flight.get(server, [])
            if current is None and len(in_flight) == 1:
                current = in_flight[0]
            schema: Any = getattr(params, "requested_schema", None)
            if hasattr(schema, "model_dump"):
                schema = schema.model_dump(by_alias=True, exclude_none=True)
            request = ApprovalRequest(
                kind="elicitation",
                server=server,
                tool=current[0] if current else None,
                arguments=current[1] if current else None,
                envelope=None,
                reasons=("server asks",),
                trace_id=current_trace_id(),
                message=getattr(params, "message", None),
                requested_schema=schema,
            )
            answer: Approval = False if self.approve is None else await self._ask(request)
            self.audit.emit("elicitation", server=server, tool=request.tool, approved=bool(answer))
            if not answer:
                return ElicitResult(action="decline")
            if isinstance(answer, dict):
                return ElicitResult(action="accept", content=answer)
            properties = (schema or {}).get("properties", {})
            return ElicitResult(
                action="accept",
                content={k: True for k, v in properties.items() if v.get("type") == "boolean"},
            )

        return elicit


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
