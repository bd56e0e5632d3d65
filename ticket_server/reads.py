"""The read gate: the path every request to list or read a resource, a resource
template or a prompt takes, on every transport, beside the call pipeline
(``pipeline.py``) that tools take.

- A list answers only what the caller may read (``access/policy.may_read``: the scopes
  in a component's tags; one without a scope, the manifest, is everyone's).
- A read the caller may not make answers exactly like a missing one.
- A read the caller may make is held to what a tool call is held to
  (``ReadGate._admit``): a rate-limit allowance of its own (its method and component
  name, e.g. ``resources/read attachment``), the caller's concurrency cap, a turn of its
  share of expensive work (``access/budget.py``, the budget the pipeline uses too), and
  the call deadline. Its refusals are JSON-RPC errors (``SERVER_ERROR``), in the words a
  tool's refusal uses; a prompt's argument no tool could take either (a NUL, a lone
  surrogate, a control character) is refused as ``INVALID_PARAMS`` before it runs.
- Every read, refused or not, is one ``CallRecord`` for the observers (the audit trail
  and the metrics), as a tool call is: its ``tool`` is that same name, its arguments the
  URI and the template's parameters (``{"uri": ..., "id": "SUP-4412"}``), or the
  prompt's arguments.

``completion/complete`` passes no FastMCP middleware, so its handler asks
``readable_queues()``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from time import monotonic
from typing import Any

from fastmcp.exceptions import FastMCPError, NotFoundError, PromptError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from mcp import types as mt
from mcp.shared.exceptions import MCPError

from ticket_server import compat
from ticket_server.access.audit import storable
from ticket_server.access.budget import CallerBudget
from ticket_server.access.callers import Caller, RegistryUnavailable
from ticket_server.access.context import CallRecord, Cause, Outcome, current_call
from ticket_server.access.identity import Identity, protocol_version_of, transport_of
from ticket_server.access.pacing import RefusalPace
from ticket_server.access.policy import READ_SCOPE, may_read
from ticket_server.access.ratelimit import ToolLimiter
from ticket_server.tools.errors import DATABASE_UNAVAILABLE, describe_unusable_arguments, shown

INVALID_PARAMS = -32602
"""JSON-RPC 2.0's Invalid params: a prompt argument no text takes (as FastMCP answers a
missing one)."""
SERVER_ERROR = -32000
"""JSON-RPC 2.0's implementation-defined server error (-32000 to -32099): a read refused
by the caller's limits. A tool's refusal is an ``isError`` result instead; a read has no
such result."""


class ReadGate(Middleware):
    def __init__(
        self,
        identity: Identity,
        limiter: ToolLimiter,
        budget: CallerBudget,
        *,
        deadline: float,
        pace: RefusalPace | None = None,
        ready: Callable[[], Awaitable[None]] | None = None,
        observers: Sequence[Callable[[CallRecord], None]] = (),
    ) -> None:
        """``deadline``: the most seconds a read may run; ``pace``: the turns of HTTP
        callers' refusals; ``ready``, when given, is awaited before any list or read (the
        stdio start-up checks); ``observers`` are given each read's finished record."""
        self.identity, self.limiter, self.budget = identity, limiter, budget
        self.deadline, self.pace, self.ready = deadline, pace, ready
        self.observers = tuple(observers)

    async def _reader(self, context: MiddlewareContext[Any] | None) -> tuple[Caller | None, str]:
        try:
            return await self.identity.resolve(transport_of(context))
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
        params = getattr(component, "matches", lambda _: None)(uri) or {}
        return await self._served(
            context,
            call_next,
            component,
            NotFoundError(f"Unknown resource: {uri!r}"),
            {"uri": uri, **params},
        )

    async def on_get_prompt(
        self,
        context: MiddlewareContext[mt.GetPromptRequestParams],
        call_next: CallNext[mt.GetPromptRequestParams, Any],
    ) -> Any:
        name = context.message.name
        server = context.fastmcp_context.fastmcp if context.fastmcp_context else None
        component = await server.get_prompt(name) if server is not None else None
        arguments = dict(context.message.arguments or {})
        return await self._served(
            context,
            call_next,
            component,
            NotFoundError(f"Unknown prompt: {shown(name)}"),
            arguments,
            # What no tool takes (a NUL, a lone surrogate, a control character) no prompt
            # takes either: PostgreSQL refuses the NUL as if the database were down.
            refused=describe_unusable_arguments(name, arguments) if component else None,
        )

    async def _served(
        self,
        context: MiddlewareContext[Any],
        call_next: CallNext[Any, Any],
        component: Any,
        missing: Exception,
        arguments: dict[str, Any],
        *,
        refused: str | None = None,
    ) -> Any:
        if self.ready is not None:
            await self.ready()
        name = f"{context.method} {component.name}" if component else str(context.method)
        record = CallRecord(
            tool=storable(name, 128),
            method=str(context.method),
            known_tool=component is not None,
            protocol_version=protocol_version_of(context),
            arguments=storable(json.dumps(arguments, ensure_ascii=False, default=str), 2_000),
        )
        reset = current_call.set(record)
        try:
            try:  # refused for want of the callers table: audited too, as a tool call is
                caller, record.transport = await self._reader(context)
            except MCPError:
                record.fail(Outcome.TOOL_ERROR, Cause.CALLERS_UNAVAILABLE)
                raise
            record.caller = caller
            if component is not None and not may_read(caller, component):
                record.fail(
                    Outcome.DENIED, Cause.NO_CALLER if caller is None else Cause.MISSING_SCOPE
                )
                raise missing
            if caller is None:  # only what needs no scope (the manifest)
                return _sized(record, await call_next(context))
            await self._admit(record, caller, name)
            if refused is not None:
                record.fail(Outcome.TOOL_ERROR, Cause.INVALID_ARGUMENTS)
                raise MCPError(code=INVALID_PARAMS, message=refused)
            with self.budget.running(caller.name):
                async with compat.deadline(self.deadline), self.budget.turn(caller.name):
                    return _sized(record, await call_next(context))
        except TimeoutError as exc:
            record.fail(Outcome.TOOL_ERROR, Cause.TIMEOUT)
            raise MCPError(
                code=SERVER_ERROR,
                message=f"The read took longer than {self.deadline:g} seconds and was stopped; "
                "try again later.",
            ) from exc
        except asyncio.CancelledError:
            record.fail(Outcome.CANCELLED)
            raise
        except Exception as exc:
            if record.outcome is Outcome.OK and component is None:
                unknown = (
                    Cause.UNKNOWN_PROMPT
                    if record.method == "prompts/get"
                    else Cause.UNKNOWN_RESOURCE
                )
                record.fail(Outcome.TOOL_ERROR, unknown)
            elif record.outcome is Outcome.OK:
                record.fail(Outcome.TOOL_ERROR, detail=storable(str(exc), 160) or "refused")
            if (
                component is not None
                and isinstance(exc, PromptError)
                and _unexpected(exc.__cause__)
            ):
                # FastMCP words a prompt's unexpected error with its text whatever
                # mask_error_details says (a tool's and a resource's it masks).
                raise PromptError(f"Error rendering prompt {component.name!r}") from exc
            raise
        finally:
            current_call.reset(reset)
            record.duration_ms = round((monotonic() - record.started) * 1000, 3)
            for observe in self.observers:
                observe(record)

    async def _admit(self, record: CallRecord, caller: Caller, name: str) -> None:
        """The read's rate-limit allowance (``name``), then the caller's concurrency cap;
        a refusal (HTTP callers' at a pace) raised as a ``SERVER_ERROR``."""
        refusal = await self.limiter.admit(caller, name)
        if refusal is None and not self.budget.busy(caller.name):
            return
        if refusal is None:
            record.fail(Outcome.RATE_LIMITED, Cause.BUSY)
        else:
            down = refusal.storage_unavailable
            record.fail(
                Outcome.RATE_LIMITED, Cause.LIMITS_UNAVAILABLE if down else Cause.LIMIT_REACHED
            )
        if self.pace is not None and record.transport == "http":
            await self.pace.turn(f"caller:{caller.name}")
        text = refusal.text if refusal is not None else self.budget.refusal("requests")
        raise MCPError(
            code=SERVER_ERROR, message=text, data=refusal.meta if refusal is not None else None
        )


def _unexpected(cause: BaseException | None) -> bool:
    """Whether ``cause``, what a prompt raised, is an unexpected error (a bug, a driver's),
    whose words are for the log only: neither one of FastMCP's nor a JSON-RPC error."""
    return cause is not None and not isinstance(cause, FastMCPError | MCPError)


def _sized(record: CallRecord, result: Any) -> Any:
    """``result`` (a FastMCP resource or prompt result), its size on ``record``: the
    characters or bytes of its contents, or of its messages' texts."""
    contents = getattr(result, "contents", None)
    if contents is not None:
        record.result_bytes = sum(compat.resource_content_size(c) for c in contents)
    else:
        texts = (getattr(m.content, "text", "") for m in getattr(result, "messages", []))
        record.result_bytes = sum(len(t) for t in texts if isinstance(t, str))
    return result
