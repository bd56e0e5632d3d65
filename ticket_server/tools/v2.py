"""The current tools: typed enums, RFC 3339 timestamps, ranked and paged search."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.tools import Tool
from pydantic import AfterValidator, AwareDatetime, Field
from pydantic.json_schema import SkipJsonSchema

from ticket_server.access.context import current_queues
from ticket_server.tickets.domain import TicketStatus
from ticket_server.tickets.schemas import SearchPage, TicketStatusV2, TicketSummaryV2
from ticket_server.tools import READ_ONLY
from ticket_server.tools.cursor import MAX_CURSOR_LENGTH, CursorCodec, CursorError, fingerprint
from ticket_server.tools.errors import domain_errors, utc_representable
from ticket_server.tools.lookup import find_ticket

if TYPE_CHECKING:  # SQLAlchemy: imported on the first query, not at start
    from ticket_server.tickets.repository import TicketRepository

MAX_PAGE_BYTES = 16_384
"""A search page's JSON never exceeds this many bytes (UTF-8); a page is shortened to fit."""
MAX_QUERY_LENGTH = 500
Name = Annotated[str, Field(max_length=64)]
# Bounds sit on the non-null type: on the union they would be applied to null too.


def _drop_null_defaults(tool: Tool) -> None:
    # An omitted filter means "any"; a `"default": null` would contradict the type the
    # schema states, and costs bytes in every tools/list.
    for schema in tool.parameters.get("properties", {}).values():
        if "default" in schema and schema["default"] is None:
            del schema["default"]


def register(mcp: FastMCP, repo: TicketRepository, cursors: CursorCodec) -> None:
    """Add the current (v2) tools to ``mcp``."""

    @mcp.tool(name="get_ticket_status_v2", annotations=READ_ONLY, tags={"tickets:read"})
    async def get_ticket_status_v2(
        ticket_id: Annotated[str, Field(description="Ticket id, e.g. SUP-4412.")],
    ) -> TicketStatusV2:
        """A ticket's status record by id; owner null if unassigned, times RFC 3339 UTC.
        Unknown id: an error naming it."""
        ticket = await find_ticket(repo, ticket_id)
        return TicketStatusV2.model_validate(ticket, from_attributes=True)

    async def search_tickets_v2(
        query: Annotated[
            str, Field(max_length=MAX_QUERY_LENGTH, description="Words to find.")
        ] = "",
        # Optional filters are null-able in Python but not in the schema: omitting one is
        # the way to say "any", and the schema block every model reads stays small.
        status: Annotated[
            Annotated[list[TicketStatus], Field(min_length=1, max_length=6)] | SkipJsonSchema[None],
            Field(description="Any of these."),
        ] = None,
        queue: Annotated[Name | SkipJsonSchema[None], Field(description="e.g. billing")] = None,
        owner: Annotated[Name | SkipJsonSchema[None], Field(description="Assignee login.")] = None,
        updated_after: Annotated[
            Annotated[AwareDatetime, AfterValidator(utc_representable)] | SkipJsonSchema[None],
            Field(description="RFC 3339 time."),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=50, description="Tickets per page, 1-50.")] = 10,
        cursor: Annotated[
            Annotated[str, Field(max_length=MAX_CURSOR_LENGTH)] | SkipJsonSchema[None],
            Field(description="next_cursor of the last page."),
        ] = None,
    ) -> SearchPage:
        """Search tickets by words in subject and body (all must match; case, accents and
        query syntax ignored), best first per block of newest matches; empty query: newest
        first. Filters: AND. Next page: pass next_cursor back as cursor, same query and
        filters (null on the last). A page holds at most `limit` tickets and 16 KiB of JSON.
        """
        from ticket_server.tickets.search import SearchFilters, search_terms

        terms = search_terms(query)
        filters = SearchFilters(
            statuses=tuple(dict.fromkeys(status)) if status else None,
            queue=queue, owner=owner, updated_after=updated_after,
            queues=current_queues(),  # the caller's scope, from the access room
        )
        search = fingerprint(
            terms=terms, status=sorted(filters.statuses or ()), queue=queue, owner=owner,
            updated_after=updated_after.isoformat() if updated_after else None,
            window=repo.rank_window,  # a cursor's place means nothing under another window size
        )
        after = None
        if cursor:
            try:
                after = cursors.decode(cursor, search, ranked=bool(terms))
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

    tool = Tool.from_function(
        search_tickets_v2, name="search_tickets_v2", annotations=READ_ONLY, tags={"tickets:read"}
    )
    _drop_null_defaults(tool)
    mcp.add_tool(tool)
