"""Prometheus metrics (prometheus-client), fed by the call pipeline's finished
``CallRecord``s, the same records the audit trail keeps, so a call is classified once.

Every server has its own registry: several servers in one process (tests, the bench)
never collide, and ``/metrics`` shows exactly this server's figures. With several
worker processes, each process is scraped on its own (or per replica behind the
load balancer); see README "Deploying".
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ticket_server.access.context import CallRecord, Cause, Outcome

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]

# Tool latency buckets in seconds: sub-millisecond lookups up to slow searches.
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    """The server's counters and histograms; ``observe_call`` takes one audit row."""

    def __init__(self, deprecated_tools: Iterable[str] = ()) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._deprecated = frozenset(deprecated_tools)
        self.calls = Counter(
            "ticket_server_tool_calls", "tools/call requests by tool, caller, outcome and protocol revision.",
            ["tool", "caller", "outcome", "protocol_version"], registry=self.registry,
        )
        self.latency = Histogram(
            "ticket_server_tool_call_duration_seconds", "tools/call latency by tool.",
            ["tool"], buckets=_BUCKETS, registry=self.registry,
        )
        self.rate_limited = Counter(
            "ticket_server_rate_limit_refusals", "tools/call refused by a rate limit, by caller and tool.",
            ["caller", "tool"], registry=self.registry,
        )
        self.deprecated_calls = Counter(
            "ticket_server_deprecated_tool_calls", "Calls to deprecated tool names, by caller and tool.",
            ["caller", "tool"], registry=self.registry,
        )
        self.database_errors = Counter(
            "ticket_server_database_errors", "Queries that found the ticket database unavailable.",
            registry=self.registry,
        )

    def observe(self, record: CallRecord) -> None:
        """Count one finished tools/call."""
        tool, caller = record.tool, record.caller.name if record.caller else "anonymous"
        self.calls.labels(tool, caller, record.outcome.value, record.protocol_version or "unknown").inc()
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
