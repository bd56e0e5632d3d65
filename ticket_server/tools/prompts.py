"""Prompts a support team uses: summarise a ticket, triage a queue, draft a reply.

Each prompt is two messages: the server's instruction (server-written text only, with
ids and names taken from the database, never from customer text), then the data as an
embedded JSON resource (the ticket) or JSON text (a queue) in which customer-written text is labelled
``{untrusted: true, text}``. The result's ``_meta`` carries the same untrusted flag as
the tools'. A ticket or queue the caller may not see answers as one that does not exist.
"""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Annotated, Any

from fastmcp.dependencies import Depends
from fastmcp.exceptions import PromptError
from fastmcp.prompts import Message, Prompt, PromptResult
from mcp.types import EmbeddedResource, TextResourceContents
from pydantic import Field

from ticket_server.access.context import current_queues
from ticket_server.tickets.domain import OPEN_STATUSES
from ticket_server.tools.errors import domain_errors
from ticket_server.tools.full_read import (
    TICKET_URI,
    UNTRUSTED_NOTE,
    fit,
    meta_for,
    read_ticket,
    ticket_json,
)
from ticket_server.tools.services import Services, current_services
from ticket_server.tools.ticket_shapes import TICKET_FIELDS

if TYPE_CHECKING:  # SQLAlchemy: imported on the first query, not at start
    from ticket_server.tickets.repository import TicketRepository

TRIAGE_LIMIT = 20
LANGUAGES = (
    "English",
    "German",
    "French",
    "Spanish",
    "Portuguese",
    "Italian",
    "Dutch",
    "Polish",
    "Swedish",
    "Danish",
    "Japanese",
)
_LANGUAGE = re.compile(r"^[^\W\d_]+(?: [^\W\d_]+){0,2}$")


def fixable(message: str) -> PromptError:
    """An argument the client can fix (unknown ticket or queue, bad language): FastMCP
    logs it at INFO, keeping ERROR for what an operator must look at (C24)."""
    return PromptError(message, log_level=logging.INFO)


def _data(uri: str, value: Any) -> Message:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return Message(
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(uri=uri, mimeType="application/json", text=text),
        )
    )


def _result(instruction: str, uri: str | None, value: Any, description: str) -> PromptResult:
    data = _data(uri, value) if uri is not None else Message(value)
    return PromptResult([Message(instruction), data], description=description, meta=meta_for(value))


async def _ticket(repo: TicketRepository, ticket_id: str) -> dict[str, Any]:
    """The ticket's JSON as a prompt embeds it (every field but sla); else a fixable error."""
    with domain_errors():
        view = await read_ticket(repo, ticket_id, current_queues())
    if view is None:
        raise fixable(f"No ticket with id {ticket_id[:64]!r}.")
    return ticket_json(view, set(TICKET_FIELDS) - {"sla"})


async def summarize_ticket(
    ticket_id: Annotated[str, Field(description="e.g. SUP-4412")],
    services: Services = Depends(current_services),
) -> PromptResult:
    """Summarise a ticket for a support agent: the problem, what was done, where it stands."""
    value = await _ticket(services.repository, ticket_id)
    instruction = (
        f"Summarise support ticket {value['id']} for an agent taking it over, in at most "
        "eight lines: the customer's problem, what has been done (public replies and "
        "internal notes), the current status and owner, and the next step. The ticket "
        f"follows as JSON. {UNTRUSTED_NOTE}"
    )
    return _result(instruction, TICKET_URI.format(value["id"]), value, f"Summary of {value['id']}")


async def triage_queue(
    queue: Annotated[str, Field(description="e.g. billing")],
    owner: Annotated[str | None, Field(description="Only this owner's tickets.")] = None,
    services: Services = Depends(current_services),
) -> PromptResult:
    """Triage a queue's open tickets: what to handle first, and who should."""
    from ticket_server.tickets.search import SearchFilters, resolve_queue

    repo = services.repository
    queues = current_queues()
    with domain_errors():
        visible = sorted(queues) if queues is not None else await repo.queues()
        names = resolve_queue(queue, visible)
        rows = []
        if names is not None:
            filters = SearchFilters(
                statuses=tuple(sorted(OPEN_STATUSES)),
                queue=names,
                owner=owner.strip() if owner and owner.strip() else None,
                queues=queues,
            )
            rows = (await repo.search("", filters, "newest", None, TRIAGE_LIMIT)).tickets
    if not rows:
        owned = f" owned by {owner.strip()[:64]!r}" if owner and owner.strip() else ""
        raise fixable(f"No open tickets in a queue named {queue[:64]!r}{owned}.")
    name = rows[0][0].queue
    from ticket_server.tools.backlog import QUEUE_URI, queue_overview

    overview = await queue_overview(repo, name, services.now())
    tickets = [
        {
            "id": t.id,
            "subject": fit(t.subject, 400).model_dump(),
            "status": t.status.value,
            "priority": t.priority.value,
            "owner": t.owner,
            "updated_at": t.updated_at.isoformat(),
        }
        for t, _ in rows
    ]
    value = {
        "queue": name,
        "overview": overview,
        "overview_uri": QUEUE_URI.format(name),
        "open_tickets": tickets,
        "shown": len(tickets),
        "more": len(tickets) == TRIAGE_LIMIT,
    }
    instruction = (
        f"Triage the open tickets of the {name} queue. `overview` is the queue in numbers "
        "(open by status, priority and age, SLA breaches), its oldest tickets and those "
        "breaching their SLA within 2 hours (breached ones included, soonest due first); "
        f"`open_tickets` the {TRIAGE_LIMIT} most recently updated at most (`more` says "
        "whether there are others). Order what needs attention first (SLA due or breached, "
        "priority, waiting time, unassigned), say for each in one line why, and suggest an "
        f"owner where there is none. The data follows as JSON. {UNTRUSTED_NOTE}"
    )
    return _result(instruction, None, value, f"Triage of {name}")


async def draft_reply(
    ticket_id: Annotated[str, Field(description="e.g. SUP-4412")],
    language: Annotated[str, Field(description="Language of the reply, e.g. German.")] = "English",
    services: Services = Depends(current_services),
) -> PromptResult:
    """Draft a public reply to a ticket's customer, in a given language."""
    language = language.strip()
    if not _LANGUAGE.match(language) or len(language) > 40:
        raise fixable("language must be a language's name in letters, e.g. English or German.")
    value = await _ticket(services.repository, ticket_id)
    instruction = (
        f"Draft a public reply in {language} to the customer of support ticket {value['id']}: "
        "answer their latest message, say what happens next, and ask only for what is still "
        "missing. Never disclose internal notes (visibility internal) or other customers' "
        f"data. The ticket follows as JSON. {UNTRUSTED_NOTE}"
    )
    return _result(instruction, TICKET_URI.format(value["id"]), value, f"Reply to {value['id']}")


PROMPTS = [
    Prompt.from_function(
        summarize_ticket, name="summarize_ticket", title="Summarise a ticket", tags={"tickets:read"}
    ),
    Prompt.from_function(
        triage_queue, name="triage_queue", title="Triage a queue", tags={"tickets:read"}
    ),
    Prompt.from_function(
        draft_reply, name="draft_reply", title="Draft a reply", tags={"tickets:read"}
    ),
]
"""The prompts, added by ``build_server``."""
