"""The call pipeline: the one path every tools/call takes, on every transport (stdio,
HTTP, in memory). A tools/call reads top to bottom in ``CallPipeline.on_call_tool``, each
stage a method of the same name:

0. before validation  (MCP SDK request middlewares) ``bound_raw_call``: an oversized
                      arguments object goes on as a sample; ``refuse_cursors``; a call
                      refused as malformed is recorded (``on_request``)
1. record             a typed ``CallRecord`` (``ToolCall.of``): trace id, tool name,
                      protocol revision, how many arguments were sent
2. ``stages``         ``identify`` (caller) -> ``find_tool`` (``KnownTool``: what is
                      fixed about it, found once) -> ``limit`` (per operation; unknown
                      and refused names share one allowance) -> ``authorize`` (scopes,
                      toolsets) ->
                      ``check_retirement`` -> ``check_arguments`` (bounded refusals, then
                      unusable values; only then kept for the audit; long file texts set
                      aside from FastMCP's validation)
3. ``execute``        the per-caller concurrency cap, then ``run_tool``: the caller's
                      share for an expensive tool, the call deadline, validation errors
                      reworded as one sentence naming each bound
4. observers          the finished record, to the audit writer and the metrics

A tool the caller may not call is answered exactly like an unknown tool. Refusals a model
can act on (rate limit, retired name, bad arguments, database unavailable) are ``isError``
results in words it can act on. What a tool needs is declared on the tool: its ``tags``
of the form ``resource:action`` (e.g. ``tickets:read``) are the scopes it needs (a tool
without one is nobody's: fail closed; a resource or prompt without one, the manifest, is
everyone's), and its module's ``POLICY`` (``access/policy.py``) says which arguments the
audit keeps only as digests and whether its work counts against the caller's share.
Resources, templates and prompts take the read gate (``reads.py``), held to the same
caller budget. Nothing is cached per connection: the 2026-07-28 revision has no
sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from itertools import islice
from time import monotonic
from typing import Any

from fastmcp.exceptions import NotFoundError, ToolError, ValidationError, to_mcp_error
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools import Tool, ToolResult
from mcp import types as mt
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError as PydanticValidationError

from ticket_server import compat
from ticket_server.access.audit import redact, result_size, sensitive_fields, storable
from ticket_server.access.budget import CallerBudget
from ticket_server.access.callers import Caller, RegistryUnavailable
from ticket_server.access.context import CallRecord, Cause, Outcome, current_call
from ticket_server.access.identity import Identity, protocol_version_of, transport_of
from ticket_server.access.pacing import RefusalPace
from ticket_server.access.policy import (
    WRITE_SCOPE,
    ToolPolicy,
    policy_of,
    required_scopes,
)
from ticket_server.access.ratelimit import ToolLimiter
from ticket_server.tools.arguments import whole_numbers
from ticket_server.tools.attachments import files_set_aside, set_aside
from ticket_server.tools.errors import (
    DATABASE_UNAVAILABLE,
    UnavailableError,
    describe_invalid_arguments,
    describe_refused_arguments,
    describe_unusable_arguments,
    model_error,
    shown,
)
from ticket_server.tools.toolsets import tools_in
from ticket_server.tools.versions import Deprecation, ToolVersions

Observer = Callable[[CallRecord], None]
MAX_ARGUMENT_KEYS = 64
"""Most top-level argument keys passed on to validation; no tool takes a tenth of it."""
_sent_keys: ContextVar[int | None] = ContextVar("ticket_server_sent_argument_keys", default=None)
UNLISTED = "(unlisted)"
"""The rate-limit key every name a caller may not call shares (unknown or out of scope)."""
MALFORMED_NAME = "(not a name)"
"""The audit's tool for a tools/call whose name is not a string."""
_RECORDED = frozenset({"tools/call", "resources/read", "prompts/get"})
"""The requests that yield an audit record each (a malformed one too: ``on_request``)."""
LIST_METHODS = frozenset(
    {"tools/list", "prompts/list", "resources/list", "resources/templates/list"}
)
"""The list methods: each answers its whole list in one page and never issues a cursor."""


def _not_recorded(count: int) -> str:
    return json.dumps({"[not recorded]": f"{count} argument{'s' if count != 1 else ''}"})


def params_problem(method: str, params: Any) -> str | None:
    """Why the params of a tools/call, prompts/get or resources/read cannot name what
    they ask for, or None (the MCP schema: ``name`` a string, a tool's ``arguments`` an
    object, a prompt's an object of strings, ``uri`` a string)."""
    if not isinstance(params, Mapping):
        return f"{method} params must be an object"
    if method == "resources/read":
        return (
            None if isinstance(params.get("uri"), str) else f"{method} params.uri must be a string"
        )
    if not isinstance(params.get("name"), str):
        return f"{method} params.name must be a string"
    arguments = params.get("arguments")
    if arguments is None:
        return None
    if method == "prompts/get" and not (
        isinstance(arguments, Mapping) and all(isinstance(v, str) for v in arguments.values())
    ):
        return f"{method} params.arguments must be an object of texts"
    if not isinstance(arguments, Mapping):
        return f"{method} params.arguments must be an object"
    return None


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
        budget: CallerBudget | None = None,
        pace: RefusalPace | None = None,
        ready: Callable[[], Awaitable[None]] | None = None,
        offered: frozenset[str] | None = None,
        policies: Mapping[str, ToolPolicy] | None = None,
    ) -> None:
        """``ready``, when given, is awaited before any tools/list or tools/call (the stdio
        start-up checks); ``deadline`` is the most seconds a tool or read may run;
        ``budget`` what one caller may have under way (``access/budget.py``, shared with the
        read gate); ``pace`` the turns of HTTP callers' refusals (``access/pacing.py``);
        ``offered`` the names of the tools the deployment's toolsets offer (None: every
        tool); ``policies`` what each tool declared (``access/policy.py``)."""
        self.identity, self.limiter, self.versions = identity, limiter, versions
        self.offered = offered
        self.observers = tuple(observers)
        self.deadline = deadline
        self.budget = budget or CallerBudget()
        self.pace = pace
        self.ready = ready
        self.policies: Mapping[str, ToolPolicy] = policies or {}
        # name -> what is fixed about the tool of that name: see ``find_tool``.
        self._tools: dict[str, KnownTool] = {}
        # The gatekeeper and the argument checks, in the order they run. Each returns a
        # refusal (an ``isError`` result), raises one, or lets the call go on. The limit
        # comes before the scopes on purpose: every name a caller may not call spends one
        # shared allowance, so probing names costs what calling does.
        self.stages: tuple[Callable[[ToolCall], Awaitable[ToolResult | None]], ...] = (
            self.identify,
            self.find_tool,
            self.limit,
            self.authorize,
            self.check_retirement,
            self.check_arguments,
        )

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
        listing = ctx.method in LIST_METHODS and isinstance(params, Mapping)
        if listing and params.get("cursor") not in (None, ""):
            raise MCPError(
                code=mt.INVALID_PARAMS,
                message=f"Invalid params: {ctx.method} is answered in one page and this "
                "server never issues a cursor for it; send it without `cursor`",
            )
        return await call_next(ctx)

    # --- a call or read refused as malformed before the pipeline or the read gate ---

    async def on_request(
        self, context: MiddlewareContext[Any], call_next: CallNext[Any, Any]
    ) -> Any:
        """FastMCP runs this pass with the raw params (a mapping, not a typed request)
        for a tools/call, resources/read or prompts/get only when it failed before
        ``on_call_tool`` (or the read gate's hooks) could run: params the SDK refuses (a
        name that is not a string, arguments that are not an object, a prompt argument
        that is not a text). Such a request is recorded here, so every call and read
        yields one record."""
        method = context.method
        if method not in _RECORDED or not isinstance(context.message, Mapping):
            return await call_next(context)
        try:
            return await call_next(context)
        except Exception as exc:
            params = context.message
            name, arguments = params.get("name"), params.get("arguments")
            if method == "tools/call":
                tool = storable(name, 128) if isinstance(name, str) else MALFORMED_NAME
            else:  # the read gate's name: the prompt's, where there is one
                tool = storable(f"{method} {name}" if isinstance(name, str) else str(method), 128)
            record = CallRecord(
                tool=tool,
                method=str(method),
                protocol_version=protocol_version_of(context),
                arguments=_not_recorded(len(arguments) if isinstance(arguments, Mapping) else 0),
            )
            try:
                record.caller, record.transport = await self.identity.resolve(transport_of(context))
            except RegistryUnavailable:
                pass
            record.fail(Outcome.TOOL_ERROR, Cause.MALFORMED)
            self._observe(record)
            problem = params_problem(str(method), params)
            if problem and isinstance(exc, PydanticValidationError):
                # The SDK answers "Invalid request parameters" alone: say which member.
                raise MCPError(
                    code=mt.INVALID_PARAMS, message=f"Invalid params: {problem}"
                ) from None
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
            caller, _ = await self.identity.resolve(transport_of(context))
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
        if caller is None or not caller.may_call(tool.tags):
            return False
        if caller.toolsets is not None:
            return tool.name in tools_in(caller.toolsets)
        return self.offered is None or tool.name in self.offered

    # --- tools/call: the stages, in order ----------------------------------------

    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        """One tools/call: ``record`` it, run ``STAGES`` in order (the first refusal
        answers), execute, then hand the finished record to the observers."""
        if self.ready is not None:
            await self.ready()
        call = ToolCall.of(context)
        reset = current_call.set(call.record)
        try:
            for stage in self.stages:
                refusal = await stage(call)
                if refusal is not None:
                    return _recorded(call.record, refusal)
            return _recorded(call.record, await self.execute(call, call_next))
        except asyncio.CancelledError:
            # notifications/cancelled, the client gone, or the server stopping: no answer
            # (a refusal whose client left while it waited its turn stays that refusal).
            if call.record.outcome is Outcome.OK:
                call.record.fail(Outcome.CANCELLED)
            raise
        except Exception as exc:  # ToolError (isError), NotFoundError (unknown or refused tool)
            _recorded_error(call.record, exc)
            raise
        finally:
            current_call.reset(reset)
            self._observe(call.record)

    async def identify(self, call: ToolCall) -> None:
        """Caller: who is calling (the registry unreadable: unavailable, audited)."""
        try:
            call.record.caller, call.record.transport = await self.identity.resolve(
                transport_of(call.context)
            )
        except RegistryUnavailable as exc:
            call.record.fail(Outcome.TOOL_ERROR, Cause.CALLERS_UNAVAILABLE)
            raise ToolError(DATABASE_UNAVAILABLE) from exc

    async def find_tool(self, call: ToolCall) -> None:
        """Tool: the definition by name and everything fixed about it (``KnownTool``),
        found once (FastMCP's get_tool runs the providers again on every call; the
        server's tools are fixed once it is built, and a name not found is looked up
        again)."""
        known = self._tools.get(call.name)
        if known is None and call.context.fastmcp_context is not None:
            tool = await call.context.fastmcp_context.fastmcp.get_tool(call.name)
            if tool is not None:
                known = self._tools[call.name] = KnownTool.of(tool, self.policies, self.versions)
        call.known, call.record.known_tool = known, known is not None
        call.permitted = known is not None and self.may_use(call.record.caller, known.tool)

    async def limit(self, call: ToolCall) -> ToolResult | None:
        """Rate limit, per operation: a deprecated name counts with its replacement, and
        every name this caller may not call (unknown, out of scope) on one allowance."""
        record = call.record
        if record.caller is None:
            return None
        known = call.known if call.permitted else None
        key = known.family if known is not None else UNLISTED
        write = known is not None and known.write
        shown_name = call.name if call.permitted else shown(call.name)
        refusal = await self.limiter.admit(record.caller, shown_name, key, write=write)
        if refusal is None:
            return None
        cause = Cause.LIMITS_UNAVAILABLE if refusal.storage_unavailable else Cause.LIMIT_REACHED
        retry = refusal.meta.get("dev.ticket-server/rate-limit", {}).get("retry_after_seconds")
        detail = None if refusal.storage_unavailable else f"{cause.value}; retry in {retry}s"
        record.fail(Outcome.RATE_LIMITED, cause, detail)
        await self._paced(call)
        return _refusal(refusal.text, refusal.meta)

    async def authorize(self, call: ToolCall) -> None:
        """Scopes and toolsets: a tool the caller may not call answers exactly like an
        unknown one; the audit says which it was."""
        record, known = call.record, call.known
        if known is None:
            record.fail(Outcome.TOOL_ERROR, Cause.UNKNOWN_TOOL)
        elif call.permitted:
            return
        elif record.caller is None:
            record.fail(Outcome.DENIED, Cause.NO_CALLER)
        elif not record.caller.may_call(known.tool.tags):
            needs = " ".join(sorted(required_scopes(known.tool))) or "a scope tag"
            record.fail(Outcome.DENIED, Cause.MISSING_SCOPE, f"needs {needs}")
        else:
            detail = "not in the toolsets offered to this caller"
            record.fail(Outcome.DENIED, Cause.NOT_OFFERED, detail)
        raise to_mcp_error(NotFoundError(f"Unknown tool: {shown(call.name)}"))

    async def check_retirement(self, call: ToolCall) -> ToolResult | None:
        """Retirement: a deprecated name past its date answers with its replacement."""
        assert call.known is not None  # ``authorize`` let the call on
        call.deprecation = call.known.deprecation
        if call.deprecation is None or not call.deprecation.retired(self.versions.clock()):
            return None
        call.record.fail(Outcome.TOOL_ERROR, Cause.RETIRED)
        return _refusal(call.deprecation.retired_message(), call.deprecation.meta())

    async def check_arguments(self, call: ToolCall) -> None:
        """Arguments: unknown keys and oversized objects refused at a bounded cost, before
        anything walks, validates or serialises them; then values no tool could use. Only
        then are they kept for the audit (until then it says how many were sent). Long
        file texts are then set aside from FastMCP's validation (``set_aside``)."""
        known = call.known
        assert known is not None
        properties = (known.tool.parameters or {}).get("properties", {})
        arguments = call.arguments
        refused = describe_refused_arguments(call.name, arguments, properties, sent=call.sent)
        if refused is None:
            call.record.arguments = redact(arguments, known.sensitive) if arguments else "{}"
            refused = describe_unusable_arguments(call.name, arguments)
        if refused is not None:
            call.record.fail(Outcome.TOOL_ERROR, Cause.INVALID_ARGUMENTS)
            raise model_error(refused)
        whole = whole_numbers(arguments, properties)
        if known.policy.files:
            whole, call.aside = set_aside(whole, known.policy.files)
        if whole is not arguments:
            message = call.context.message.model_copy(update={"arguments": whole})
            call.context = call.context.copy(message=message)

    async def execute(
        self, call: ToolCall, call_next: CallNext[mt.CallToolRequestParams, ToolResult]
    ) -> ToolResult:
        """Concurrency: at most ``concurrency`` calls of one caller run at once, so one
        caller's slow calls cannot hold every database connection and worker thread."""
        assert call.record.caller is not None
        caller = call.record.caller.name
        if self.budget.busy(caller):
            call.record.fail(Outcome.RATE_LIMITED, Cause.BUSY)
            await self._paced(call)
            return _refusal(self.budget.refusal("calls"))
        with self.budget.running(caller):
            return await self.run_tool(call, call_next)

    async def run_tool(
        self, call: ToolCall, call_next: CallNext[mt.CallToolRequestParams, ToolResult]
    ) -> ToolResult:
        """Fair share, then the tool under the deadline (its wait for a turn included): a
        caller's expensive calls beyond its share wait their turn (not refused: a refusal
        the client retries at once costs the loop as much again)."""
        known = call.known
        assert known is not None and call.record.caller is not None
        turn: contextlib.AbstractAsyncContextManager[Any] = contextlib.nullcontext()
        if known.policy.expensive:
            turn = self.budget.turn(call.record.caller.name)
        try:
            aside = files_set_aside(call.aside) if call.aside else contextlib.nullcontext()
            async with compat.deadline(self.deadline) as call.record.deadline, turn:
                with aside:
                    result = await call_next(call.context)
        except ValidationError as exc:
            call.record.fail(Outcome.TOOL_ERROR, Cause.INVALID_ARGUMENTS)
            raise model_error(_invalid(known.tool, exc)) from exc
        except TimeoutError as exc:
            call.record.fail(Outcome.TOOL_ERROR, Cause.TIMEOUT)
            raise ToolError(
                f"{known.tool.name} took longer than {self.deadline:g} seconds and was stopped; "
                "nothing was changed. Try again, or narrow the request."
            ) from exc
        if call.deprecation is not None:
            result.meta = {**(result.meta or {}), **call.deprecation.meta()}
        return result

    async def _paced(self, call: ToolCall) -> None:
        """Wait for an HTTP caller's refusal's turn (over stdio the one client is alone)."""
        caller = call.record.caller
        if self.pace is not None and caller is not None and call.record.transport == "http":
            call.record.started += await self.pace.turn(f"caller:{caller.name}")  # not its time

    def _observe(self, record: CallRecord) -> None:
        record.duration_ms = round((monotonic() - record.started) * 1000, 3)
        for observe in self.observers:
            observe(record)


@dataclass(frozen=True)
class KnownTool:
    """What is fixed about one tool for as long as the server runs: its definition, the
    policy it declared, the arguments the audit keeps only as digests, the operation
    its rate limit counts under (a deprecated name's replacement) and its deprecation."""

    tool: Tool
    policy: ToolPolicy
    sensitive: dict[str, str]
    family: str
    write: bool
    deprecation: Deprecation | None

    @classmethod
    def of(
        cls, tool: Tool, policies: Mapping[str, ToolPolicy], versions: ToolVersions
    ) -> KnownTool:
        policy = policy_of(policies, tool.name, tool.tags)
        return cls(
            tool=tool,
            policy=policy,
            sensitive=sensitive_fields(tool, policy.digests),
            family=versions.family(tool.name),
            write=WRITE_SCOPE in tool.tags,
            deprecation=versions.get(tool.name),
        )


@dataclass
class ToolCall:
    """One tools/call as the stages see it: what was asked, and what each stage found."""

    context: MiddlewareContext[mt.CallToolRequestParams]
    record: CallRecord
    name: str
    arguments: dict[str, Any]
    sent: int
    """How many argument keys the client sent (``bound_raw_call`` may pass on fewer)."""
    known: KnownTool | None = None
    """The tool called (None: no tool of that name), found by ``find_tool``."""
    permitted: bool = False
    deprecation: Deprecation | None = None
    aside: dict[str, str] = field(default_factory=dict)  # file texts set_aside took

    @classmethod
    def of(cls, context: MiddlewareContext[mt.CallToolRequestParams]) -> ToolCall:
        name, arguments = context.message.name, context.message.arguments or {}
        sent = _sent_keys.get() or len(arguments)
        record = CallRecord(
            tool=storable(name, 128),
            protocol_version=protocol_version_of(context),
            arguments=_not_recorded(sent),
        )
        return cls(context=context, record=record, name=name, arguments=arguments, sent=sent)


def _recorded(record: CallRecord, result: ToolResult) -> ToolResult:
    """``result`` with its outcome, size and (a refusal) its own words on the record."""
    if result.is_error and record.outcome is Outcome.OK:
        record.fail(Outcome.TOOL_ERROR)
    record.result_bytes = result_size(result)
    if result.is_error and record.detail is None:
        record.detail = _said(" ".join(getattr(block, "text", "") for block in result.content))
    return result


def _recorded_error(record: CallRecord, exc: Exception) -> None:
    if record.outcome is Outcome.OK:
        record.fail(Outcome.TOOL_ERROR)
    if isinstance(exc, UnavailableError):
        record.fail(Outcome.TOOL_ERROR, Cause.DATABASE_UNAVAILABLE)
    record.result_bytes = len(str(exc).encode("utf-8"))
    if record.detail is None:  # every refusal says why in the audit
        record.detail = _said(str(exc))


def _invalid(tool: Tool, exc: ValidationError) -> str:
    """A validation error reworded as one sentence naming each bound."""
    cause = exc.__cause__
    if not isinstance(cause, PydanticValidationError):
        return f"Invalid arguments for {tool.name}."
    return describe_invalid_arguments(tool.name, cause, tool.parameters or {})


MAX_DETAIL = 160


def _said(text: str) -> str:
    """A refusal's own words as its audit detail when no stage named a cause: the first
    sentence, at most ``MAX_DETAIL`` characters, stored safely."""
    first = text.strip().split(". ")[0] or "refused"
    return storable(first, MAX_DETAIL)
