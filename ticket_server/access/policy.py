"""What a tool declares about itself for the call pipeline, beside its definition.

Scopes are the tool's ``tags`` of the form ``resource:action`` (``tickets:read``,
``tickets:write``): the caller needs every one, a tool without one is nobody's. The rest
of a tool's policy is a ``ToolPolicy`` its module declares next to the tool (a mapping
``POLICY`` of tool name to policy) and the composition root hands to the pipeline; a tool
that declares none gets ``ToolPolicy()``. A write's confirmation action is its own
(``tools/writes.py`` asks ``Writer.needs_confirmation``), never the pipeline's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ticket_server.access.callers import SCOPE

if TYPE_CHECKING:
    from fastmcp.tools import Tool

    from ticket_server.access.callers import Caller

READ_SCOPE = "tickets:read"
WRITE_SCOPE = "tickets:write"


@dataclass(frozen=True)
class ToolPolicy:
    """``digests``: arguments the audit keeps only as SHA-256 and length (the text is
    stored elsewhere, e.g. a comment row); ``expensive``: the tool's work grows with the
    data (a search, a full read), so it counts against its caller's share. Every write
    (``tickets:write``) is expensive whatever it declares. ``files``: the argument that
    carries uploads, whose long texts skip FastMCP's validation (``tools.attachments.
    set_aside``)."""

    digests: tuple[str, ...] = ()
    expensive: bool = False
    files: str | None = None


NONE = ToolPolicy()


def policy_of(policies: Mapping[str, ToolPolicy], name: str, tags: Iterable[str]) -> ToolPolicy:
    """The policy ``name`` declared, with ``expensive`` set for a write."""
    declared = policies.get(name, NONE)
    if WRITE_SCOPE in tags and not declared.expensive:
        return replace(declared, expensive=True)
    return declared


def required_scopes(tool: Tool) -> frozenset[str]:
    return frozenset(tag for tag in tool.tags if SCOPE.match(tag))


def may_read(caller: Caller | None, component: Any) -> bool:
    """Whether ``caller`` holds every scope tag of a resource, template or prompt (none: anyone)."""
    needed = {tag for tag in component.tags if SCOPE.match(tag)}
    return not needed or (caller is not None and needed <= caller.scopes)
