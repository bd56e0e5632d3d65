"""The caller of the request being served, as the tools see it.

The authorization middleware resolves the caller on every tools/call and records it
here (one object per call, in a context variable); a tool asks ``current_queues()``
and passes the answer to the domain as data. Outside a resolved call the answer is
"no queue at all" (fail closed), never "every queue".
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from time import monotonic

from ticket_server.access.callers import Caller


@dataclass
class CallRecord:
    """What the middleware layers learn about one tools/call, for the audit row."""

    trace_id: str
    tool: str
    transport: str = "unknown"
    caller: Caller | None = None
    outcome: str | None = None  # set by a layer that refused the call
    detail: str | None = None
    started: float = field(default_factory=monotonic)


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
