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

import contextvars
import hashlib
import inspect
import json
import random
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import anyio
from pydantic import TypeAdapter, ValidationError

from ticket_server.client.adapters import ToolBlock
from ticket_server.client.audit import Audit, Sink, current_trace_id
from ticket_server.client.config import Envelope, KitConfig, ServerConfig, ToolConfig
from ticket_server.client.session import (
    CallTimeout,
    KitError,
    ServerSession,
    ServerUnavailable,
    _Request,
)
from ticket_server.client.tools import InvalidArguments, ToolDefinition, problems, schema_validator

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


@dataclass(frozen=True)
class ApprovalRequest:
    """What a policy callback decides on.

    ``kind="call"``: the kit is about to call a tool whose envelope asks for a person
    (``reasons`` names which fields: ``human_controlled``, ``side_effecting``).
    ``kind="elicitation"``: the server asks a person while a call runs; ``message`` and
    ``requested_schema`` (form mode) or ``url`` (URL mode: the person is to open it)
    are the server's words, not the kit's. ``kind="sampling"``: the server asks for a
    model completion (``params``: the ``sampling/createMessage`` params as JSON).
    ``kind="roots"``: the server asks which roots it may see.

    ``tool`` and ``arguments`` name the call the request came from; when several calls
    to that server were in flight and the protocol does not say which one asked,
    ``tool`` is None and ``candidates`` lists them all."""

    kind: Literal["call", "elicitation", "sampling", "roots"]
    server: str
    tool: str | None
    arguments: Mapping[str, Any] | None
    envelope: Envelope | None
    reasons: tuple[str, ...]
    trace_id: str
    message: str | None = None
    requested_schema: Mapping[str, Any] | None = None
    mode: Literal["form", "url"] | None = None
    url: str | None = None
    elicitation_id: str | None = None
    params: Mapping[str, Any] | None = None
    candidates: tuple[tuple[str, Mapping[str, Any]], ...] = ()


# The application's decision: True (approve; for a form elicitation: confirm, allowed
# only when the form is one yes/no question), False (refuse / decline), or for a form
# elicitation a dict: the content to send, checked against the requested schema.
Approval = bool | dict[str, Any]
Approver = Callable[[ApprovalRequest], Approval | Awaitable[Approval]]
# A sampling policy: the ``CreateMessageResult`` to send (a dict or the model), or None
# to refuse. A roots policy: the root URIs to show, or None to refuse.
SamplingPolicy = Callable[[ApprovalRequest], Any]
RootsPolicy = Sequence[str] | Callable[[ApprovalRequest], Any]
ProgressCallback = Callable[[float, float | None, str | None], Any]


@dataclass(eq=False)
class _Call:
    """One call in flight: what it is, and its deadline budget."""

    tool: str
    arguments: Mapping[str, Any]
    trace_id: str
    deadline: float  # anyio clock; moves later while a person answers the server
    person_seconds: float = 0.0
    request: _Request[Any] | None = None
    _asking: int = 0
    _asked_at: float = 0.0

    def remaining(self) -> float:
        return self.deadline - anyio.current_time()

    def track(self, request: _Request[Any] | None) -> None:
        self.request = request
        if request is not None and self._asking:
            request.hold()

    def person_asked(self) -> None:
        """A person is being asked: the call's clock stops until ``person_answered``."""
        self._asking += 1
        if self._asking == 1:
            self._asked_at = anyio.current_time()
            if self.request is not None:
                self.request.hold()

    def person_answered(self) -> None:
        self._asking -= 1
        if self._asking == 0:
            waited = anyio.current_time() - self._asked_at
            self.person_seconds += waited
            self.deadline += waited
            if self.request is not None:
                self.request.release(self.deadline)


_current_call: contextvars.ContextVar[_Call | None] = contextvars.ContextVar(
    "kit_current_call", default=None
)


async def ask_on_terminal(request: ApprovalRequest) -> Approval:
    """An approval callback for command-line applications: the question on stderr, the
    answer (y/N) from stdin, read in a worker thread so the event loop keeps running.
    A form elicitation with more than one yes/no question is declined (a terminal
    prompt cannot fill it); a URL elicitation shows the URL to open."""
    if request.kind == "call":
        question = (
            f"Allow {request.server}.{request.tool}({json.dumps(dict(request.arguments or {}), ensure_ascii=False)})"
            f" [{', '.join(request.reasons)}; {'reversible' if request.envelope and request.envelope.reversible else 'irreversible'}]? [y/N] "
        )
    elif request.kind == "elicitation" and request.mode == "url":
        question = (
            f"Server {request.server} (during {request.tool or 'a call'}) asks you to open "
            f"{request.url} (its words: {request.message!r}). Open it and continue? [y/N] "
        )
    elif request.kind == "elicitation":
        question = (
            f"Server {request.server} (during {request.tool or 'a call'}) asks (its words): "
            f"{request.message!r}. Confirm? [y/N] "
        )
    else:
        return False
    print(question, end="", file=sys.stderr, flush=True)
    answer = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
    return answer.strip().lower() in ("y", "yes")


def _result_bytes(result: Any) -> int:
    return len(
        json.dumps(result.model_dump(by_alias=True, mode="json", exclude_none=True)).encode()
    )


def _audited_arguments(how: str, arguments: Mapping[str, Any]) -> Any:
    if how == "none":
        return None
    if how == "full":
        return dict(arguments)
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    data = text.encode("utf-8")
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


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


class Kit:
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
        found: dict[str, ServerCheck] = {}

        async def one(name: str) -> None:
            config = self.config.servers[name]
            try:
                listed = await self.tools(
                    name,
                    refresh=True,
                    deadline_seconds=config.connect_seconds + config.deadline_seconds,
                )
            except KitError as exc:
                found[name] = ServerCheck(name, ok=False, error=str(exc))
                return
            shake = self.sessions[name].handshake
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
            for name in self.config.servers:
                tg.start_soon(one, name)
        report = CheckReport(tuple(found[name] for name in self.config.servers))
        for entry in report.servers:
            self.audit.emit(
                "check",
                server=entry.server,
                ok=entry.ok,
                error=entry.error,
                pinned_missing=list(entry.pinned_missing),
            )
        return report

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

        ``deadline_seconds`` (default: the tool's, else the server's) bounds the whole
        call: listing, connecting, every attempt and the backoff between them; the time
        a person spends answering the approver (before the call, or for the server
        while it runs) is not counted. ``on_progress(progress, total, message)`` sees the
        server's progress notifications for this call.

        Raises ``CallRefused``, ``InvalidArguments`` (nothing sent), ``CallTimeout``,
        ``ServerUnavailable`` (after the retries an idempotent envelope allows)."""
        trace_id = current_trace_id()
        arguments = dict(arguments or {})
        configured = self.config.servers.get(server)
        budget = deadline_seconds or (configured.deadline_for(tool) if configured else 30.0)
        call = _Call(tool, arguments, trace_id, deadline=anyio.current_time() + budget)
        started = time.perf_counter()
        record: dict[str, Any] = {"tool": tool, "deadline_seconds": budget}
        if configured is not None:
            audited = _audited_arguments(configured.audit_arguments_for(tool), arguments)
            if audited is not None:
                record["arguments"] = audited
        outcome = "error"
        try:
            result = await self._call(server, tool, arguments, call, record, on_progress)
            outcome = "isError" if result.is_error else "ok"
            record["result_bytes"] = _result_bytes(result)
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
                ms=_ms(time.perf_counter() - started - call.person_seconds),
                person_ms=_ms(call.person_seconds),
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
            approved=answer is not None and bool(answer),
        )
        if answer is None:
            raise CallRefused(
                f"tool {where}: the approval callback failed, so the call was not made"
            )
        if not answer:
            raise CallRefused(f"tool {where}: a person refused the call")

    async def _ask(self, policy: Callable[[ApprovalRequest], Any], request: ApprovalRequest) -> Any:
        """``policy(request)`` awaited; None when it raised (logged by type only: its
        text may hold anything, and it reaches neither the model nor the server)."""
        try:
            answer = policy(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:
            self.audit.emit(
                "policy_error",
                server=request.server,
                tool=request.tool,
                kind=request.kind,
                error=type(exc).__name__,
            )
            return None
        return answer

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
        progress = self._progress(definition, call, on_progress)

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

    def _progress(
        self, definition: ToolDefinition, call: _Call, on_progress: ProgressCallback | None
    ) -> Callable[[float, float | None, str | None], Awaitable[None]]:
        """The progress callback sent with every call (so a progressToken is sent): each
        notification logged under the call's turn, then given to the application."""
        callbacks = [c for c in (on_progress, self.on_progress) if c is not None]

        async def progress(value: float, total: float | None, message: str | None) -> None:
            self.audit.emit(
                "progress",
                server=definition.server,
                trace_id=call.trace_id,
                tool=definition.name,
                progress=value,
                total=total,
                message=message,
            )
            for callback in callbacks:
                answer = callback(value, total, message)
                if inspect.isawaitable(answer):
                    await answer

        return progress

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
                    ms=_ms(time.perf_counter() - started - (call.person_seconds - person_before)),
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
                    ms=_ms(time.perf_counter() - started),
                    **fields,
                )
                raise KitError(f"{definition.server}.{definition.name}: {exc}") from exc
            self.audit.emit(
                "attempt",
                server=definition.server,
                outcome="isError" if result.is_error else "ok",
                result_bytes=_result_bytes(result),
                ms=_ms(time.perf_counter() - started - (call.person_seconds - person_before)),
                **fields,
            )
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    # -- resources and prompts ---------------------------------------------------------

    async def _read(self, server: str, what: str, op: Callable[[Any], Awaitable[T]]) -> T:
        config = self.server(server)
        started = time.perf_counter()
        outcome = "error"
        try:
            value = await self.sessions[server].run(
                op, deadline_seconds=config.deadline_seconds, what=what
            )
            outcome = "ok"
            return value
        finally:
            self.audit.emit(
                "read",
                server=server,
                what=what,
                outcome=outcome,
                ms=_ms(time.perf_counter() - started),
            )

    async def resources(self, server: str) -> list[Any]:
        """Every resource ``server`` lists (all pages): MCP ``Resource`` objects."""

        async def op(client: Any) -> list[Any]:
            found, cursor = [], None
            while True:
                page = await client.list_resources(cursor=cursor)
                found.extend(page.resources)
                cursor = page.next_cursor
                if not cursor:
                    return found

        return await self._read(server, "resources/list", op)

    async def read_resource(self, server: str, uri: str) -> list[Any]:
        """The contents of ``uri`` on ``server`` (text or blob ``ResourceContents``)."""

        async def op(client: Any) -> list[Any]:
            return list((await client.read_resource(uri)).contents)

        return await self._read(server, f"resources/read {uri}", op)

    async def prompts(self, server: str) -> list[Any]:
        """Every prompt ``server`` lists (all pages): MCP ``Prompt`` objects."""

        async def op(client: Any) -> list[Any]:
            found, cursor = [], None
            while True:
                page = await client.list_prompts(cursor=cursor)
                found.extend(page.prompts)
                cursor = page.next_cursor
                if not cursor:
                    return found

        return await self._read(server, "prompts/list", op)

    async def get_prompt(
        self, server: str, name: str, arguments: Mapping[str, str] | None = None
    ) -> Any:
        """``server``'s prompt ``name`` filled with ``arguments``: a ``GetPromptResult``."""

        async def op(client: Any) -> Any:
            return await client.get_prompt(name, dict(arguments or {}))

        return await self._read(server, f"prompts/get {name}", op)

    # -- requests a server makes of the client ------------------------------------------

    def _origin(self, server: str) -> tuple[_Call | None, tuple[_Call, ...]]:
        """The call a server's request came from: on 2026-07-28 the request runs in the
        calling task; on a legacy connection it is known only when one call is in flight
        (else every candidate is returned)."""
        current = _current_call.get()
        if current is not None:
            return current, (current,)
        in_flight = tuple(self._in_flight.get(server, []))
        return (in_flight[0] if len(in_flight) == 1 else None), in_flight

    def _request(
        self, kind: Literal["elicitation", "sampling", "roots"], server: str, **fields: Any
    ) -> tuple[ApprovalRequest, tuple[_Call, ...]]:
        origin, candidates = self._origin(server)
        request = ApprovalRequest(
            kind=kind,
            server=server,
            tool=origin.tool if origin else None,
            arguments=origin.arguments if origin else None,
            envelope=None,
            reasons=("server asks",),
            trace_id=origin.trace_id if origin else current_trace_id(),
            candidates=() if origin else tuple((c.tool, c.arguments) for c in candidates),
            **fields,
        )
        return request, candidates

    def _log_request(self, request: ApprovalRequest, **fields: Any) -> None:
        self.audit.emit(
            request.kind,
            server=request.server,
            trace_id=request.trace_id,
            tool=request.tool,
            candidates=[tool for tool, _ in request.candidates] or None,
            **fields,
        )

    def _elicitation_for(self, server: str) -> Callable[..., Awaitable[Any]]:
        async def elicit(context: Any, params: Any) -> Any:
            from mcp_types import ElicitResult

            mode = getattr(params, "mode", None) or "form"
            requested: Any = getattr(params, "requested_schema", None)
            schema: Any = (
                requested.model_dump(by_alias=True, exclude_none=True)
                if hasattr(requested, "model_dump")
                else requested
            )
            request, candidates = self._request(
                "elicitation",
                server,
                message=getattr(params, "message", None),
                requested_schema=schema if mode == "form" else None,
                mode="url" if mode == "url" else "form",
                url=getattr(params, "url", None),
                elicitation_id=getattr(params, "elicitation_id", None),
            )
            asked = anyio.current_time()
            for call in candidates:  # a person's time never counts against a call
                call.person_asked()
            try:
                answer: Any = (
                    False if self.approve is None else await self._ask(self.approve, request)
                )
            finally:
                for call in candidates:
                    call.person_answered()
            waited = anyio.current_time() - asked
            action, content, why = self._elicitation_answer(request, schema, answer)
            self._log_request(
                request,
                mode=request.mode,
                url=request.url,
                action=action,
                why=why,
                fields=sorted(content) if content else None,
                person_ms=_ms(waited),
            )
            if action == "accept" and mode == "url":
                return ElicitResult(action="accept")
            if action == "accept":
                return ElicitResult(action="accept", content=content)
            return ElicitResult(action="decline")

        return elicit

    @staticmethod
    def _elicitation_answer(
        request: ApprovalRequest, schema: Any, answer: Any
    ) -> tuple[str, dict[str, Any] | None, str | None]:
        """(action, content, why it was declined) for an approver's answer."""
        if answer is None:
            return "decline", None, "the approval callback failed"
        if answer is False:
            return "decline", None, "refused"
        if request.mode == "url":
            if answer is True:
                return "accept", None, None
            return "decline", None, "a URL elicitation takes True or False"
        schema = schema if isinstance(schema, dict) else {}
        properties = schema.get("properties") or {}
        if answer is True:
            # True confirms one yes/no question; it never fills a form or ticks a box the
            # person did not see as the question (terms, consent, a second flag).
            if not properties:
                return "accept", {}, None
            if len(properties) == 1:
                ((name, sub),) = properties.items()
                if isinstance(sub, dict) and sub.get("type") == "boolean":
                    return "accept", {name: True}, None
            return "decline", None, "the form has fields a yes cannot fill: answer with a dict"
        if not isinstance(answer, dict):
            return "decline", None, f"an answer of type {type(answer).__name__} is not a form"
        found = problems(schema_validator(schema), answer) if schema else []
        if found:
            return (
                "decline",
                None,
                "the answer does not fit the requested schema: " + "; ".join(found),
            )
        return "accept", answer, None

    def _sampling_for(self, server: str) -> Callable[..., Awaitable[Any]]:
        async def sample(context: Any, params: Any) -> Any:
            from mcp_types import CreateMessageResult, ErrorData

            body = params.model_dump(by_alias=True, mode="json", exclude_none=True)
            request, _ = self._request("sampling", server, params=body)
            answer = None if self.sample is None else await self._ask(self.sample, request)
            if answer is not None and not isinstance(answer, CreateMessageResult):
                try:
                    answer = CreateMessageResult.model_validate(answer)
                except ValidationError:
                    self._log_request(
                        request,
                        outcome="refused",
                        why="the policy's answer is not a CreateMessageResult",
                    )
                    return ErrorData(code=-1, message="sampling refused by the client")
            if answer is None:
                why = "no sampling policy" if self.sample is None else "refused by the policy"
                self._log_request(
                    request, outcome="refused", why=why, messages=len(body.get("messages", []))
                )
                return ErrorData(code=-1, message="sampling refused by the client")
            self._log_request(
                request,
                outcome="answered",
                model=answer.model,
                messages=len(body.get("messages", [])),
            )
            return answer

        return sample

    def _roots_for(self, server: str) -> Callable[..., Awaitable[Any]]:
        async def roots(context: Any) -> Any:
            from mcp_types import ErrorData, ListRootsResult, Root

            request, _ = self._request("roots", server)
            policy = self.roots
            chosen: Any
            if policy is None:
                chosen = None
            elif callable(policy):
                chosen = await self._ask(policy, request)
            else:
                chosen = list(policy)
            if chosen is None:
                why = "no roots policy" if policy is None else "refused by the policy"
                self._log_request(request, outcome="refused", why=why)
                return ErrorData(code=-1, message="roots refused by the client")
            self._log_request(request, outcome="answered", roots=[str(r) for r in chosen])
            return ListRootsResult(roots=[Root.model_validate({"uri": str(r)}) for r in chosen])

        return roots


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
