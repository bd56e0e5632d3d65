"""The audit trail: one record per tools/call, resources/read and prompts/get, whatever
its outcome.

The call pipeline hands each finished ``CallRecord`` to ``AuditWriter.observe``: it goes
to stderr at once (one JSON log line, logger ``ticket_server.audit``) and to the
``audit_events`` table off the request path: a background task writes the queued rows
in batches; stopping the server (SIGTERM, end of stdin) flushes what is pending.
Argument values of fields marked sensitive in the tool's input schema
(``"x-sensitive": true``, ``"writeOnly": true`` or ``"format": "password"``) are
redacted (``redact``); a text kept elsewhere (a note's or a reply's body, stored in its
comment row: ``digested``) is kept as its SHA-256 and length in characters, enough to
prove which text was sent without copying it. Tokens never reach this module.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from time import monotonic
from typing import Any

from fastmcp.tools import Tool, ToolResult

from ticket_server.access.callers import CallerStore, RegistryUnavailable
from ticket_server.access.context import CallRecord, Cause, Outcome

audit_log = logging.getLogger("ticket_server.audit")
log = logging.getLogger(__name__)
REDACTED = "[redacted]"
MAX_ARGUMENTS_CHARS = 4000
QUEUE_LIMIT = 100_000
UNAUTHENTICATED_ROWS_PER_MINUTE = 60
"""Most requests refused for want of a valid token recorded one by one per minute
(``AuditWriter.observe_unauthenticated``)."""
UNAUTHENTICATED_SUMMARY = "(unauthenticated requests)"
"""The audit's tool for the record that counts the refusals not recorded one by one."""


DIGEST = "digest"
"""How a field kept as ``{"sha256": ..., "length": ...}`` is marked in ``sensitive_fields``."""


def sensitive_fields(tool: Tool | None, digested: Iterable[str] = ()) -> dict[str, str]:
    """The tool's arguments not stored as sent: name -> ``REDACTED`` (marked sensitive
    in its input schema) or ``DIGEST`` (named in ``digested``)."""
    if tool is None:
        return {}
    properties = (tool.parameters or {}).get("properties", {})
    fields = {name: DIGEST for name in digested}
    for name, schema in properties.items():
        if isinstance(schema, dict) and (
            schema.get("x-sensitive")
            or schema.get("writeOnly")
            or schema.get("format") == "password"
        ):
            fields[name] = REDACTED
    return fields


def _kept(value: Any, how: str | None) -> Any:
    if how is None:
        return value
    if how == DIGEST and isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        return {"sha256": hashlib.sha256(data).hexdigest(), "length": len(value)}
    return REDACTED


def storable(text: str, limit: int) -> str:
    """``text`` as every database accepts it: lone surrogates and NUL escaped (neither
    SQLite's UTF-8 nor PostgreSQL's text takes them), at most ``limit`` characters."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def redact(arguments: dict[str, Any], sensitive: Mapping[str, str]) -> str:
    """``arguments`` as the audit keeps them (JSON, at most ``MAX_ARGUMENTS_CHARS``):
    each field of ``sensitive`` redacted or digested (``sensitive_fields``)."""
    shown = {k: _kept(v, sensitive.get(k)) for k, v in arguments.items()}
    try:
        text = json.dumps(shown, ensure_ascii=False, default=str, sort_keys=True)
    except (ValueError, TypeError, RecursionError):  # nesting deeper than json can walk
        text = json.dumps(
            {k: REDACTED if k in sensitive else "[unprintable]" for k in shown}, ensure_ascii=False
        )
    return storable(text, MAX_ARGUMENTS_CHARS)


def result_size(result: ToolResult) -> int:
    """Bytes of the result as sent: its content blocks and structured content, as JSON."""
    blocks = [block.model_dump(mode="json", exclude_none=True) for block in result.content]
    payload: dict[str, Any] = {"content": blocks}
    if result.structured_content is not None:
        payload["structuredContent"] = result.structured_content
    return len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _refused_content(exc: BaseException) -> bool:
    """Whether the database refused the rows themselves (DBAPI DataError or
    IntegrityError), not the connection: writing them again would fail again."""
    from sqlalchemy.exc import DataError, IntegrityError

    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, DataError | IntegrityError):
            return True
        cause = cause.__cause__
    return False


class AuditWriter:
    """Queues audit rows and writes them in batches from one background task.

    The guarantee: a row is written unless the process dies first (SIGKILL, power loss:
    at most the rows of the last ``flush_seconds`` or so are lost) or the database
    refuses rows for so long that more than ``queue_limit`` pile up. A batch the
    database does not take stays queued, in order, and is tried again after a pause that
    doubles on every failure (``RETRY_FIRST_SECONDS`` up to ``RETRY_MOST_SECONDS``); a
    row the database refuses for its content is lost on its own (``flush``). A row lost
    to the bound, refused, or still queued when the server stops, is counted
    (``dropped``: the ``ticket_server_audit_rows_dropped`` metric) and logged at ERROR;
    every row is on stderr (logger ``ticket_server.audit``) the moment the call ends.
    """

    RETRY_FIRST_SECONDS = 0.5
    RETRY_MOST_SECONDS = 30.0
    SAMPLE_SECONDS = 60.0  # the window of ``UNAUTHENTICATED_ROWS_PER_MINUTE``

    def __init__(
        self,
        store: CallerStore,
        batch_size: int = 200,
        flush_seconds: float = 1.0,
        *,
        queue_limit: int = QUEUE_LIMIT,
        dropped: Callable[[float], None] | None = None,
    ) -> None:
        self.store = store
        self.batch_size = batch_size
        self.flush_seconds = flush_seconds
        self.queue_limit = queue_limit
        self._dropped = dropped
        self._pending: deque[dict[str, Any]] = deque()
        self._amends: deque[dict[str, Any]] = deque()  # written rows' final figures
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._retry_at = 0.0
        self._backoff = 0.0
        self._minute = (0.0, 0)  # (start, recorded in it)
        self._unrecorded: dict[Cause | None, int] = {}  # not recorded in it, by cause

    def observe_unauthenticated(self, record: CallRecord) -> None:
        """A request refused before anyone could be named (no valid bearer token): it costs
        its sender nothing, so a flood of them must not fill the table, the stderr log or
        the queue that authenticated calls' rows wait in. Up to
        ``UNAUTHENTICATED_ROWS_PER_MINUTE`` each minute are observed like a call; the
        rest are counted, and one record per minute (``UNAUTHENTICATED_SUMMARY``, written
        within ``flush_seconds`` of the minute's end, or at stop) says how many."""
        self._end_minute(monotonic())
        start, recorded = self._minute
        if recorded < UNAUTHENTICATED_ROWS_PER_MINUTE:
            self._minute = (start, recorded + 1)
            self.observe(record)
        else:
            self._unrecorded[record.cause] = self._unrecorded.get(record.cause, 0) + 1

    def _end_minute(self, now: float, *, stopping: bool = False) -> None:
        start, _ = self._minute
        if now - start < self.SAMPLE_SECONDS and not stopping:
            return
        within = max(1, round(min(self.SAMPLE_SECONDS, now - start)))
        for cause, count in self._unrecorded.items():
            summary = CallRecord(tool=UNAUTHENTICATED_SUMMARY, transport="http")
            if cause is Cause.CALLERS_UNAVAILABLE:
                # Their tokens may well be valid: they were never checked.
                summary.fail(
                    Outcome.TOOL_ERROR,
                    cause,
                    f"{count} more requests refused with 503 within {within} s: the callers "
                    "table did not answer, so their bearer tokens could not be checked; "
                    "not recorded one by one",
                )
            else:
                summary.fail(
                    Outcome.DENIED,
                    cause or Cause.UNAUTHENTICATED,
                    f"{count} more requests without a valid bearer token refused within "
                    f"{within} s; not recorded one by one",
                )
            self.observe(summary)
        self._unrecorded = {}
        self._minute = (now, 0)

    def observe(self, record: CallRecord) -> None:
        """Log ``record`` on stderr now and queue its row for the table."""
        row = record.as_row(datetime.now(UTC))
        audit_log.info(record.method, extra={"audit": {**row, "time": row["time"].isoformat()}})
        if not record.audited:
            self.submit(row)
        elif record.audit_pk is not None:
            # A write's row went in with its transaction, before the call had a result:
            # its result size and whole duration follow it (``flush``).
            self._amends.append(
                {
                    "pk": record.audit_pk,
                    "result_bytes": record.result_bytes,
                    "duration_ms": record.duration_ms,
                }
            )
            if self._wake is not None and len(self._amends) >= self.batch_size:
                self._wake.set()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def submit(self, row: dict[str, Any]) -> None:
        if len(self._pending) >= self.queue_limit:
            self._lose(
                1, f"audit queue full ({self.queue_limit} rows): a row is lost", row["trace_id"]
            )
            return
        self._pending.append(row)
        if self._wake is not None and len(self._pending) >= self.batch_size:
            self._wake.set()

    def _lose(self, rows: int, message: str, trace_id: str | None = None) -> None:
        if self._dropped is not None:
            self._dropped(rows)
        log.error(message, extra={"rows": rows, **({"trace_id": trace_id} if trace_id else {})})

    async def start(self) -> None:
        self._stopping = False
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="ticket-server audit writer")

    async def _run(self) -> None:
        assert self._wake is not None
        while not self._stopping:
            wait = max(self.flush_seconds, self._retry_at - monotonic())
            try:
                await asyncio.wait_for(self._wake.wait(), wait)
            except TimeoutError:
                pass
            self._wake.clear()
            self._end_minute(monotonic())
            if monotonic() >= self._retry_at:
                await self.flush()

    async def flush(self) -> int:
        """Write the rows pending when it starts, oldest first, until done or the database
        fails (what is left stays queued and the next try waits out the backoff); returns
        how many rows were written. A batch refused for its content (a
        value a column does not take, a constraint) is written row by row, and a row
        refused on its own is lost (counted and logged): one bad row never holds back the
        rows behind it.

        Rows queued while it writes wait for the next wake (``batch_size`` rows or
        ``flush_seconds``): chasing them would keep the writer inserting a few rows at a
        time for as long as calls arrive, a transaction each, on the event loop every
        served call shares."""
        written, left = 0, len(self._pending)
        if self._amends and not await self._amend():
            return written
        while left and self._pending:
            batch = [
                self._pending[i] for i in range(min(self.batch_size, left, len(self._pending)))
            ]
            left -= len(batch)
            try:
                await self._insert(batch)
            except Exception as exc:
                if not _refused_content(exc):
                    self._retry_later(exc)
                    return written
                for row in batch:
                    try:
                        await self._insert([row])
                    except Exception as one:
                        if not _refused_content(one):
                            self._retry_later(one)
                            return written
                        self._lose(
                            1, "audit row refused by the database: it is lost", row["trace_id"]
                        )
                    else:
                        written += 1
                    self._pending.popleft()
                continue
            for _ in batch:
                self._pending.popleft()
            written += len(batch)
            self._backoff, self._retry_at = 0.0, 0.0
        return written

    async def _insert(self, rows: list[dict[str, Any]]) -> None:
        from ticket_server.access.models import AuditEvent

        # A Core insert of the table: the ORM's bulk insert of the entity costs more CPU,
        # on the event loop every served call shares.
        async with self.store.session("audit trail") as session, session.begin():
            await session.execute(AuditEvent.__table__.insert(), rows)

    async def _amend(self) -> bool:
        """Set the result size and duration of the written rows queued in ``_amends``
        (one UPDATE per row, one transaction); False when the database failed (they stay
        queued and are tried again)."""
        from sqlalchemy import update

        from ticket_server.access.models import AuditEvent

        batch = [self._amends[i] for i in range(min(self.batch_size, len(self._amends)))]
        try:
            # The ORM's bulk UPDATE by primary key: one statement, a parameter set a row.
            async with self.store.session("audit trail") as session, session.begin():
                await session.execute(update(AuditEvent), batch)
        except Exception as exc:
            if not _refused_content(exc):
                self._retry_later(exc)
                return False
            self._lose(len(batch), "audit figures refused by the database: they are lost")
        for _ in batch:
            self._amends.popleft()
        return True

    def _retry_later(self, exc: Exception) -> None:
        self._backoff = min(
            self.RETRY_MOST_SECONDS, max(self.RETRY_FIRST_SECONDS, self._backoff * 2)
        )
        self._retry_at = monotonic() + self._backoff
        reason = (
            "database unavailable" if isinstance(exc, RegistryUnavailable) else type(exc).__name__
        )
        log.warning(
            f"audit rows not written yet ({reason}); retrying in {self._backoff:g} s",
            extra={"rows": len(self._pending)},
        )

    async def stop(self) -> None:
        """Stop the background task and write what is pending (call shielded); rows the
        database still does not take are counted and logged as lost."""
        self._stopping = True
        if self._task is not None:
            if self._wake is not None:
                self._wake.set()
            try:
                await self._task
            except Exception:  # pragma: no cover - logged, never fatal on shutdown
                log.exception("audit writer failed")
            self._task = None
        self._end_minute(monotonic(), stopping=True)
        while self._pending or self._amends:  # also the rows of calls that ended meanwhile
            left = len(self._pending) + len(self._amends)
            await self.flush()
            if len(self._pending) + len(self._amends) == left:  # the database takes none
                break
        if self._pending:
            self._lose(
                len(self._pending), f"audit rows lost at stop: {len(self._pending)} not written"
            )
            self._pending.clear()
        self._amends.clear()
