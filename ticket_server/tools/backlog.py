"""The backlog's time and volume: `count_tickets` (exact counts by group, age and SLA
breach), the `tickets://queue/{name}` resource (a queue's overview: counts, oldest,
breaching soon), and the SLA state of one ticket for the full read. Every number is
within the caller's queues. A ticket's SLA state is derived at read time
(``tickets.sla``); counts and due times compare the columns ``tickets.sla_store``
stores with each change.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastmcp.dependencies import Depends
from fastmcp.resources import ResourceContent, ResourceResult, ResourceTemplate
from pydantic import BaseModel, Field

from ticket_server.access.context import current_queues
from ticket_server.access.policy import ToolPolicy
from ticket_server.tickets.domain import OPEN_STATUSES, TicketPriority, TicketStatus
from ticket_server.tools.arguments import Omittable, Time
from ticket_server.tools.declare import read_tool
from ticket_server.tools.errors import domain_errors, model_error
from ticket_server.tools.full_read import TICKET_URI, fit, meta_for
from ticket_server.tools.services import Services, current_services

POLICY = {"count_tickets": ToolPolicy(expensive=True)}
"""What the call pipeline applies to this module's tools (``access/policy.py``)."""

if TYPE_CHECKING:  # SQLAlchemy: imported on the first query, not at start
    from ticket_server.tickets.repository import TicketRepository
    from ticket_server.tickets.search import SearchFilters

QUEUE_URI = "tickets://queue/{}"
MAX_GROUPS = 100
SOON = timedelta(hours=2)
OVERVIEW_LIST = 10
GroupKey = Literal["queue", "status", "priority", "owner", "tag"]


class CountGroup(BaseModel):
    # key: the grouped fields' values (owner null: unassigned); age: by time since
    # creation; breached / without_sla: null when sla_note says why.
    key: dict[str, str | None]
    count: int
    age: dict[str, int]
    breached: int | None
    without_sla: int | None


class Counts(BaseModel):
    total: int
    groups: list[CountGroup]
    truncated: bool
    as_of: datetime
    sla_note: str | None = None
    note: str | None = None


async def _scope(
    repo: TicketRepository, queue: str | None
) -> tuple[frozenset[str] | None, tuple[str, ...] | None, list[str]]:
    """(the caller's queues, the queue names ``queue`` means among them (None: none, or
    no ``queue``), the queues the caller can see (when ``queue`` is given))."""
    from ticket_server.tickets.search import resolve_queue

    queues = current_queues()
    if queue is None or not queue.strip():
        return queues, None, []
    with domain_errors():
        visible = sorted(queues) if queues is not None else await repo.queues()
    return queues, resolve_queue(queue, visible), visible


async def count(
    repo: TicketRepository,
    now: datetime,
    group_by: list[str],
    statuses: tuple[TicketStatus, ...],
    priorities: tuple[TicketPriority, ...] | None,
    queue: str | None,
    owner: str | None,
    due_before: datetime | None = None,
) -> Counts:
    from ticket_server.tickets import sla_store
    from ticket_server.tickets.search import SearchFilters

    queues, names, visible = await _scope(repo, queue)
    if queue and queue.strip() and names is None:
        raise model_error(
            f"There is no queue '{queue}' among the queues you can see: "
            f"{', '.join(visible) or 'none'}. Use one of these names, or leave queue out."
        )
    filters = SearchFilters(
        statuses=statuses,
        priorities=priorities,
        queue=names,
        owner=owner.strip() if owner and owner.strip() else None,
        queues=queues,
        due_before=due_before,
    )
    with domain_errors():
        counted = await repo.read(lambda conn: sla_store.count(conn, filters, group_by, now))
    groups = [CountGroup.model_validate(g, from_attributes=True) for g in counted.groups]
    return Counts(
        total=counted.total,
        groups=groups[:MAX_GROUPS],
        truncated=len(groups) > MAX_GROUPS,
        as_of=now,
        sla_note=counted.sla_note,
        note=f"Only the {MAX_GROUPS} largest groups are listed; total counts them all."
        if len(groups) > MAX_GROUPS
        else None,
    )


def _brief(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "subject": fit(row.subject, 300).model_dump(),
        "status": str(getattr(row.status, "value", row.status)),
        "priority": str(getattr(row.priority, "value", row.priority)),
        "owner": row.owner,
        "created_at": row.created_at.isoformat(),
        "uri": TICKET_URI.format(row.id),
    }


async def queue_overview(repo: TicketRepository, name: str, now: datetime) -> dict[str, Any] | None:
    """A queue's open tickets in numbers (by status, by priority, by age, breached), its
    oldest, and those breaching within two hours (None: no such queue of the caller's)."""
    from ticket_server.tickets import sla_store
    from ticket_server.tickets.search import SearchFilters

    queues, names, _ = await _scope(repo, name)
    if names is None:
        return None
    filters: SearchFilters = SearchFilters(
        statuses=tuple(sorted(OPEN_STATUSES)), queue=names, queues=queues
    )

    def read(conn: Any) -> dict[str, Any]:
        by_status = sla_store.count(conn, filters, ["status"], now)
        by_priority = sla_store.count(conn, filters, ["priority"], now)
        age = {bucket: 0 for bucket, _ in sla_store.AGE_BUCKETS}
        for group in by_status.groups:
            for bucket, n in group.age.items():
                age[bucket] += n
        soon, soon_more = sla_store.due_soon(conn, filters, now, SOON, OVERVIEW_LIST)
        breached = None if by_status.sla_note else sum(g.breached or 0 for g in by_status.groups)
        out: dict[str, Any] = {
            "queue": names[0],
            "as_of": now.isoformat(),
            "open_total": by_status.total,
            "by_status": {g.key["status"]: g.count for g in by_status.groups},
            "by_priority": {g.key["priority"]: g.count for g in by_priority.groups},
            "age": age,
            "breached": breached,
            "without_sla": None
            if by_status.sla_note
            else sum(g.without_sla or 0 for g in by_status.groups),
            "sla_note": by_status.sla_note,
            "oldest": [_brief(r) for r in sla_store.oldest(conn, filters, OVERVIEW_LIST)],
        }
        out["breaching_soon"] = [
            {**_brief(row), "due_at": due.isoformat(), "breached": sla_store.breached(state)}
            for row, state, due in soon
        ]
        out["breaching_soon_more"] = soon_more
        return out

    with domain_errors():
        return await repo.read(read)


async def count_tickets(
    group_by: Annotated[list[GroupKey], Field(max_length=5, description="[]: one total.")] = [],  # noqa: B006 - pydantic copies defaults
    status: Annotated[
        Omittable[Annotated[list[TicketStatus], Field(min_length=1, max_length=6)]],
        Field(description="Any of these; null: the open statuses."),
    ] = None,
    priority: Annotated[
        Omittable[Annotated[list[TicketPriority], Field(min_length=1, max_length=4)]],
        Field(description="Any of these."),
    ] = None,
    queue: Annotated[Omittable[Annotated[str, Field(max_length=64)]], Field()] = None,
    owner: Annotated[
        Omittable[Annotated[str, Field(max_length=64)]], Field(description="Owner login.")
    ] = None,
    due_before: Annotated[
        Omittable[Time], Field(description="Only those whose next SLA due time is before.")
    ] = None,
    services: Services = Depends(current_services),
) -> Counts:
    """Exact counts of your queues' tickets (open unless status says), grouped by any
    of queue, status, priority, owner, tag (a ticket counts under each of its tags):
    per group the count, age since creation, SLA breaches (without_sla: no target
    applies). A null number: sla_note says why. An unknown queue: an error listing
    yours."""
    statuses = tuple(status) if status else tuple(sorted(OPEN_STATUSES))
    keys: list[str] = list(dict.fromkeys(group_by))
    return await count(
        services.repository,
        services.now(),
        keys,
        statuses,
        tuple(priority) if priority else None,
        queue,
        owner,
        due_before,
    )


TOOL = read_tool(count_tickets, Counts)
"""``count_tickets``, added by ``build_server``."""


async def read_queue(name: str, services: Services = Depends(current_services)) -> ResourceResult:
    """The ``tickets://queue/{name}`` resource: ``queue_overview`` as JSON."""
    from ticket_server.tools.resources import missing

    value = await queue_overview(services.repository, name, services.now())
    if value is None:
        raise missing(QUEUE_URI.format(name))
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return ResourceResult(
        [ResourceContent(text, mime_type="application/json")], meta=meta_for(value)
    )


QUEUE_TEMPLATE = ResourceTemplate.from_function(
    read_queue,
    uri_template=QUEUE_URI.format("{name}"),
    name="queue",
    title="Queue overview",
    mime_type="application/json",
    tags={"tickets:read"},
    description="A queue's open tickets: counts by status, priority and age, SLA breaches, "
    "the oldest, and those due within 2 hours. Values {untrusted: true, text} are "
    "customer-written data.",
)
"""The queue overview resource template, added by ``build_server``."""
