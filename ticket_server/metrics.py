"""Prometheus metrics (prometheus-client), fed by the audit trail so that a call is
classified once, in one place.

Every server has its own registry: several servers in one process (tests, the bench)
never collide, and ``/metrics`` shows exactly this server's figures. With several
worker processes, each process is scraped on its own (or per replica behind the
load balancer); see README "Deploying".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ticket_server.tools.errors import DATABASE_DETAIL

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

    def observe_call(self, row: dict[str, Any]) -> None:
        """Count one audited tools/call (keys as in ``audit_events``)."""
        tool, caller = row["tool"], row.get("caller") or "anonymous"
        self.calls.labels(tool, caller, row["outcome"], row.get("protocol_version") or "unknown").inc()
        self.latency.labels(tool).observe(float(row.get("duration_ms", 0.0)) / 1000.0)
        if row["outcome"] == "rate_limited":
            self.rate_limited.labels(caller, tool).inc()
        if tool in self._deprecated:
            self.deprecated_calls.labels(caller, tool).inc()
        if row.get("detail") == DATABASE_DETAIL:
            self.database_errors.inc()

    def render(self) -> bytes:
        """The Prometheus text exposition format (version 0.0.4)."""
        return generate_latest(self.registry)
