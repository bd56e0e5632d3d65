"""Toolsets as data: named groups of tools, of which a deployment chooses the ones its
callers' models are offered (``TICKET_SERVER_TOOLSETS``; by default read, respond and triage: the
tools every deployment had before toolsets, so a new toolset is offered only when an
operator opts in, and an upgrade leaves every caller's tools/list as it was).

A caller may have toolsets of its own (``callers add --toolset``), which replace the
deployment's for it. A tool outside the chosen toolsets is neither listed nor callable: a call of it is
answered like a call of an unknown tool, as one outside the caller's scopes is. Every
tool belongs to exactly one toolset (``tests/tools/test_toolsets.py`` keeps this table
equal to the tools the server registers). The fewer tools a model is shown, the better
it picks among them, and the less every request pays for their descriptions
(``ticket-server tools toolsets`` prints each toolset's share of the block).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import get_args

from ticket_server.settings import ToolsetName


@dataclass(frozen=True)
class Toolset:
    description: str
    tools: tuple[str, ...]


TOOLSETS: Mapping[str, Toolset] = {
    "read": Toolset(
        "Look tickets and customers up and search them (the deprecated names included).",
        (
            "get_ticket_status_v2",
            "get_ticket",
            "get_customer",
            "search_tickets_v2",
            "get_ticket_status",
            "search_tickets",
            "get_queue_board",  # app-only (MCP Apps): listed to clients with the extension
        ),
    ),
    "respond": Toolset(
        "Write on a ticket: internal notes, and replies the customer sees.",
        ("add_internal_note", "reply_to_customer"),
    ),
    "triage": Toolset(
        "Change a ticket's status, owner, priority or queue.",
        ("set_ticket_status", "assign_ticket", "escalate_ticket"),
    ),
    "intake": Toolset("Open tickets for customers.", ("open_ticket",)),
    "classify": Toolset(
        "Tag tickets and set their custom fields.", ("update_ticket_tags", "set_ticket_fields")
    ),
    "backlog": Toolset("Count the open backlog, with ages and SLA breaches.", ("count_tickets",)),
    "attachments": Toolset("Read a ticket's attached files.", ("get_attachment",)),
    "related": Toolset(
        "Find tickets like one; link, merge and change tickets in bulk.",
        ("find_similar_tickets", "link_tickets", "merge_tickets", "bulk_update_tickets"),
    ),
}
assert set(TOOLSETS) == set(get_args(ToolsetName)), "every ToolsetName has its tools here"


def tools_in(toolsets: Iterable[str]) -> frozenset[str]:
    """The names of the tools of ``toolsets`` (a name no toolset has offers none)."""
    return frozenset(
        name for toolset in toolsets if toolset in TOOLSETS for name in TOOLSETS[toolset].tools
    )


def offered(toolsets: Iterable[str]) -> frozenset[str] | None:
    """The tools ``toolsets`` offer, or None when they are every toolset (nothing held back)."""
    chosen = set(toolsets)
    return None if chosen >= set(TOOLSETS) else tools_in(chosen)
