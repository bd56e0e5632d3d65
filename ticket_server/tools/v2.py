"""The current tools: typed enums, RFC 3339 timestamps, ranked and paged search."""

from __future__ import annotations

import json
from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import AwareDatetime, Field

from ticket_server.access.context import current_queues
from ticket_server.tickets.models import TicketStatus
from ticket_server.tickets.repository import TicketRepository
from ticket_server.tickets.schemas import SearchPage, TicketStatusV2, TicketSummaryV2
from ticket_server.tickets.search import SearchFilters, search_terms
from ticket_server.tools import READ_ONLY
from ticket_server.tools.cursor import MAX_CURSOR_LENGTH, CursorCodec, CursorError, fingerprint
from ticket_server.tools.errors import domain_errors
from ticket_server.tools.v1 import MAX_ID_LENGTH, normalise_ticket_id, not_found

MAX_PAGE_BYTES = 16_384
"""A search page's JSON never exceeds this many bytes (UTF-8); a page is shortened to fit."""
MAX_QUERY_LENGTH = 500


def register(mcp: FastMCP, repo: TicketRepository, cursors: CursorCodec) -> None:
    """Add the current (v2) tools to ``mcp``."""

    @mcp.tool(name="get_ticket_status_v2", annotations=READ_ONLY, tags={"tickets:read"})
    async def get_ticket_status_v2(
        ticket_id: Annotated[str, Field(description="Ticket id, e.g. SUP-4412 (case-insensitive).")],
    ) -> TicketStatusV2:
        """Look up one support ticket's status record by its id.

        Returns id, subject, status (new | open | in_progress | waiting_on_customer |
        resolved | closed), priority (low | normal | high | urgent), owner (assignee
        login, null when unassigned), queue, created_at and updated_at (RFC 3339, UTC).
        An unknown id is an error naming the id.
        """
        key = normalise_ticket_id(ticket_id)
        if len(key) > MAX_ID_LENGTH:
            raise not_found(ticket_id)
        with domain_errors():
            ticket = await repo.get(key, queues=current_queues())
        if ticket is None:
            raise not_found(ticket_id)
        return TicketStatusV2.model_validate(ticket, from_attributes=True)

    @mcp.tool(name="search_tickets_v2", annotations=READ_ONLY, tags={"tickets:read"})
    async def search_tickets_v2(
        query: Annotated[
            str,
            Field(
                max_length=MAX_QUERY_LENGTH,
                description="Words to find in ticket subjects and bodies (all must match; "
                "case and accents ignored). Empty: list tickets newest first.",
            ),
        ] = "",
        status: Annotated[
            list[TicketStatus] | None,
            Field(min_length=1, max_length=6, description="Only tickets in one of these statuses."),
        ] = None,
        queue: Annotated[str | None, Field(max_length=64, description="Only this queue, e.g. billing.")] = None,
        owner: Annotated[str | None, Field(max_length=64, description="Only this assignee login, e.g. r.mehta.")] = None,
        updated_after: Annotated[
            AwareDatetime | None,
            Field(description="Only tickets updated after this RFC 3339 time, e.g. 2026-07-01T00:00:00Z."),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=50, description="Most tickets per page, 1 to 50.")] = 10,
        cursor: Annotated[
            str | None,
            Field(max_length=MAX_CURSOR_LENGTH, description="next_cursor from the previous page; omit for the first page."),
        ] = None,
    ) -> SearchPage:
        """Search support tickets by words in their subject and body, with filters; paged.

        Results are ranked by relevance (subject matches weigh more); with an empty
        query, matching tickets are listed by last update, newest first. Query text is
        plain words: quotes, *, -, AND, NEAR( and brackets have no special meaning.
        Filters combine with AND: status (list), queue, owner, updated_after (RFC 3339).
        Returns {tickets: [{id, subject, status, priority, owner, queue, updated_at}],
        next_cursor}: pass next_cursor back unchanged (same query and filters) for the
        next page; it is null on the last page. A page holds at most `limit` tickets
        (1 to 50, default 10) and at most 16 KiB of JSON, so it may hold fewer.
        Errors: an invalid filter or limit names the bound; a cursor that is damaged
        or from another search says to start again without it.
        """
        terms = search_terms(query)
        filters = SearchFilters(
            statuses=tuple(dict.fromkeys(status)) if status else None,
            queue=queue, owner=owner, updated_after=updated_after,
            queues=current_queues(),  # the caller's scope, from the access room
        )
        search = fingerprint(
            terms=terms, status=sorted(filters.statuses or ()), queue=queue, owner=owner,
            updated_after=updated_after.isoformat() if updated_after else None,
        )
        after = None
        if cursor:
            try:
                after = cursors.decode(cursor, search)
            except CursorError as exc:
                raise ToolError(
                    "The cursor is not valid for this search (damaged, or made for other "
                    "query or filters). Repeat the search without a cursor to start again."
                ) from exc
        with domain_errors():
            rows = await repo.search(query, filters, after, limit + 1)
        tickets: list[TicketSummaryV2] = []
        size = len(json.dumps({"tickets": [], "next_cursor": "x" * MAX_CURSOR_LENGTH}))
        for ticket, _ in rows[:limit]:
            item = TicketSummaryV2.model_validate(ticket, from_attributes=True)
            item_size = len(item.model_dump_json().encode()) + 1
            if tickets and size + item_size > MAX_PAGE_BYTES:
                break
            tickets.append(item)
            size += item_size
        more = len(rows) > len(tickets)
        next_cursor = cursors.encode(rows[len(tickets) - 1][1], search) if more and tickets else None
        return SearchPage(tickets=tickets, next_cursor=next_cursor)
