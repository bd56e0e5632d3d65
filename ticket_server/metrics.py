"""Prometheus metrics (prometheus-client), fed by the call pipeline's finished
``CallRecord``s, the same records the audit trail keeps, so a call is classified once.

Every server has its own registry: several servers in one process (tests, the bench)
never collide, and ``/metrics`` shows exactly this server's figures. With several
worker processes, each process is scraped on its own (or per replica behind the
load balancer); see README "Deploying".
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ticket_server.access.context import CallRecord, Cause, Outcome

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]

UNKNOWN = "unknown"
ANONYMOUS = "anonymous"
_PROTOCOL_VERSIONS = frozenset(SUPPORTED_PROTOCOL_VERSIONS)

# Tool latency buckets in seconds: sub-millisecond lookups up to slow searches.
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


def _tasks_alive() -> float:
    try:
        return len(asyncio.all_tasks())
    except RuntimeError:  # rendered outside the event loop
        return 0


class Metrics:
    """The server's counters and histograms; ``observe_call`` takes one audit row."""

    def __init__(self, deprecated_tools: Iterable[str] = ()) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._deprecated = frozenset(deprecated_tools)
        self.calls = Counter(
            "ticket_server_tool_calls",
            "tools/call requests by tool, caller, outcome and protocol revision.",
            ["tool", "caller", "outcome", "protocol_version"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "ticket_server_tool_call_duration_seconds",
            "tools/call latency by tool.",
            ["tool"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.rate_limited = Counter(
            "ticket_server_rate_limit_refusals",
            "tools/call refused by a rate limit, by caller and tool.",
            ["caller", "tool"],
            registry=self.registry,
        )
        self.deprecated_calls = Counter(
            "ticket_server_deprecated_tool_calls",
            "Calls to deprecated tool names, by caller and tool.",
            ["caller", "tool"],
            registry=self.registry,
        )
        self.audit_rows_dropped = Counter(
            "ticket_server_audit_rows_dropped",
            "Audit rows lost: the bounded queue was full, or rows were pending when the server stopped.",
            registry=self.registry,
        )
        self.unauthenticated = Counter(
            "ticket_server_unauthenticated_requests",
            "Requests to /mcp refused for want of a valid bearer token, by HTTP status (401, or 429 once "
            "the client address is past its limit); the audit trail records a sample of them.",
            ["status"],
            registry=self.registry,
        )
        # The process's resident memory and the asyncio tasks alive: a request whose
        # task outlives it (a leak) shows in both.
        ProcessCollector(registry=self.registry)
        Gauge(
            "ticket_server_asyncio_tasks",
            "asyncio tasks alive in this process (each request in flight holds some).",
            registry=self.registry,
        ).set_function(_tasks_alive)
        self.database_errors = Counter(
            "ticket_server_database_errors",
            "Queries that found the ticket database unavailable.",
            registry=self.registry,
        )

    def observe(self, record: CallRecord) -> None:
        """Count one finished tools/call. Every label value comes from a bounded set: a
        tool name the server does not have is ``unknown``, a caller not in the callers
        table ``anonymous``, a protocol revision this SDK does not speak ``unknown``."""
        tool = record.tool if record.known_tool else UNKNOWN
        caller = (
            record.caller.name
            if record.caller is not None and record.caller.registered
            else ANONYMOUS
        )
        version = (
            record.protocol_version if record.protocol_version in _PROTOCOL_VERSIONS else UNKNOWN
        )
        self.calls.labels(tool, caller, record.outcome.value, version).inc()
        self.latency.labels(tool).observe(record.duration_ms / 1000.0)
        if record.outcome is Outcome.RATE_LIMITED:
            self.rate_limited.labels(caller, tool).inc()
        if tool in self._deprecated:
            self.deprecated_calls.labels(caller, tool).inc()
        if record.cause is Cause.DATABASE_UNAVAILABLE:
            self.database_errors.inc()

    def render(self) -> bytes:
        """The Prometheus text exposition format (version 0.0.4)."""
        return generate_latest(self.registry)
