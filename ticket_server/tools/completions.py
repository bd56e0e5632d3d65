"""`completion/complete` for the resource templates' and prompts' arguments: ticket
ids, customer ids, queues, owners and reply languages, only ever from the caller's
queues (a caller without the read scope gets no values)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from fastmcp import FastMCP
from mcp.types import (
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)

from ticket_server.tickets.domain import DatabaseUnavailable
from ticket_server.tools.classification_resources import ARGUMENTS as CLASSIFIED
from ticket_server.tools.classification_resources import complete as classified
from ticket_server.tools.full_read import CUSTOMER_URI, TICKET_URI
from ticket_server.tools.prompts import LANGUAGES

if TYPE_CHECKING:  # SQLAlchemy: imported on the first query, not at start
    from ticket_server.tickets.repository import TicketRepository

LIMIT = 20
MAX_PREFIX = 64
# (reference name or URI template, argument) -> what it completes
ARGUMENTS = {
    (TICKET_URI.format("{id}"), "id"): "ticket",
    (CUSTOMER_URI.format("{id}"), "id"): "customer",
    ("summarize_ticket", "ticket_id"): "ticket",
    ("draft_reply", "ticket_id"): "ticket",
    ("draft_reply", "language"): "language",
    ("triage_queue", "queue"): "queue",
    ("triage_queue", "owner"): "owner",
    ("tickets://queue/{name}", "name"): "queue",  # tools.backlog.QUEUE_URI
}


def register(
    mcp: FastMCP,
    repo: TicketRepository,
    readable_queues: Callable[[], Awaitable[frozenset[str] | None]],
) -> None:
    """Set ``mcp``'s completion handler; ``readable_queues()`` gives the caller's queues
    (None = every queue, empty = none)."""
    lookups = {
        "ticket": repo.complete_ticket_ids,
        "customer": repo.complete_customers,
        "queue": repo.complete_queues,
        "owner": repo.complete_owners,
    }

    @mcp.completion
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> list[str]:
        key = ref.name if isinstance(ref, PromptReference) else ref.uri
        kind = ARGUMENTS.get((key, argument.name)) or CLASSIFIED.get((key, argument.name))
        prefix = argument.value.strip()[:MAX_PREFIX]
        if kind is None:
            return []
        if kind in CLASSIFIED.values():  # tags, field names, a field's enum values
            arguments = (context.arguments or {}) if context is not None else {}
            try:
                return await classified(repo, kind, prefix, arguments, LIMIT)
            except DatabaseUnavailable:
                return []
        if kind == "language":
            return [name for name in LANGUAGES if name.lower().startswith(prefix.lower())]
        queues = await readable_queues()
        chosen = ((context.arguments or {}) if context is not None else {}).get("queue")
        if kind == "owner" and chosen:  # owners of the queue already chosen
            chosen = chosen.strip().lower()
            queues = frozenset({chosen}) if queues is None or chosen in queues else frozenset()
        if queues is not None and not queues:
            return []
        try:
            return await lookups[kind](prefix, queues, LIMIT)
        except DatabaseUnavailable:
            return []
