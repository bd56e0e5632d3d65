"""The audit trail: one record per tools/call, whatever its outcome.

The call pipeline hands each finished ``CallRecord`` to ``AuditWriter.observe``: it goes
to stderr at once (one JSON log line, logger ``ticket_server.audit``) and to the
``audit_events`` table off the request path: a background task writes the queued rows
in batches; stopping the server (SIGTERM, end of stdin) flushes what is pending.
Argument values of fields marked sensitive in the tool's input schema
(``"x-sensitive": true``, ``"writeOnly": true`` or ``"format": "password"``) are
redacted (``redact``); tokens never reach this module.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime
from typing import Any

from fastmcp.tools import Tool, ToolResult

from ticket_server.access.callers import CallerStore, RegistryUnavailable
from ticket_server.access.context import CallRecord

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

    def __init__(self, store: CallerStore, batch_size: int = 200, flush_seconds: float = 1.0) -> None:
        self.store = store
        self.batch_size = batch_size
        self.flush_seconds = flush_seconds
        self._pending: list[dict[str, Any]] = []
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def observe(self, record: CallRecord) -> None:
        """Log ``record`` on stderr now and queue its row for the table."""
        row = record.as_row(datetime.now(UTC))
        audit_log.info("tools/call", extra={"audit": {**row, "time": row["time"].isoformat()}})
        if not record.audited:
            self.submit(row)

    def submit(self, row: dict[str, Any]) -> None:
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


