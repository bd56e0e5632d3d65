"""The kit: every configured server's session, their tool definitions, and the
gatekeeper and executor every call passes.

The path of one call (``Kit.call``)::

    gatekeeper  known server -> listed tool -> pinned -> permission -> arguments (JSON
                Schema) -> approval (human-controlled or side-effecting: the approver)
    executor    one deadline for the whole call (listing, connecting, every attempt and
                the backoff between them); a failed attempt (server gone, deadline) is
                retried only when the envelope says idempotent, with one idempotency key
                for every attempt (in ``_meta``), after a backoff with jitter; time a
                person spends answering the server is not counted, and said so
    audit       one ``call`` record per call whatever its fate (ok, isError, refused,
                invalid, timeout, unavailable, cancelled, error), one ``attempt`` per
                attempt, every event under the turn's trace id

Every request a server makes of the client goes to a policy with a safe default:
elicitation (form and URL modes) to the approver (none: declined), its answer checked
against the requested schema; ``sampling/createMessage`` to ``sample`` (none:
refused); ``roots/list`` to ``roots`` (none: refused). Each is logged with the tool and
arguments of the call it came from.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any, TypeVar

import anyio
from pydantic import TypeAdapter, ValidationError

from ticket_server.client import survey
from ticket_server.client.adapters import ToolBlock
from ticket_server.client.audit import (
    Audit,
    Sink,
    audited_arguments,
    current_trace_id,
    ms,
    result_bytes,
)
from ticket_server.client.config import KitConfig, ServerConfig, ToolConfig, deadline_of
from ticket_server.client.policies import (
    ApprovalRequest,
    Approver,
    ProgressCallback,
    RootsPolicy,
    SamplingPolicy,
    ServerRequests,
    _Call,
    _current_call,
    ask_on_terminal,
    progress_callback,
)
from ticket_server.client.session import CallTimeout, KitError, ServerSession, ServerUnavailable
from ticket_server.client.survey import CheckReport, list_all_tools
from ticket_server.client.tools import InvalidArguments, ToolDefinition

# Re-exported: applications import these from here.
__all__ = [
    "ApprovalRequest",
    "CallRefused",
    "CheckReport",
    "Kit",
    "ToolFailed",
    "ask_on_terminal",
    "list_all_tools",
]

T = TypeVar("T")

# Where the kit puts a call's idempotency key: a namespaced `_meta` key, as MCP has no
# standard field for it. Every retry of one call carries the same key.
IDEMPOTENCY_META_KEY = "dev.ticket-server/idempotency-key"


class CallRefused(KitError):
    """The gatekeeper refused the call; nothing was sent. ``str()`` says why."""


class ToolFailed(KitError):
    """The tool answered ``isError`` (raised only with ``raise_on_error=True``, as
    ``fastmcp.Client`` does); ``result`` is the ``CallToolResult``."""

    def __init__(self, message: str, result: Any) -> None:
        super().__init__(message)
        self.result = result


class Kit(ServerRequests):
    """Every server of a ``KitConfig``, governed. Use as ``async with Kit(config, ...)``.

    ``approve``: the approval callback (sync or async) for calls and elicitations;
    without one, every call that needs a person is refused and every elicitation
    declined. ``sample``: the sampling policy (none: refused); ``roots``: the roots
    shown to servers (none: refused). ``on_progress(progress, total, message)``: the
    progress of every call (``call`` takes one per call too). ``audit``: a sink for the
    JSON events (a callable taking a dict), an ``Audit``, or None for stderr.
    ``check=True``: connect to every server on entry and raise ``KitError`` naming the
    ones that fail (``check()`` reports without raising).

    Enter and leave the kit in one task (its sessions' task groups belong to it, an
    anyio rule: not in a pytest fixture's separate setup and teardown tasks); between
    the two, any task of the same event loop may call it."""

    def __init__(
        self,
        config: KitConfig,
        *,
        approve: Approver | None = None,
        sample: SamplingPolicy | None = None,
        roots: RootsPolicy | None = None,
        on_progress: ProgressCallback | None = None,
        audit: Audit | Sink | None = None,
        check: bool = False,
    ) -> None:
        self.config = config
        self.approve = approve
        self.sample = sample
        self.roots = roots
        self.on_progress = on_progress
        self.check_on_entry = check
        self.audit = audit if isinstance(audit, Audit) else Audit(audit)
        self.sessions: dict[str, ServerSession] = {}
        self._listings: dict[str, list[ToolDefinition]] = {}
        self._stale: set[str] = set()
        self._list_locks: dict[str, anyio.Lock] = {}
        self._in_flight: dict[str, list[_Call]] = {}
        self._stack: AsyncExitStack | None = None

    async def __aenter__(self) -> Kit:
        self._stack = AsyncExitStack()
        for name, server in self.config.servers.items():
            self.sessions[name] = await self._stack.enter_async_context(
                ServerSession(
                    server,
                    audit=self.audit,
                    elicitation_callback=self._elicitation_for(name),
                    sampling_callback=self._sampling_for(name),
                    list_roots_callback=self._roots_for(name),
                    on_notification=self._notified,
                )
            )
            self._list_locks[name] = anyio.Lock()
        if self.check_on_entry:
            report = await self.check()
            if not report.ok:
                await self.__aexit__(None, None, None)
                raise KitError("configuration check failed: " + "; ".join(report.lines()))
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

    async def tools(
        self, server: str, *, refresh: bool = False, deadline_seconds: float | None = None
    ) -> list[ToolDefinition]:
        """Every tool ``server`` lists (all pages), pinned or inert, in listing order.
        Listed once, again after the server said ``tools/list_changed`` or on ``refresh``;
        waiting for another task's listing counts against ``deadline_seconds``."""
        config = self.server(server)
        budget = deadline_seconds if deadline_seconds is not None else config.deadline_seconds
        deadline = anyio.current_time() + budget
        with anyio.move_on_after(budget) as waiting:
            await self._list_locks[server].acquire()
        if waiting.cancelled_caught:
            raise CallTimeout(
                f"server {server}: tools/list: no answer within {budget:g} s "
                "(another listing of this server was still running)"
            )
        try:
            if refresh or server in self._stale or server not in self._listings:
                self._stale.discard(server)
                try:
                    listed = await self.sessions[server].run(
                        list_all_tools,
                        deadline_seconds=max(deadline - anyio.current_time(), 0.001),
                        what="tools/list",
                    )
                except KitError:
                    self._stale.add(server)
                    raise
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
        finally:
            self._list_locks[server].release()

    def _define(self, config: ServerConfig, tool: Any) -> ToolDefinition:
        return ToolDefinition(
            server=config.name,
            tool=tool,
            envelope=config.envelope_for(tool.name, tool.annotations),
            pinned=config.is_pinned(tool.name),
            visible=config.is_visible(tool.name),
        )

    def _permitted(self, definition: ToolDefinition) -> bool:
        needed = definition.envelope.required_permission
        return needed is None or needed in self.config.permissions

    async def visible_tools(self, missing: dict[str, str] | None = None) -> list[ToolDefinition]:
        """The tools the model is shown: pinned, visible, and allowed by the
        application's permissions, server by server (listed concurrently). The others
        stay reachable by name through ``call`` (pinned ones) or not at all.

        With ``missing`` (a dict), a server that cannot be listed is named there with
        the reason and the others are still returned; without it, its error is raised."""
        listings: dict[str, list[ToolDefinition]] = {}
        failures: dict[str, KitError] = {}

        async def one(name: str) -> None:
            try:
                listings[name] = await self.tools(name)
            except KitError as exc:
                failures[name] = exc

        async with anyio.create_task_group() as tg:
            for name in self.config.servers:
                tg.start_soon(one, name)
        if failures and missing is None:
            raise next(iter(failures.values()))
        if missing is not None:
            missing.update({name: str(exc) for name, exc in failures.items()})
        shown: list[ToolDefinition] = []
        for name in self.config.servers:
            shown.extend(
                t for t in listings.get(name, []) if t.pinned and t.visible and self._permitted(t)
            )
        return shown

    async def tool_block(self) -> ToolBlock:
        """The visible set in every provider's shape, with the route back for tool calls:
        built from the servers that answer; ``block.missing`` names the others and why."""
        missing: dict[str, str] = {}
        shown = await self.visible_tools(missing)
        for name, why in missing.items():
            self.audit.emit("unavailable", server=name, reason=why)
        return ToolBlock(self, shown, missing)

    async def check(self) -> CheckReport:
        """Connect to every server now, list its tools, and report per server: the
        handshake, the tool count, pinned tools it does not list, or why it failed."""
        return await survey.check(self)

    async def resources(self, server: str) -> list[Any]:
        """Every resource ``server`` lists (all pages): MCP ``Resource`` objects."""
        return await survey.resources(self, server)

    async def read_resource(self, server: str, uri: str) -> list[Any]:
        """The contents of ``uri`` on ``server`` (text or blob ``ResourceContents``)."""
        return await survey.read_resource(self, server, uri)

    async def prompts(self, server: str) -> list[Any]:
        """Every prompt ``server`` lists (all pages): MCP ``Prompt`` objects."""
        return await survey.prompts(self, server)

    async def get_prompt(
        self, server: str, name: str, arguments: Mapping[str, str] | None = None
    ) -> Any:
        """``server``'s prompt ``name`` filled with ``arguments``: a ``GetPromptResult``."""
        return await survey.get_prompt(self, server, name, arguments)

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

    async def definition(
        self, server: str, tool: str, *, deadline_seconds: float | None = None
    ) -> ToolDefinition:
        """The definition of a pinned ``tool``; ``CallRefused`` when unknown or inert."""
        started = anyio.current_time()

        def left() -> float | None:
            if deadline_seconds is None:
                return None
            return max(deadline_seconds - (anyio.current_time() - started), 0.001)

        found = next(
            (t for t in await self.tools(server, deadline_seconds=left()) if t.name == tool), None
        )
        if found is None:  # perhaps added since the last listing
            listed = await self.tools(server, refresh=True, deadline_seconds=left())
            found = next((t for t in listed if t.name == tool), None)
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
        on_progress: ProgressCallback | None = None,
        raise_on_error: bool = False,
    ) -> Any:
        """Call ``server``'s ``tool`` through the gatekeeper and executor; the MCP
        ``CallToolResult`` (which may carry ``isError``; with ``raise_on_error`` that is
        ``ToolFailed`` instead).

        ``deadline_seconds`` (above 0; default: the tool's, else the server's) bounds the whole
        call: listing, connecting, every attempt and the backoff between them; the time
        a person spends answering the approver (before the call, or for the server
        while it runs) is not counted. ``on_progress(progress, total, message)`` sees the
        server's progress notifications for this call.

        Raises ``CallRefused``, ``InvalidArguments`` (nothing sent), ``CallTimeout``,
        ``ServerUnavailable`` (after the retries an idempotent envelope allows)."""
        trace_id = current_trace_id()
        arguments = dict(arguments or {})
        configured = self.config.servers.get(server)
        budget = deadline_of(deadline_seconds, configured, tool)
        call = _Call(tool, arguments, trace_id, deadline=anyio.current_time() + budget)
        started = time.perf_counter()
        record: dict[str, Any] = {"tool": tool, "deadline_seconds": budget}
        if configured is not None:
            audited = audited_arguments(configured.audit_arguments_for(tool), arguments)
            if audited is not None:
                record["arguments"] = audited
        outcome = "error"
        try:
            result = await self._call(server, tool, arguments, call, record, on_progress)
            outcome = "isError" if result.is_error else "ok"
            record["result_bytes"] = result_bytes(result)
        except CallRefused as exc:
            outcome, record["reason"] = "refused", str(exc)
            raise
        except InvalidArguments as exc:
            outcome, record["reason"] = "invalid", str(exc)
            raise
        except CallTimeout as exc:
            outcome, record["reason"] = "timeout", str(exc)
            raise
        except ServerUnavailable as exc:
            outcome, record["reason"] = "unavailable", str(exc)
            raise
        except KitError as exc:
            outcome, record["reason"] = "error", str(exc)
            raise
        except anyio.get_cancelled_exc_class():
            outcome = "cancelled"
            raise
        finally:
            self.audit.emit(
                "call",
                server=server,
                trace_id=trace_id,
                outcome=outcome,
                ms=ms(time.perf_counter() - started - call.person_seconds),
                person_ms=ms(call.person_seconds),
                **record,
            )
        if raise_on_error and result.is_error:
            text = "".join(getattr(block, "text", "") for block in result.content)
            raise ToolFailed(f"{server}.{tool}: {text}", result)
        return result

    async def call_typed(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None,
        result_type: type[T],
        **options: Any,
    ) -> T:
        """``call`` with ``raise_on_error``, the structured result validated as
        ``result_type`` (a pydantic model, a TypedDict, ...; FastMCP's ``{"result": x}``
        wrapping of a non-object result is unwrapped). ``KitError`` when it does not fit."""
        result = await self.call(server, tool, arguments, raise_on_error=True, **options)
        data = result.structured_content
        if data is None:
            raise KitError(f"{server}.{tool}: the result has no structured content")
        definition = next(t for t in self._listings[server] if t.name == tool)
        output = getattr(definition.tool, "output_schema", None) or {}
        if output.get("x-fastmcp-wrap-result") and isinstance(data, dict) and "result" in data:
            data = data["result"]
        try:
            return TypeAdapter(result_type).validate_python(data)
        except ValidationError as exc:
            raise KitError(
                f"{server}.{tool}: the result does not fit {getattr(result_type, '__name__', result_type)}: "
                + "; ".join(e["msg"] for e in exc.errors()[:3])
            ) from exc

    async def _call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        call: _Call,
        record: dict[str, Any],
        on_progress: ProgressCallback | None,
    ) -> Any:
        self.server(server)
        definition = await self.definition(
            server, tool, deadline_seconds=max(call.remaining(), 0.001)
        )
        envelope = definition.envelope
        if not self._permitted(definition):
            raise CallRefused(
                f"tool {server}.{tool} needs permission {envelope.required_permission!r}, "
                "which this application does not hold"
            )
        definition.validate(arguments)
        if envelope.needs_approval:
            call.person_asked()
            try:
                await self._approve_call(definition, arguments, call.trace_id)
            finally:
                call.person_answered()
        return await self._execute(definition, arguments, call, record, on_progress)

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
        answer = await self._ask(self.approve, request)
        self.audit.emit(
            "approval",
            server=definition.server,
            tool=definition.name,
            kind="call",
            reasons=list(reasons),
            approved=answer is True,
        )
        if answer is False:
            raise CallRefused(f"tool {where}: a person refused the call")
        if answer is not True:  # only True approves: a truthy "no" or dict never runs a call
            failed = "failed" if answer is None else f"answered a {type(answer).__name__}"
            why = f"the approval callback {failed}, so the call was not made"
            raise CallRefused(f"tool {where}: {why}")

    async def _execute(
        self,
        definition: ToolDefinition,
        arguments: dict[str, Any],
        call: _Call,
        record: dict[str, Any],
        on_progress: ProgressCallback | None,
    ) -> Any:
        config = self.server(definition.server)
        idempotent = definition.envelope.idempotent
        key = uuid.uuid4().hex if idempotent else None
        meta = {IDEMPOTENCY_META_KEY: key} if key else None
        if key:
            record["idempotency_key"] = key
        attempts = 1 + (config.retries if idempotent else 0)
        session = self.sessions[definition.server]
        in_flight = self._in_flight.setdefault(definition.server, [])
        progress = progress_callback(
            self.audit, definition.server, definition.name, call, on_progress, self.on_progress
        )

        async def op(client: Any) -> Any:
            token = _current_call.set(call)
            try:
                return await client.call_tool(
                    definition.name, arguments, progress_callback=progress, meta=meta
                )
            finally:
                _current_call.reset(token)

        in_flight.append(call)
        try:
            return await self._attempts(definition, session, op, attempts, call, record)
        finally:
            in_flight.remove(call)

    async def _attempts(
        self,
        definition: ToolDefinition,
        session: ServerSession,
        op: Any,
        attempts: int,
        call: _Call,
        record: dict[str, Any],
    ) -> Any:
        config = self.server(definition.server)
        for attempt in range(1, attempts + 1):
            record["attempts"] = attempt
            started = time.perf_counter()
            person_before = call.person_seconds
            fields: dict[str, Any] = {"tool": definition.name, "attempt": attempt}
            remaining = call.remaining()
            if remaining <= 0:
                raise CallTimeout(
                    f"server {definition.server}: tools/call {definition.name}: "
                    f"the call's deadline passed before attempt {attempt}"
                )
            try:
                result = await session.run(
                    op,
                    deadline_seconds=remaining,
                    what=f"tools/call {definition.name}",
                    on_request=call.track,
                )
            except (ServerUnavailable, CallTimeout) as exc:
                self.audit.emit(
                    "attempt",
                    server=definition.server,
                    outcome="failed",
                    error=str(exc),
                    ms=ms(time.perf_counter() - started - (call.person_seconds - person_before)),
                    **fields,
                )
                if attempt == attempts or isinstance(exc, CallTimeout):
                    if call.person_seconds and isinstance(exc, CallTimeout):
                        raise CallTimeout(
                            f"{exc} (not counting {call.person_seconds:.1f} s spent waiting for a person)"
                        ) from exc
                    raise
                # Exponential backoff with full jitter, never past the call's deadline.
                pause = random.uniform(0, config.retry_backoff_seconds * 2 ** (attempt - 1))
                if pause >= call.remaining():
                    raise
                await anyio.sleep(pause)
                continue
            except Exception as exc:
                self.audit.emit(
                    "attempt",
                    server=definition.server,
                    outcome="error",
                    error=str(exc)[:300],
                    ms=ms(time.perf_counter() - started),
                    **fields,
                )
                raise KitError(f"{definition.server}.{definition.name}: {exc}") from exc
            self.audit.emit(
                "attempt",
                server=definition.server,
                outcome="isError" if result.is_error else "ok",
                result_bytes=result_bytes(result),
                ms=ms(time.perf_counter() - started - (call.person_seconds - person_before)),
                **fields,
            )
            return result
        raise AssertionError("unreachable")  # pragma: no cover
