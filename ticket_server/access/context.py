"""What one tools/call is, as the call pipeline learns it: a typed record.

The pipeline (``ticket_server.pipeline``) makes one ``CallRecord`` per tools/call, fills
it top to bottom (caller, outcome, cause) and hands it to the observers (the audit
writer, the metrics) when the call ends. The record is also the call's context: a tool
asks ``current_queues()`` and passes the answer to the domain as data. Outside a call
the answer is "no queue at all" (fail closed), never "every queue".
"""

from __future__ import annotations

import uuid
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import StrEnum
from time import monotonic
from typing import Any

from ticket_server.access.callers import Caller


class Outcome(StrEnum):
    """How a tools/call ended (the ``audit_events.outcome`` column)."""

    OK = "ok"
    TOOL_ERROR = "tool_error"  # an isError result or a refused/unknown tool name
    DENIED = "denied"  # the caller may not call this tool (answered as an unknown tool)
    RATE_LIMITED = "rate_limited"
    CANCELLED = "cancelled"  # the client cancelled it (or went away) while it ran


class Cause(StrEnum):
    """Why a call failed, where the pipeline knows more than the outcome says."""

    NO_CALLER = "no caller"
    MISSING_SCOPE = "missing scope"
    NOT_OFFERED = "not in the caller's toolsets"
    UNKNOWN_TOOL = "unknown tool"
    UNKNOWN_RESOURCE = "unknown resource"
    UNKNOWN_PROMPT = "unknown prompt"
    RETIRED = "retired tool"
    INVALID_ARGUMENTS = "invalid arguments"
    LIMIT_REACHED = "rate limit reached"
    LIMITS_UNAVAILABLE = "rate-limit storage unavailable"
    CALLERS_UNAVAILABLE = "callers table unavailable"
    DATABASE_UNAVAILABLE = "ticket database unavailable"
    TIMEOUT = "deadline exceeded"
    BUSY = "too many calls running"
    # Refused by the HTTP transport before the server saw the call:
    UNAUTHENTICATED = "no valid bearer token"
    HTTP_LIMIT = "HTTP request limit reached"
    TOO_LARGE = "request body too large"
    READ_TIMEOUT = "request body not sent in time"
    MALFORMED = "malformed request"


@dataclass
class CallRecord:
    """One tools/call (or resources/read, prompts/get: ``method``). ``arguments`` is the
    redacted JSON text the audit keeps."""

    tool: str
    method: str = "tools/call"  # the JSON-RPC method: the audit's log line is named by it
    known_tool: bool = False  # ``tool`` names one of the server's tools
    transport: str = "unknown"
    protocol_version: str | None = None
    trace_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    caller: Caller | None = None
    outcome: Outcome = Outcome.OK
    cause: Cause | None = None
    detail: str | None = None
    arguments: str = "{}"
    result_bytes: int = 0
    started: float = field(default_factory=monotonic)
    duration_ms: float = 0.0
    audited: bool = False  # a write's audit row was written in the write's transaction
    audit_pk: int | None = None  # that row's key: its result size and duration follow it
    deadline: Any = None  # the call's asyncio.Timeout, which a person's confirmation extends

    def fail(self, outcome: Outcome, cause: Cause | None = None, detail: str | None = None) -> None:
        self.outcome, self.cause = outcome, cause
        if detail is not None or cause is not None:
            self.detail = detail or (cause.value if cause is not None else None)

    def as_row(self, time: Any) -> dict[str, Any]:
        """The ``audit_events`` row (``time``: when the call ended, aware UTC)."""
        return {
            "time": time,
            "trace_id": self.trace_id,
            "caller": self.caller.name if self.caller else None,
            "transport": self.transport,
            "protocol_version": self.protocol_version,
            "tool": self.tool,
            "arguments": self.arguments,
            "outcome": self.outcome.value,
            "detail": self.detail,
            "result_bytes": self.result_bytes,
            "duration_ms": self.duration_ms,
        }


current_call: ContextVar[CallRecord | None] = ContextVar("ticket_server_current_call", default=None)


def current_caller() -> Caller | None:
    record = current_call.get()
    return record.caller if record is not None else None


def current_queues() -> frozenset[str] | None:
    """The queues the current caller may see: None = every queue; empty = none."""
    caller = current_caller()
    if caller is None:
        return frozenset()
    return caller.queues
