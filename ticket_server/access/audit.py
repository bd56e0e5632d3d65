"""The audit trail: one record per tools/call, whatever its outcome.

The record goes to stderr at once (one JSON log line, logger ``ticket_server.audit``)
and to the ``audit_events`` table off the request path: a background task writes the
queued records in batches; stopping the server (SIGTERM, end of stdin) flushes what is
pending. Argument values of fields marked sensitive in the tool's input schema
(``"x-sensitive": true``, ``"writeOnly": true`` or ``"format": "password"``) are
redacted; tokens never reach this module.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from datetime import UTC, datetime
from time import monotonic
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools import Tool, ToolResult
from mcp import types as mt

from ticket_server.access.callers import CallerStore, RegistryUnavailable
from ticket_server.access.context import CallRecord, current_call

if TYPE_CHECKING:  # SQLAlchemy: imported by the first write or query, not at start
    from ticket_server.access.models import AuditEvent

audit_log = logging.getLogger("ticket_server.audit")
log = logging.getLogger(__name__)
REDACTED = "[redacted]"
MAX_ARGUMENTS_CHARS = 4000
QUEUE_LIMIT = 100_000


def sensitive_fields(tool: Tool | None) -> frozenset[str]:
    if tool is None:
        return frozenset()
    properties = (tool.parameters or {}).get("properties", {})
    return frozenset(
        name
        for name, schema in properties.items()
        if isinstance(schema, dict)
        and (schema.get("x-sensitive") or schema.get("writeOnly") or schema.get("format") == "password")
    )


def storable(text: str, limit: int) -> str:
    """``text`` as every database accepts it: lone surrogates and NUL escaped (neither
    SQLite's UTF-8 nor PostgreSQL's text takes them), at most ``limit`` characters."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def redact(arguments: dict[str, Any], sensitive: frozenset[str]) -> str:
    shown = {k: (REDACTED if k in sensitive else v) for k, v in arguments.items()}
    try:
        text = json.dumps(shown, ensure_ascii=False, default=str, sort_keys=True)
    except (ValueError, TypeError, RecursionError):  # nesting deeper than json can walk
        text = json.dumps({k: REDACTED if k in sensitive else "[unprintable]" for k in shown}, ensure_ascii=False)
    return storable(text, MAX_ARGUMENTS_CHARS)


def result_size(result: ToolResult) -> int:
    """Bytes of the result as sent: its content blocks and structured content, as JSON."""
    blocks = [block.model_dump(mode="json", exclude_none=True) for block in result.content]
    payload: dict[str, Any] = {"content": blocks}
    if result.structured_content is not None:
        payload["structuredContent"] = result.structured_content
    return len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


class AuditWriter:
    """Queues audit rows and writes them in batches from one background task."""

    def __init__(
        self, store: CallerStore, batch_size: int = 200, flush_seconds: float = 1.0,
        observers: Sequence[Callable[[dict[str, Any]], None]] = (),
    ) -> None:
        self.store = store
        self.observers = tuple(observers)  # e.g. metrics: each row, as it is submitted
        self.batch_size = batch_size
        self.flush_seconds = flush_seconds
        self._pending: list[dict[str, Any]] = []
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def submit(self, row: dict[str, Any]) -> None:
        for observe in self.observers:
            observe(row)
        if len(self._pending) >= QUEUE_LIMIT:
            log.error("audit queue full; dropping a row", extra={"trace_id": row["trace_id"]})
            return
        self._pending.append(row)
        if self._wake is not None and len(self._pending) >= self.batch_size:
            self._wake.set()

    async def start(self) -> None:
        self._stopping = False
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="ticket-server audit writer")

    async def _run(self) -> None:
        assert self._wake is not None
        while not self._stopping:
            try:
                await asyncio.wait_for(self._wake.wait(), self.flush_seconds)
            except TimeoutError:
                pass
            self._wake.clear()
            await self.flush()

    async def flush(self) -> int:
        """Write everything pending; returns how many rows were written."""
        if not self._pending:
            return 0
        from sqlalchemy import insert

        from ticket_server.access.models import AuditEvent

        written = 0
        while self._pending:
            batch, self._pending = self._pending[: self.batch_size], self._pending[self.batch_size :]
            try:
                async with self.store.session() as session, session.begin():
                    await session.execute(insert(AuditEvent), batch)
                written += len(batch)
            except RegistryUnavailable:
                log.error("audit rows not written: database unavailable", extra={"rows": len(batch)})
            except Exception:  # a row the driver refuses must not stop the writer for good
                log.exception("audit rows not written", extra={"rows": len(batch)})
        return written

    async def stop(self) -> None:
        """Stop the background task and write what is pending (call shielded)."""
        self._stopping = True
        if self._task is not None:
            if self._wake is not None:
                self._wake.set()
            try:
                await self._task
            except Exception:  # pragma: no cover - logged, never fatal on shutdown
                log.exception("audit writer failed")
            self._task = None
        await self.flush()


def _protocol_version(context: MiddlewareContext[Any]) -> str | None:
    try:
        return context.fastmcp_context.request_context.protocol_version  # type: ignore[union-attr]
    except Exception:
        return None


class AuditMiddleware(Middleware):
    """Outermost: gives each tools/call a trace id and records how it ended."""

    def __init__(self, writer: AuditWriter) -> None:
        self.writer = writer
        self._sensitive: dict[str, frozenset[str]] = {}

    async def _sensitive_fields(self, context: MiddlewareContext[mt.CallToolRequestParams]) -> frozenset[str]:
        name = context.message.name
        if name not in self._sensitive:
            tool = None
            if context.fastmcp_context is not None:
                try:
                    tool = await context.fastmcp_context.fastmcp.get_tool(name)
                except Exception:
                    tool = None
            if tool is None:
                return frozenset()
            self._sensitive[name] = sensitive_fields(tool)
        return self._sensitive[name]

    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        record = CallRecord(trace_id=uuid.uuid4().hex, tool=context.message.name)
        reset = current_call.set(record)
        size, outcome = 0, "tool_error"
        try:
            result = await call_next(context)
            outcome = "tool_error" if result.is_error else "ok"
            size = result_size(result)
            return result
        except Exception as exc:  # ToolError, NotFoundError (unknown or refused tool), ...
            size = len(str(exc).encode("utf-8"))
            raise
        finally:
            current_call.reset(reset)
            await self._emit(context, record, record.outcome or outcome, size)

    async def _emit(
        self, context: MiddlewareContext[mt.CallToolRequestParams], record: CallRecord, outcome: str, size: int
    ) -> None:
        arguments = context.message.arguments or {}
        row = {
            "time": datetime.now(UTC),
            "trace_id": record.trace_id,
            "caller": record.caller.name if record.caller else None,
            "transport": record.transport,
            "protocol_version": _protocol_version(context),
            "tool": storable(record.tool, 128),
            "arguments": redact(arguments, await self._sensitive_fields(context)) if arguments else "{}",
            "outcome": outcome,
            "detail": record.detail,
            "result_bytes": size,
            "duration_ms": round((monotonic() - record.started) * 1000, 3),
        }
        audit_log.info("tools/call", extra={"audit": {**row, "time": row["time"].isoformat()}})
        self.writer.submit(row)


def parse_since(text: str) -> datetime:
    """``24h``, ``30m``, ``7d``, ``90s`` ago, or an ISO 8601 time."""
    from datetime import timedelta

    units = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
    if text and text[-1] in units and text[:-1].isdigit():
        return datetime.now(UTC) - timedelta(**{units[text[-1]]: int(text[:-1])})
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"--since {text!r}: give a duration like 24h, 30m, 7d or an ISO time") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


async def query(
    store: CallerStore, *, caller: str | None = None, tool: str | None = None,
    since: datetime | None = None, limit: int = 1000,
) -> list[AuditEvent]:
    from sqlalchemy import select

    from ticket_server.access.models import AuditEvent

    stmt = select(AuditEvent)
    if caller:
        stmt = stmt.where(AuditEvent.caller == caller)
    if tool:
        stmt = stmt.where(AuditEvent.tool == tool)
    if since:
        stmt = stmt.where(AuditEvent.time >= since)
    stmt = stmt.order_by(AuditEvent.time.desc(), AuditEvent.pk.desc()).limit(limit)
    async with store.session() as session:
        rows = list((await session.scalars(stmt)).all())
    rows.reverse()
    return rows


async def deprecated_usage(
    store: CallerStore, tools: list[str], since: datetime | None = None
) -> list[tuple[str | None, str, int, datetime]]:
    """Who still calls which of ``tools``: (caller, tool, calls, last call), latest first.

    Counted from the audit trail, so refusals after retirement count too: they are the
    callers that most need telling.
    """
    from sqlalchemy import func, select

    from ticket_server.access.models import AuditEvent

    last = func.max(AuditEvent.time)
    stmt = (
        select(AuditEvent.caller, AuditEvent.tool, func.count(), last)
        .where(AuditEvent.tool.in_(tools))
        .group_by(AuditEvent.caller, AuditEvent.tool)
        .order_by(last.desc())
    )
    if since:
        stmt = stmt.where(AuditEvent.time >= since)
    async with store.session() as session:
        rows = (await session.execute(stmt)).all()
    # SQLite returns max(time) as text: read it through the column's type again.
    out = []
    for caller, tool, count, when in rows:
        if isinstance(when, str):
            when = datetime.fromisoformat(when).replace(tzinfo=UTC)
        out.append((caller, tool, int(count), when))
    return out
