"""The call pipeline: the one path every request for a tool, resource or prompt takes,
on every transport (stdio, HTTP, in memory). A tools/call reads top to bottom in
``CallPipeline.on_call_tool``:

0. raw         before the SDK validates anything (``bound_raw_call``): an oversized
               arguments object goes on as a sample; a call refused as malformed is
               recorded (``on_request``)
1. record      a typed ``CallRecord``: trace id, tool name, transport, protocol revision
2. gatekeeper  caller (identity) -> rate limit (per operation; unknown and refused
               names share one allowance) -> scopes -> retirement
3. arguments   unknown keys and oversized objects refused at a bounded cost, then values
               no tool can use, all before validation; validation errors reworded as
               one sentence naming each bound
4. executor    the per-caller concurrency cap, then the tool under the call deadline
               (``tool_timeout``)
5. observers   the finished record, to the audit writer and the metrics

A tool the caller may not call is answered exactly like an unknown tool. Refusals a model
can act on (rate limit, retired name, bad arguments, database unavailable) are ``isError``
results in words it can act on. Authorization is data on the component: its ``tags`` of
the form ``resource:action`` (e.g. ``tickets:read``) are the scopes it needs; a tool
without one is nobody's (fail closed), a resource or prompt without one (the manifest) is
everyone's. Resources, templates and prompts are listed and read through the same caller
resolution, and one the caller may not read answers exactly like a missing one.
``completion/complete`` passes no FastMCP middleware, so its handler asks
``readable_queues()``. Nothing is cached per connection: the 2026-07-28 revision has no
sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import replace
from itertools import islice
from time import monotonic
from typing import Any

from fastmcp.exceptions import NotFoundError, ToolError, ValidationError, to_mcp_error
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools import Tool, ToolResult
from mcp import types as mt
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError as PydanticValidationError

from ticket_server.access.audit import redact, result_size, sensitive_fields, storable
from ticket_server.access.callers import SCOPE, Caller, RegistryUnavailable
from ticket_server.access.context import CallRecord, Cause, Outcome, current_call
from ticket_server.access.identity import Identity
from ticket_server.access.ratelimit import ToolLimiter
from ticket_server.tools.errors import (
    DATABASE_UNAVAILABLE,
    UnavailableError,
    describe_invalid_arguments,
    describe_refused_arguments,
    describe_unusable_arguments,
    model_error,
)
from ticket_server.tools.toolsets import tools_in
from ticket_server.tools.versions import Deprecation, ToolVersions
from ticket_server.tools.writes import (
    AUDIT_DIGESTS,
    WRITE_SCOPE,
)  # write tools: the write limit, digests

Observer = Callable[[CallRecord], None]
MAX_TOOL_NAME_SHOWN = 80
READ_SCOPE = "tickets:read"
MAX_ARGUMENT_KEYS = 64
"""Most top-level argument keys passed on to validation; no tool takes a tenth of it."""
_sent_keys: ContextVar[int | None] = ContextVar("ticket_server_sent_argument_keys", default=None)
UNLISTED = "(unlisted)"
"""The rate-limit key every name a caller may not call shares (unknown or out of scope)."""
MALFORMED_NAME = "(not a name)"
"""The audit's tool for a tools/call whose name is not a string."""
EXPENSIVE = frozenset(
    {"search_tickets_v2", "search_tickets", "get_ticket", "get_customer", "find_similar_tickets"}
)
"""Read tools whose work grows with the data (searches, full reads): with the writes,
what ``CallPipeline``'s per-caller share bounds."""
LIST_METHODS = frozenset(
    {"tools/list", "prompts/list", "resources/list", "resources/templates/list"}
)
"""The list methods: each answers its whole list in one page and never issues a cursor."""


def _not_recorded(count: int) -> str:
    return json.dumps({"[not recorded]": f"{count} argument{'s' if count != 1 else ''}"})


def shown(name: str) -> str:
    """A tool name as quoted back to the client: repr (escapes control characters and
    lone surrogates), at most 80 characters (a client may send a megabyte of name)."""
    text = repr(name)
    return text if len(text) <= MAX_TOOL_NAME_SHOWN else text[: MAX_TOOL_NAME_SHOWN - 3] + "..."


def required_scopes(tool: Tool) -> frozenset[str]:
    return frozenset(tag for tag in tool.tags if SCOPE.match(tag))


def may_call(caller: Caller | None, tool: Tool) -> bool:
    return caller is not None and caller.may_call(tool.tags)


def may_read(caller: Caller | None, component: Any) -> bool:
    """Whether ``caller`` holds every scope tag of a resource, template or prompt (none: anyone)."""
    needed = {tag for tag in component.tags if SCOPE.match(tag)}
    return not needed or (caller is not None and needed <= caller.scopes)


def _refusal(text: str, meta: dict[str, Any] | None = None) -> ToolResult:
    return ToolResult(content=[mt.TextContent(type="text", text=text)], meta=meta, is_error=True)


class CallPipeline(Middleware):
    """The gatekeeper, executor and observers of every call, as one FastMCP middleware."""

    def __init__(
        self,
        identity: Identity,
        limiter: ToolLimiter,
        versions: ToolVersions,
        observers: Sequence[Observer],
        *,
        deadline: float,
        concurrency: int = 8,
        share: int = 2,
        ready: Callable[[], Awaitable[None]] | None = None,
        offered: frozenset[str] | None = None,
    ) -> None:
        """``ready``, when given, is awaited before any tools/list or tools/call (the stdio
        start-up checks); ``deadline`` is the most seconds a tool may run; ``concurrency``
        the most calls of one caller running at once; ``share`` the most of its
        expensive calls (``EXPENSIVE``, and every write) doing their work at once;
        ``offered`` the names of the tools the deployment's toolsets offer (None: every
        tool)."""
        self.identity, self.limiter, self.versions = identity, limiter, versions
        self.offered = offered
        self.observers = tuple(observers)
        self.deadline = deadline
        self.concurrency = concurrency
        self.running: dict[str, int] = {}
        self.share = share
        self.shares: dict[str, asyncio.Semaphore] = {}  # caller -> its expensive work
        self.ready = ready
        # A tool found once is kept by name with its sensitive argument names (FastMCP's
        # get_tool runs the providers again on every call); scopes are checked on every
        # call. The server's tools are fixed once it is built; a name not found is looked
        # up again.
        self._tools: dict[str, tuple[Tool, dict[str, str]]] = {}

    # --- before validation (an MCP SDK ServerMiddleware) --------------------------

    async def bound_raw_call(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        """Keep an oversized ``arguments`` object away from validation: validating (in the
        SDK, then in FastMCP) walks every key on the event loop. A tools/call with more
        than ``MAX_ARGUMENT_KEYS`` keys goes on with only the first of them and the count
        sent, which the arguments stage refuses at once."""
        params = ctx.params
        arguments = (
            params.get("arguments")
            if ctx.method == "tools/call" and isinstance(params, Mapping)
            else None
        )
        if not isinstance(arguments, dict) or len(arguments) <= MAX_ARGUMENT_KEYS:
            return await call_next(ctx)
        sample = dict(islice(arguments.items(), MAX_ARGUMENT_KEYS + 1))
        reset = _sent_keys.set(len(arguments))
        try:
            return await call_next(replace(ctx, params={**params, "arguments": sample}))
        finally:
            _sent_keys.reset(reset)

    @staticmethod
    async def refuse_cursors(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        """A list request carrying a ``cursor`` is Invalid params (-32602): every list is
        answered whole, so no cursor was ever issued, and answering the first page would
        let a client page for ever. An empty or null cursor counts as none."""
        params = ctx.params
        if ctx.method in LIST_METHODS and isinstance(params, Mapping):
            cursor = params.get("cursor")
            if cursor is not None and cursor != "":
                raise MCPError(
                    code=mt.INVALID_PARAMS,
                    message=f"Invalid params: {ctx.method} is answered in one page and this "
                    "server never issues a cursor for it; send it without `cursor`",
                )
        return await call_next(ctx)

    # --- a tools/call refused as malformed before the pipeline ---------------------

    async def on_request(
        self, context: MiddlewareContext[Any], call_next: CallNext[Any, Any]
    ) -> Any:
        """FastMCP runs this pass with the raw params (a mapping, not a typed request)
        for a tools/call only when it failed before ``on_call_tool`` could run: params
        the SDK refuses (a name that is not a string, arguments that are not an object).
        Such a call is recorded here, so every tools/call yields one record."""
        if context.method != "tools/call" or not isinstance(context.message, Mapping):
            return await call_next(context)
        try:
            return await call_next(context)
        except Exception:
            params = context.message
            name, arguments = params.get("name"), params.get("arguments")
            record = CallRecord(
                tool=storable(name, 128) if isinstance(name, str) else MALFORMED_NAME,
                protocol_version=_protocol_version(context),
                arguments=_not_recorded(len(arguments) if isinstance(arguments, Mapping) else 0),
            )
            try:
                record.caller, record.transport = await self.identity.resolve(_transport(context))
            except RegistryUnavailable:
                pass
            record.fail(Outcome.TOOL_ERROR, Cause.MALFORMED)
            record.duration_ms = round((monotonic() - record.started) * 1000, 3)
            for observe in self.observers:
                observe(record)
            raise

    # --- tools/list ------------------------------------------------------------

    async def on_list_tools(
        self,
        context: MiddlewareContext[mt.ListToolsRequest],
        call_next: CallNext[mt.ListToolsRequest, Sequence[Tool]],
    ) -> Sequence[Tool]:
        if self.ready is not None:
            await self.ready()
        tools = await call_next(context)
        try:
            caller, _ = await self.identity.resolve(_transport(context))
        except RegistryUnavailable as exc:
            if not self.identity.unconfigured:
                raise MCPError(code=-32603, message=DATABASE_UNAVAILABLE) from exc
            # No identity configured and the registry unreadable: list what the built-in
            # local caller would see (calls still answer "unavailable").
            from ticket_server.access.callers import BUILTIN_LOCAL

            caller = BUILTIN_LOCAL
        return [
            t for t in tools if self.may_use(caller, t) and self.versions.retired(t.name) is None
        ]

    def may_use(self, caller: Caller | None, tool: Tool) -> bool:
        """Whether ``caller`` may see and call ``tool``: it holds the tool's scopes and its
        toolsets (its own, else the deployment's) offer it."""
        if not may_call(caller, tool):
            return False
        assert caller is not None
        if caller.toolsets is not None:
            return tool.name in tools_in(caller.toolsets)
        return self.offered is None or tool.name in self.offered

    # --- resources, resource templates, prompts, completions --------------------

    async def _reader(self, context: MiddlewareContext[Any] | None) -> tuple[Caller | None, str]:
        try:
            return await self.identity.resolve(_transport(context) if context is not None else None)
        except RegistryUnavailable as exc:
            raise MCPError(code=-32603, message=DATABASE_UNAVAILABLE) from exc

    async def readable_queues(self) -> frozenset[str] | None:
        """The queues the current caller may read (``current_queues()``'s answer): None =
        every queue; empty = none (no caller, or no ``tickets:read``)."""
        caller, _ = await self._reader(None)
        if caller is None or READ_SCOPE not in caller.scopes:
            return frozenset()
        return caller.queues

    async def _listed(
        self, context: MiddlewareContext[Any], call_next: CallNext[Any, Sequence[Any]]
    ) -> Sequence[Any]:
        if self.ready is not None:
            await self.ready()
        components = await call_next(context)
        caller, _ = await self._reader(context)
        return [c for c in components if may_read(caller, c)]

    on_list_resources = _listed
    on_list_resource_templates = _listed
    on_list_prompts = _listed

    async def _served(
        self,
        context: MiddlewareContext[Any],
        call_next: CallNext[Any, Any],
        component: Any,
        missing: Exception,
    ) -> Any:
        if self.ready is not None:
            await self.ready()
        caller, transport = await self._reader(context)
        if component is not None and not may_read(caller, component):
            raise missing
        reset = current_call.set(CallRecord(tool="", transport=transport, caller=caller))
        try:
            return await call_next(context)
        finally:
            current_call.reset(reset)

    async def on_read_resource(
        self,
        context: MiddlewareContext[mt.ReadResourceRequestParams],
        call_next: CallNext[mt.ReadResourceRequestParams, Any],
    ) -> Any:
        uri = str(context.message.uri)
        server = context.fastmcp_context.fastmcp if context.fastmcp_context else None
        component = None
        if server is not None:
            component = await server.get_resource(uri) or await server.get_resource_template(uri)
        return await self._served(
            context, call_next, component, NotFoundError(f"Unknown resource: {uri!r}")
        )

    async def on_get_prompt(
        self,
        context: MiddlewareContext[mt.GetPromptRequestParams],
        call_next: CallNext[mt.GetPromptRequestParams, Any],
    ) -> Any:
        name = context.message.name
        server = context.fastmcp_context.fastmcp if context.fastmcp_context else None
        component = await server.get_prompt(name) if server is not None else None
        return await self._served(
            context, call_next, component, NotFoundError(f"Unknown prompt: {shown(name)}")
        )

    # --- tools/call ------------------------------------------------------------

    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        if self.ready is not None:
            await self.ready()
        record = CallRecord(
            tool=storable(context.message.name, 128), protocol_version=_protocol_version(context)
        )
        reset = current_call.set(record)
        try:
            result = await self._call(context, call_next, record)
            if result.is_error and record.outcome is Outcome.OK:
                record.fail(Outcome.TOOL_ERROR)
            record.result_bytes = result_size(result)
            if result.is_error and record.detail is None:
                record.detail = _said(
                    " ".join(getattr(block, "text", "") for block in result.content)
                )
            return result
        except asyncio.CancelledError:
            # notifications/cancelled, the client gone, or the server stopping: no answer.
            record.fail(Outcome.CANCELLED)
            raise
        except (
            Exception
        ) as exc:  # ToolError (isError), NotFoundError (unknown or refused tool), ...
            if record.outcome is Outcome.OK:
                record.fail(Outcome.TOOL_ERROR)
            if isinstance(exc, UnavailableError):
                record.fail(Outcome.TOOL_ERROR, Cause.DATABASE_UNAVAILABLE)
            record.result_bytes = len(str(exc).encode("utf-8"))
            if record.detail is None:  # every refusal says why in the audit
                record.detail = _said(str(exc))
            raise
        finally:
            current_call.reset(reset)
            record.duration_ms = round((monotonic() - record.started) * 1000, 3)
            for observe in self.observers:
                observe(record)

    async def _call(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
        record: CallRecord,
    ) -> ToolResult:
        name = context.message.name
        arguments = context.message.arguments or {}

        # Gatekeeper: caller -> scopes -> limits -> retirement.
        try:
            record.caller, record.transport = await self.identity.resolve(_transport(context))
        except RegistryUnavailable as exc:
            record.fail(Outcome.TOOL_ERROR, Cause.CALLERS_UNAVAILABLE)
            raise ToolError(DATABASE_UNAVAILABLE) from exc
        found = await self._tool(context, name)
        record.known_tool = found is not None
        # Arguments are kept for the audit only once they pass the cheap bounds below:
        # until then the record says how many were sent, never what.
        sent = _sent_keys.get() or len(arguments)
        record.arguments = _not_recorded(sent)
        tool = found[0] if found is not None else None
        permitted = tool is not None and self.may_use(record.caller, tool)
        if record.caller is not None:
            # Every name this caller may not call (unknown, out of scope) counts against
            # one allowance; a deprecated name counts with its replacement.
            key = self.versions.family(name) if permitted else UNLISTED
            write = permitted and tool is not None and WRITE_SCOPE in tool.tags
            refusal = await self.limiter.admit(
                record.caller, name if permitted else shown(name), key, write=write
            )
            if refusal is not None:
                cause = (
                    Cause.LIMITS_UNAVAILABLE if refusal.storage_unavailable else Cause.LIMIT_REACHED
                )
                retry = refusal.meta.get("dev.ticket-server/rate-limit", {})
                record.fail(
                    Outcome.RATE_LIMITED,
                    cause,
                    None
                    if refusal.storage_unavailable
                    else f"{cause.value}; retry in {retry.get('retry_after_seconds')}s",
                )
                return _refusal(refusal.text, refusal.meta)
        if tool is None:
            record.fail(Outcome.TOOL_ERROR, Cause.UNKNOWN_TOOL)
            raise to_mcp_error(NotFoundError(f"Unknown tool: {shown(name)}"))
        if not permitted:
            needs = " ".join(sorted(required_scopes(tool))) or "a scope tag"
            record.fail(
                Outcome.DENIED,
                *(
                    (Cause.NO_CALLER, None)
                    if record.caller is None
                    else (Cause.MISSING_SCOPE, f"needs {needs}")
                    if not may_call(record.caller, tool)
                    else (Cause.NOT_OFFERED, "not in the toolsets offered to this caller")
                ),
            )
            raise to_mcp_error(NotFoundError(f"Unknown tool: {shown(name)}"))
        assert record.caller is not None and found is not None
        deprecation = self.versions.get(name)
        if deprecation is not None and deprecation.retired(self.versions.clock()):
            record.fail(Outcome.TOOL_ERROR, Cause.RETIRED)
            return _refusal(deprecation.retired_message(), deprecation.meta())

        # Arguments: unknown keys and oversized objects refused at a bounded cost, before
        # anything walks, validates or serialises them; then what no tool could use.
        refused = describe_refused_arguments(
            name,
            arguments,
            (tool.parameters or {}).get("properties", {}),
            sent=sent,
        )
        if refused is None:
            record.arguments = redact(arguments, found[1]) if arguments else "{}"
            refused = describe_unusable_arguments(name, arguments)
        if refused is not None:
            record.fail(Outcome.TOOL_ERROR, Cause.INVALID_ARGUMENTS)
            raise model_error(refused)
        whole = whole_numbers(arguments, (tool.parameters or {}).get("properties", {}))
        if whole is not arguments:
            context = context.copy(message=context.message.model_copy(update={"arguments": whole}))

        # Concurrency: at most ``concurrency`` calls of one caller run at once, so one
        # caller's slow calls cannot hold every database connection and worker thread.
        caller = record.caller.name
        if self.running.get(caller, 0) >= self.concurrency:
            record.fail(Outcome.RATE_LIMITED, Cause.BUSY)
            return _refusal(
                f"This caller already has {self.concurrency} calls running; nothing was done. "
                "Wait for one to finish, then retry."
            )
        self.running[caller] = self.running.get(caller, 0) + 1
        try:
            return await self._execute(context, call_next, record, tool, deprecation)
        finally:
            self.running[caller] -= 1
            if not self.running[caller]:
                del self.running[caller]

    async def _execute(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
        record: CallRecord,
        tool: Tool,
        deprecation: Deprecation | None,
    ) -> ToolResult:
        name = tool.name
        # Fair shares: a caller's expensive calls beyond its share wait their turn (not
        # refused: a refusal the client retries at once costs the loop as much again).
        turn: contextlib.AbstractAsyncContextManager[Any] = contextlib.nullcontext()
        if name in EXPENSIVE or WRITE_SCOPE in tool.tags:
            caller = record.caller.name if record.caller is not None else ""
            turn = self.shares.setdefault(caller, asyncio.Semaphore(self.share))
        # Executor: the tool under the deadline (its wait for a turn included).
        try:
            async with asyncio.timeout(self.deadline) as record.deadline, turn:
                result = await call_next(context)
        except ValidationError as exc:
            record.fail(Outcome.TOOL_ERROR, Cause.INVALID_ARGUMENTS)
            cause = exc.__cause__
            if not isinstance(cause, PydanticValidationError):
                raise model_error(f"Invalid arguments for {name}.") from exc
            raise model_error(
                describe_invalid_arguments(name, cause, tool.parameters or {})
            ) from exc
        except TimeoutError as exc:
            record.fail(Outcome.TOOL_ERROR, Cause.TIMEOUT)
            raise ToolError(
                f"{name} took longer than {self.deadline:g} seconds and was stopped; nothing was "
                "changed. Try again, or narrow the request."
            ) from exc
        if deprecation is not None:
            result.meta = {**(result.meta or {}), **deprecation.meta()}
        return result

    async def _tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        name: str,
    ) -> tuple[Tool, dict[str, str]] | None:
        found = self._tools.get(name)
        if found is None and context.fastmcp_context is not None:
            tool = await context.fastmcp_context.fastmcp.get_tool(name)
            if tool is not None:
                found = self._tools[name] = (
                    tool,
                    sensitive_fields(tool, AUDIT_DIGESTS.get(tool.name, ())),
                )
        return found


def _admits_integer(schema: Any) -> bool:
    if not isinstance(schema, Mapping):
        return False
    if schema.get("type") == "integer":
        return True
    return any(_admits_integer(s) for s in schema.get("anyOf", ()))


def whole_numbers(arguments: dict[str, Any], properties: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` with each float that has no fraction (``3.0``) given as an int where
    the tool's schema says ``integer``: JSON Schema's ``integer`` admits such a number and
    models send them, while the tools validate strictly. The same dict when none is."""
    changed = {
        name: int(value)
        for name, value in arguments.items()
        if type(value) is float
        and value.is_integer()
        and abs(value) < 2**53
        and _admits_integer(properties.get(name))
    }
    return {**arguments, **changed} if changed else arguments


MAX_DETAIL = 160


def _said(text: str) -> str:
    """A refusal's own words as its audit detail when no stage named a cause: the first
    sentence, at most ``MAX_DETAIL`` characters, stored safely."""
    first = text.strip().split(". ")[0] or "refused"
    return storable(first, MAX_DETAIL)


def _transport(context: MiddlewareContext[Any]) -> str | None:
    return context.fastmcp_context.transport if context.fastmcp_context is not None else None


def _protocol_version(context: MiddlewareContext[Any]) -> str | None:
    try:
        return context.fastmcp_context.request_context.protocol_version  # type: ignore[union-attr]
    except Exception:  # no request context (e.g. a call made from inside the server)
        return None
