"""Audit and tracing: every protocol event the kit sees, as one JSON line under the
trace id of the turn that caused it.

An event is a flat JSON object: ``{"ts": <unix seconds>, "trace_id": ..., "server":
..., "event": ..., ...}``. Events: ``connect`` (transport, the program without its
arguments, or the URL without credentials), ``handshake`` (which one, protocol
version, server identity, capabilities), ``list`` (tool count, new and inert names), ``call`` (one per call
whatever its fate: tool, outcome, attempts, milliseconds without the time a person
took and ``person_ms`` apart, result size, idempotency key, arguments as the
configuration's ``audit_arguments`` says: a ``{sha256, bytes}`` digest by default),
``attempt`` (one per attempt), ``approval``, ``elicitation``, ``sampling``, ``roots``
(each with the tool of the call it came from, the answer and why), ``policy_error``
(a policy callback raised: its type only), ``progress``, ``notification`` (method and
params in full, under the turn of the call it arrived with), ``unavailable``,
``check``, ``renamed`` (a tool's provider name was another's: the name it got instead),
``read`` (resources and prompts), ``disconnect`` (why) and ``close``.
Results are never logged: only their sizes.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TextIO

Sink = Callable[[dict[str, Any]], None]

_trace_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("kit_trace_id", default=None)


def current_trace_id() -> str:
    """The trace id of the current turn, or a fresh one for an event outside any turn."""
    return _trace_id.get() or uuid.uuid4().hex


@contextlib.contextmanager
def turn(trace_id: str | None = None) -> Iterator[str]:
    """Everything the kit does inside this block is logged under one trace id (given, or
    a new 32-hex-digit one); calls handed to a session's task carry it along."""
    token = _trace_id.set(trace_id or uuid.uuid4().hex)
    try:
        yield _trace_id.get()  # type: ignore[misc]
    finally:
        _trace_id.reset(token)


def json_lines(stream: TextIO | None = None) -> Sink:
    """A sink writing each event as one compact JSON line (default: stderr, never
    stdout, which a stdio MCP server of the same process would own)."""

    def write(event: dict[str, Any]) -> None:
        out = stream if stream is not None else sys.stderr
        out.write(json.dumps(event, ensure_ascii=False, default=str, separators=(",", ":")) + "\n")
        out.flush()

    return write


class Audit:
    """Emits events to a sink, stamping time and trace id."""

    def __init__(self, sink: Sink | None = None) -> None:
        self.sink = sink if sink is not None else json_lines()

    def emit(
        self, event: str, *, server: str | None, trace_id: str | None = None, **fields: Any
    ) -> None:
        record = {
            "ts": round(time.time(), 6),
            "trace_id": trace_id or current_trace_id(),
            "server": server,
            "event": event,
            **fields,
        }
        self.sink(record)


def result_bytes(result: Any) -> int:
    """The size of an MCP result as JSON: what the audit keeps of a result."""
    return len(
        json.dumps(result.model_dump(by_alias=True, mode="json", exclude_none=True)).encode()
    )


def audited_arguments(how: str, arguments: Mapping[str, Any]) -> Any:
    """A call's arguments as ``audit_arguments`` allows: None, a digest, or in full."""
    if how == "none":
        return None
    if how == "full":
        return dict(arguments)
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    data = text.encode("utf-8")
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)
