"""Opening a ticket: one transaction of the write path (as ``tickets.writes``).

In its transaction an open:

1. with an idempotency key (PostgreSQL: under the advisory lock of the caller's key),
   returns the first result of that key (a replay, nothing written) or refuses a key used
   for another request;
2. checks the queue (it exists, is active, and the caller may write in it), and the
   requester: an e-mail address already known names its requester and organisation; a
   new one makes a requester (its name and organisation are then required); without an
   e-mail the organisation alone (``customer_id``) is the requester;
3. (all of it under the lock that serialises opens, ``directory.lock_ids``, taken
   first) makes the next ``SUP-<n>``, inserts the ticket (status ``new``) with its search columns and postings
   (``repository.insert_tickets``), and the requester if new;
4. stores the idempotency key with the result, spends a confirmation's nonce and calls
   ``audit(connection, outcome)``: a write whose audit fails is rolled back with it.

Without ``audit`` the same checks run in one read (``Checked``), before a person is asked
to confirm. A refusal (``WriteRefused``) changes nothing.

Tags and custom fields (issue 33, part B: ``tickets.classification``) are applied in
the transaction by ``apply``: a callable of ``(connection, ticket_id)`` given by the tool,
so the fields' validation and storage stay their module's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection, select

from ticket_server.tickets import directory
from ticket_server.tickets.attachments import AttachmentRecord
from ticket_server.tickets.domain import (
    ConfirmationSpent,
    EventField,
    IdempotencyConflict,
    QueueNotWritable,
    TicketPriority,
    TicketStatus,
    WriteRefused,
)
from ticket_server.tickets.models import Ticket, WriteRequest
from ticket_server.tickets.repository import TicketRepository, insert_tickets
from ticket_server.tickets.writes import (
    Audit,
    Checked,
    FieldChange,
    TicketWrites,
    WriteContext,
    WriteOutcome,
    _record_request,
    _spend,
    _spent,
)

_TICKETS, _REQUESTS = Ticket.__table__, WriteRequest.__table__
NEW_TICKET = "(new)"
"""What an open's confirmation state and write record name as its ticket before it has an id."""


class UnknownQueue(WriteRefused):
    reason = "unknown queue"


class InactiveQueue(WriteRefused):
    reason = "inactive queue"


class RequesterRefused(WriteRefused):
    reason = "requester refused"


@dataclass(frozen=True)
class OpenRequest:
    subject: str
    body: str
    queue: str
    priority: TicketPriority
    channel: str
    requester_email: str | None
    requester_name: str | None
    customer_id: str | None


class OpenedRequester(BaseModel):
    """The requester of an opened ticket."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    email: str


class OpenedTicket(WriteOutcome):
    """What an open did: the new ticket (``WriteOutcome``'s state, ``changes`` the fields
    it was given) with its text, queue, organisation and requester."""

    subject: str
    body: str
    queue_display_name: str
    customer_id: str
    customer: str
    requester: OpenedRequester | None
    requester_created: bool
    channel: str
    created_at: datetime


def resolve_queue(conn: Connection, ctx: WriteContext, name: str) -> directory.QueueInfo:
    """The active queue ``name`` (folded as a search's queue filter is) the caller may
    write in; else a ``WriteRefused`` saying which queues it may use."""
    from ticket_server.tickets.analyzer import fold

    every = directory.list_queues(conn)
    wanted = fold(name.strip())
    found = next((q for q in every if fold(q.name) == wanted), None) if wanted else None
    usable = [q.name for q in every if q.active and (ctx.queues is None or q.name in ctx.queues)]
    yours = ", ".join(usable) or "none"
    if found is None:
        raise UnknownQueue(
            f"There is no queue {name[:64]!r}; open the ticket in one of: {yours}. Nothing "
            "was changed."
        )
    if ctx.queues is not None and found.name not in ctx.queues:
        raise QueueNotWritable(
            f"This caller may not write in queue {found.name!r}; it may open tickets in: "
            f"{yours}. Nothing was changed."
        )
    if not found.active:
        raise InactiveQueue(
            f"Queue {found.name!r} is inactive and takes no new tickets; use one of: {yours}. "
            "Nothing was changed."
        )
    return found


def resolve_requester(
    conn: Connection, request: OpenRequest
) -> tuple[directory.RequesterInfo | None, tuple[str, str]]:
    """``(the known requester or None, (organisation id, name))``; a ``RequesterRefused``
    when the request does not name one clearly."""
    customer = None
    if request.customer_id is not None:
        customer = directory.customer_by_id(conn, request.customer_id)
        if customer is None:
            raise RequesterRefused(
                f"There is no customer {request.customer_id[:32]!r}; give an organisation's "
                "id (e.g. CUS-1000, get_customer shows it). Nothing was changed."
            )
    if request.requester_email is None:
        if customer is None:
            raise RequesterRefused(
                "Give the requester's e-mail (requester_email), or the customer's id "
                "(customer_id), or both; nothing was changed."
            )
        if request.requester_name is not None:
            raise RequesterRefused(
                "requester_name needs requester_email (the name of which contact?); "
                "nothing was changed."
            )
        return None, customer
    email = directory.fold_email(request.requester_email)
    if not directory.EMAIL.match(email):
        raise RequesterRefused(
            f"requester_email {request.requester_email[:80]!r} is not an e-mail address "
            "(name@example.com); nothing was changed."
        )
    known = directory.requester_by_email(conn, email)
    if known is not None:
        if customer is not None and customer[0] != known.customer_id:
            raise RequesterRefused(
                f"{email} is a contact of {known.customer_id} ({known.customer}), not of "
                f"{customer[0]}; give its own customer_id or none. Nothing was changed."
            )
        return known, (known.customer_id, known.customer)
    if customer is None or request.requester_name is None:
        raise RequesterRefused(
            f"{email} is not a known requester: to add one, give requester_name and the "
            "customer_id of its organisation. Nothing was changed."
        )
    return None, customer


class TicketOpening:
    """``open`` over a repository's engine, as ``TicketWrites``' operations are."""

    def __init__(self, repository: TicketRepository) -> None:
        self.repository = repository
        self._writes = TicketWrites(repository)

    async def open(
        self,
        ctx: WriteContext,
        ticket_id: str,
        request: OpenRequest,
        apply: Callable[[Connection, str], list[AttachmentRecord]] | None,
        audit: Audit | None,
    ) -> tuple[OpenedTicket, bool] | Checked:
        """Open the ticket ``request`` describes (``ticket_id``: ``NEW_TICKET``);
        ``apply(conn, new_id)`` runs in the transaction after the insert (tags, fields,
        files) and returns the files it stored (the outcome's, so the audit's)."""

        def checked(conn: Connection, lock: bool) -> tuple[Checked, tuple[Any, Any, Any]]:
            if ctx.idempotency_key is not None:
                if lock:
                    self._writes._key_turn(conn, ctx, ctx.idempotency_key)
                first = conn.execute(
                    select(_REQUESTS.c.request_sha256, _REQUESTS.c.result).where(
                        _REQUESTS.c.caller == ctx.actor,
                        _REQUESTS.c.idempotency_key == ctx.idempotency_key,
                    )
                ).first()
                if first is not None:
                    if first.request_sha256 != ctx.request_sha256:
                        raise IdempotencyConflict()
                    replay = OpenedTicket.model_validate_json(first.result)
                    return Checked(replay, {}, []), (None, None, None)
            if _spent(conn, ctx):
                raise ConfirmationSpent()
            queue = resolve_queue(conn, ctx, request.queue)
            known, customer = resolve_requester(conn, request)
            changes = [
                FieldChange(field=EventField.STATUS, old_value=None, new_value="new"),
                FieldChange(field=EventField.PRIORITY, old_value=None, new_value=request.priority),
                FieldChange(field=EventField.QUEUE, old_value=None, new_value=queue.name),
            ]
            return Checked(None, {}, changes), (known, queue, customer)

        if audit is None:
            return (await self.repository.read(lambda conn: checked(conn, False)))[0]

        def work(conn: Connection) -> tuple[OpenedTicket, bool]:
            # First: concurrent opens take turns from here, so two naming one new e-mail
            # add it once (the second finds it) and two new tickets never share an id.
            directory.lock_ids(conn)
            found, (known, queue, customer) = checked(conn, True)
            if found.replay is not None:
                assert isinstance(found.replay, OpenedTicket)
                return found.replay, True
            now = datetime.now(UTC)
            created = known is None and request.requester_email is not None
            requester = known
            if created:
                assert request.requester_name is not None and request.requester_email is not None
                requester = directory.add_requester(
                    conn, request.requester_name, request.requester_email, customer[0]
                )
            new_id = directory.next_id(conn, _TICKETS, "SUP")
            insert_tickets(
                conn,
                [
                    {
                        "id": new_id,
                        "subject": request.subject,
                        "body": request.body,
                        "status": TicketStatus.NEW,
                        "priority": request.priority,
                        "owner": None,
                        "queue": queue.name,
                        "customer": customer[1],
                        "requester_id": requester.id if requester is not None else None,
                        "channel": request.channel,
                        "created_at": now,
                        "updated_at": now,
                    }
                ],
                references_exist=True,  # the queue and organisation were checked above
            )
            files = apply(conn, new_id) if apply is not None else []
            outcome = OpenedTicket(
                ticket_id=new_id,
                status=TicketStatus.NEW,
                priority=request.priority,
                owner=None,
                queue=queue.name,
                version=1,
                updated_at=now,
                changes=found.changes,
                subject=request.subject,
                body=request.body,
                queue_display_name=queue.display_name,
                customer_id=customer[0],
                customer=customer[1],
                requester=OpenedRequester(
                    id=requester.id, name=requester.name, email=requester.email
                )
                if requester is not None
                else None,
                requester_created=created,
                channel=request.channel,
                created_at=now,
                attachments=files,
            )
            result = outcome.model_dump_json()
            if ctx.idempotency_key is not None:
                _record_request(conn, ctx, ctx.idempotency_key, new_id, result, now)
            _spend(conn, ctx, new_id, result, now)
            audit(conn, outcome)
            return outcome, False

        return await self.repository.transaction(work)
