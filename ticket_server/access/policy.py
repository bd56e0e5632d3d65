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
from dataclasses import dataclass

READ_SCOPE = "tickets:read"
WRITE_SCOPE = "tickets:write"


@dataclass(frozen=True)
class ToolPolicy:
    """``digests``: arguments the audit keeps only as SHA-256 and length (the text is
    stored elsewhere, e.g. a comment row); ``expensive``: the tool's work grows with the
    data (a search, a full read), so it counts against its caller's share. Every write
    (``tickets:write``) is expensive whatever it declares."""

    digests: tuple[str, ...] = ()
    expensive: bool = False


NONE = ToolPolicy()


def policy_of(policies: Mapping[str, ToolPolicy], name: str, tags: Iterable[str]) -> ToolPolicy:
    """The policy ``name`` declared, with ``expensive`` set for a write."""
    declared = policies.get(name, NONE)
    if WRITE_SCOPE in tags and not declared.expensive:
        return ToolPolicy(digests=declared.digests, expensive=True)
    return declared
