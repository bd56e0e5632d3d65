"""The write path: internal notes, replies to the customer, status, assignment and
escalation, each one transaction (``TicketRepository.transaction``).

Every write, in its transaction:

1. locks the ticket (SQLite: the database write lock; PostgreSQL: ``FOR UPDATE``, and
   this process's writers of other tickets go ahead);
2. with an idempotency key (on PostgreSQL under an advisory lock of the caller's key, so
   concurrent calls with one key wait for each other), returns the first result of that
   key (a replay, nothing written), or refuses the key when it was used for another
   request;
3. checks the caller's writable queues, the closed-ticket rule (``CLOSED_RULE``: a closed
   ticket takes internal notes only) and ``expected_version`` (stale: ``StaleVersion``
   with the current state);
4. applies the change, bumps ``tickets.version`` and ``updated_at`` (the UPDATE repeats
   the version read in its WHERE) and moves the ticket's search postings with it,
   appends one ``ticket_events`` row per changed field and the comment, if any;
5. stores the idempotency key with the result (and spends the confirmation's nonce), and calls ``audit(connection, outcome)``,
   which the caller uses to write its audit record: a write whose audit record fails is
   rolled back with it.

The same checks run without a lock or a write (``audit=None``: a ``Checked``) before a
person is asked to confirm. A refusal (``WriteRefused``) rolls everything back. Nothing here knows who the caller is
beyond the name and queues it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection, func, insert, select, update

from ticket_server.tickets import sla_store
from ticket_server.tickets.attachments import Attaching, AttachmentRecord, attach
from ticket_server.tickets.domain import (
    NEXT_STATUSES,
    AuthorType,
    ConfirmationSpent,
    EventField,
    IdempotencyConflict,
    IllegalTransition,
    NoChange,
    QueueNotWritable,
    StaleVersion,
    TicketClosed,
    TicketNotWritable,
    TicketPriority,
    TicketStatus,
    Visibility,
)
from ticket_server.tickets.models import Comment, Ticket, TicketEvent, WriteRequest
from ticket_server.tickets.repository import TicketRepository
from ticket_server.tickets.search import comment_search_bodies

_TICKETS, _COMMENTS, _EVENTS = Ticket.__table__, Comment.__table__, TicketEvent.__table__
_REQUESTS = WriteRequest.__table__
_STATE = ("status", "priority", "owner", "queue", "version", "updated_at")


@dataclass(frozen=True)
class WriteContext:
    """Who writes and under which conditions. ``queues``: the queues the actor may write
    (None: every queue). ``request_sha256``: the hash of the tool and its arguments
    (without the key), what an idempotency key is bound to."""

    actor: str
    tool: str
    request_sha256: str
    queues: frozenset[str] | None = None
    idempotency_key: str | None = None
    expected_version: int | None = None
    confirmation_nonce: str | None = None
    """The single-use nonce of the person's confirmation (2026-07-28), spent by the write."""
    by_assistant: bool = False
    """The actor is an assistant (a caller of kind ``assistant``): its comments and history
    events say so."""


class FieldChange(BaseModel):
    model_config = ConfigDict(frozen=True)

    field: EventField
    old_value: str | None
    new_value: str | None


class AddedComment(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: int
    visibility: Visibility
    created_at: datetime


class WriteOutcome(BaseModel):
    """What a write did: the ticket's state after it, each changed field, the comment it
    added (if any)."""

    model_config = ConfigDict(frozen=True)

    ticket_id: str
    status: TicketStatus
    priority: TicketPriority
    owner: str | None
    queue: str
    version: int
    updated_at: datetime
    changes: list[FieldChange]
    comment: AddedComment | None = None
    classification: dict[str, Any] | None = None
    """A tag or custom field write (``classify``): the ticket's ``tags`` and
    ``custom_fields`` after it, and ``before``/``after`` of what it changed."""
    attachments: list[AttachmentRecord] = []


Audit = Callable[[Connection, WriteOutcome], None]
"""Writes the audit record of a write, inside its transaction."""
Classify = Callable[[Connection, dict[str, Any], datetime | None], dict[str, Any]]
"""A tag and field change (``tickets.classification``) of the ticket whose state it is
given: checks it (time None) or makes it in the write's transaction; returns the
``WriteOutcome.classification``."""


@dataclass(frozen=True)
class _Plan:
    fields: dict[EventField, Any]
    comment: tuple[str, Visibility] | None = None
    classification: Classify | None = None
    attaching: Attaching | None = None
    # For writes planned in other modules (tickets.links, tickets.merge): a check run in
    # the write's transaction (and in its check without a lock) that may refuse, and more
    # rows to write.
    check: Callable[[Connection], None] | None = None
    apply: Callable[[Connection, datetime], None] | None = None


Plan = _Plan


@dataclass(frozen=True)
class Checked:
    """What ``check`` found: the first result of the idempotency key (``replay``; nothing
    to ask or write), or the ticket's state and the changes the write would make."""

    replay: WriteOutcome | None
    state: dict[str, Any]
    changes: list[FieldChange]
    classification: dict[str, Any] | None = None


class TicketWrites:
    """The write operations over a repository's engine. Each returns ``(outcome,
    replayed)``: ``replayed`` is True when the idempotency key's first result is returned
    and nothing was written. Refusals raise ``WriteRefused`` subclasses;
    ``DatabaseUnavailable`` when the database does not answer.

    Each takes ``audit``; without it (None) nothing is written: the same checks run in
    one read and the answer is a ``Checked`` (``check``), so that a person is never asked
    to confirm a write that would be refused. The write itself checks everything again
    under its lock."""

    def __init__(self, repository: TicketRepository) -> None:
        self.repository = repository

    async def add_comment(
        self,
        ctx: WriteContext,
        ticket_id: str,
        body: str,
        visibility: Visibility,
        attaching: Attaching | None = None,
        *,
        audit: Audit | None,
    ) -> tuple[WriteOutcome, bool] | Checked:
        """An internal note (``INTERNAL``) or a reply the customer sees (``PUBLIC``); a
        closed ticket takes internal notes only (``CLOSED_RULE``). ``attaching``: files
        stored with it, in the same transaction (``tickets.attachments.attach``)."""
        return await self._write(
            ctx,
            ticket_id,
            lambda row: _Plan({}, (body, visibility), attaching=attaching),
            audit,
            closed_ok=visibility is Visibility.INTERNAL,
        )

    async def set_status(
        self,
        ctx: WriteContext,
        ticket_id: str,
        status: TicketStatus,
        audit: Audit | None,
    ) -> tuple[WriteOutcome, bool] | Checked:
        """Move the ticket to ``status``; ``IllegalTransition`` names the allowed ones."""

        def plan(row: dict[str, Any]) -> _Plan:
            current = TicketStatus(row["status"])
            if status not in NEXT_STATUSES[current]:
                raise IllegalTransition(current, status)
            return _Plan({EventField.STATUS: status})

        # A closed ticket's status: IllegalTransition names "closed" and that it is final.
        return await self._write(ctx, ticket_id, plan, audit, closed_ok=True)

    async def assign(
        self,
        ctx: WriteContext,
        ticket_id: str,
        owner: str | None,
        audit: Audit | None,
    ) -> tuple[WriteOutcome, bool] | Checked:
        """Make ``owner`` (a login) the ticket's owner; None unassigns it."""

        def plan(row: dict[str, Any]) -> _Plan:
            if row["owner"] == owner:
                raise NoChange(
                    f"The ticket's owner is already {owner or 'nobody'}; nothing was changed."
                )
            return _Plan({EventField.OWNER: owner})

        return await self._write(ctx, ticket_id, plan, audit)

    async def escalate(
        self,
        ctx: WriteContext,
        ticket_id: str,
        priority: TicketPriority | None,
        queue: str | None,
        reason: str,
        audit: Audit | None,
    ) -> tuple[WriteOutcome, bool] | Checked:
        """Raise the priority and/or move the ticket to ``queue``; ``reason`` is kept as an
        internal note. A queue outside ``ctx.queues`` is ``QueueNotWritable``."""

        def plan(row: dict[str, Any]) -> _Plan:
            if queue is not None and ctx.queues is not None and queue not in ctx.queues:
                raise QueueNotWritable(
                    f"This caller may not write in queue {queue!r}, so the ticket cannot be moved there; "
                    "nothing was changed."
                )
            fields: dict[EventField, Any] = {}
            if priority is not None and priority != row["priority"]:
                fields[EventField.PRIORITY] = priority
            if queue is not None and queue != row["queue"]:
                fields[EventField.QUEUE] = queue
            if not fields:
                raise NoChange(
                    f"The ticket already has priority {row['priority']} in queue {row['queue']}; nothing was changed."
                )
            return _Plan(fields, (f"Escalation: {reason}", Visibility.INTERNAL))

        return await self._write(ctx, ticket_id, plan, audit)

    async def classify(
        self, ctx: WriteContext, ticket_id: str, change: Classify, audit: Audit | None
    ) -> tuple[WriteOutcome, bool] | Checked:
        """Change the ticket's tags and custom fields (``change``, made in the write's
        transaction: ``tickets.classification``); refused on a closed ticket."""
        return await self._write(
            ctx, ticket_id, lambda row: _Plan({}, classification=change), audit
        )

    async def planned(
        self,
        ctx: WriteContext,
        ticket_id: str,
        plan: Callable[[dict[str, Any]], Plan],
        audit: Audit | None,
        *,
        closed_ok: bool = False,
        also_locks: str | None = None,
    ) -> tuple[WriteOutcome, bool] | Checked:
        """A write another module plans (``Plan``'s check and apply), with every step of
        the write path above. ``also_locks``: another ticket the plan changes, its row
        locked with this one's in the order of their ids (two writes locking the same two
        tickets the other way round would otherwise deadlock)."""
        return await self._write(
            ctx, ticket_id, plan, audit, closed_ok=closed_ok, also_locks=also_locks
        )

    async def spend_confirmation(self, ctx: WriteContext, ticket_id: str) -> None:
        """Spend ``ctx.confirmation_nonce`` and write nothing else: the person declined or
        cancelled, so that request state can never confirm a write later.
        ``ConfirmationSpent`` when it was spent already."""
        if ctx.confirmation_nonce is None:
            raise ValueError("no confirmation nonce to spend")

        def work(conn: Connection) -> None:
            self._locked(
                conn, ticket_id
            )  # the same order as a write: an accept racing this one waits
            if _spent(conn, ctx):
                raise ConfirmationSpent()
            _spend(conn, ctx, ticket_id, '{"confirmed": false}', datetime.now(UTC))

        await self.repository.transaction(work, row=ticket_id)

    def _locked(self, conn: Connection, ticket_id: str, lock: bool = True) -> Any:
        """The ticket's state, its row locked until the transaction ends (PostgreSQL;
        SQLite's ``BEGIN IMMEDIATE`` already holds the database's write lock)."""
        # ``pk``: the key the classification tables and others hold for the ticket.
        found = select(_TICKETS.c.id, _TICKETS.c.pk, *(_TICKETS.c[c] for c in _STATE)).where(
            _TICKETS.c.id == ticket_id
        )
        if lock and self.repository.dialect == "postgresql":
            found = found.with_for_update()
        return conn.execute(found).mappings().first()

    def _key_turn(self, conn: Connection, ctx: WriteContext, key: str) -> None:
        """PostgreSQL: wait until no other transaction holds ``key`` of this caller (an
        advisory lock until the transaction ends), so that concurrent calls with one key
        on different tickets see each other's row: one writes, the others find the key
        used (a replay or ``IdempotencyConflict``) instead of breaking the unique index.
        SQLite's writers are serialised already."""
        if self.repository.dialect == "postgresql":
            conn.execute(
                select(func.pg_advisory_xact_lock(func.hashtextextended(f"{ctx.actor}:{key}", 0)))
            )

    async def _write(
        self,
        ctx: WriteContext,
        ticket_id: str,
        plan: Callable[[dict[str, Any]], _Plan],
        audit: Audit | None,
        *,
        closed_ok: bool = False,
        also_locks: str | None = None,
    ) -> tuple[WriteOutcome, bool] | Checked:
        def checked(conn: Connection, lock: bool) -> tuple[Checked, _Plan | None]:
            if lock and also_locks is not None and also_locks < ticket_id:
                self._locked(conn, also_locks)  # the lower id first (``planned``)
            row = self._locked(conn, ticket_id, lock)
            if lock and also_locks is not None and also_locks > ticket_id:
                self._locked(conn, also_locks)
            # The key is looked up under the ticket's lock (and, on PostgreSQL, the
            # key's own): a concurrent retry with the same key waits for the first and
            # then finds its result.
            if ctx.idempotency_key is not None:
                if lock:
                    self._key_turn(conn, ctx, ctx.idempotency_key)
                first = conn.execute(
                    select(_REQUESTS.c.request_sha256, _REQUESTS.c.result).where(
                        _REQUESTS.c.caller == ctx.actor,
                        _REQUESTS.c.idempotency_key == ctx.idempotency_key,
                    )
                ).first()
                if first is not None:
                    if first.request_sha256 != ctx.request_sha256:
                        raise IdempotencyConflict()
                    return Checked(WriteOutcome.model_validate_json(first.result), {}, []), None
            if _spent(conn, ctx):  # before anything else can refuse: a replay is named as one
                raise ConfirmationSpent()
            if row is None or (ctx.queues is not None and row["queue"] not in ctx.queues):
                raise TicketNotWritable(
                    f"No ticket {ticket_id} in a queue this caller may write; nothing was changed."
                )
            state = dict(row)
            if not closed_ok and state["status"] == TicketStatus.CLOSED:
                raise TicketClosed(ticket_id)
            if ctx.expected_version is not None and state["version"] != ctx.expected_version:
                raise StaleVersion(ctx.expected_version, _current(state))
            change = plan(state)
            if change.check is not None:
                change.check(conn)
            changes = [
                FieldChange(
                    field=field, old_value=_text(state[field.value]), new_value=_text(value)
                )
                for field, value in change.fields.items()
            ]
            classified = (
                change.classification(conn, state, None)
                if change.classification is not None and not lock
                else None
            )
            return Checked(None, state, changes, classified), change

        if audit is None:
            return (await self.repository.read(lambda conn: checked(conn, False)))[0]

        def work(conn: Connection) -> tuple[WriteOutcome, bool]:
            found, change = checked(conn, True)
            if found.replay is not None:
                return found.replay, True
            assert change is not None
            state, changes = found.state, found.changes
            now = datetime.now(UTC)
            values = {field.value: value for field, value in change.fields.items()}
            done = conn.execute(
                update(_TICKETS)
                .where(_TICKETS.c.id == ticket_id, _TICKETS.c.version == state["version"])
                .values(**values, version=state["version"] + 1, updated_at=now)
            )
            if done.rowcount != 1:  # the lock above makes this unreachable; never write blind
                raise StaleVersion(state["version"], _current(state))
            classified = (
                change.classification(conn, state, now)
                if change.classification is not None
                else None
            )
            if changes:
                conn.execute(
                    insert(_EVENTS),
                    [
                        {
                            "ticket_id": ticket_id,
                            "field": c.field,
                            "old_value": c.old_value,
                            "new_value": c.new_value,
                            "actor": ctx.actor,
                            "actor_type": AuthorType.AGENT,
                            "by_assistant": ctx.by_assistant,
                            "created_at": now,
                        }
                        for c in changes
                    ],
                )
            comment = None
            if change.comment is not None:
                body, visibility = change.comment
                inserted = conn.execute(
                    insert(_COMMENTS).values(
                        ticket_id=ticket_id,
                        author=ctx.actor,
                        author_type=AuthorType.AGENT,
                        by_assistant=ctx.by_assistant,
                        visibility=visibility,
                        body=body,
                        created_at=now,
                        search_body=comment_search_bodies(conn, [body])[0],
                    )
                ).inserted_primary_key
                assert inserted is not None  # a single-row INSERT reports its key
                comment = AddedComment(id=inserted[0], visibility=visibility, created_at=now)
            files = (
                attach(
                    conn,
                    ticket_id,
                    comment.id if comment else None,
                    change.attaching,
                    ctx.actor,
                    now,
                )
                if change.attaching is not None
                else []
            )
            if change.apply is not None:
                change.apply(conn, now)
            if _sla_facts & set(values) or (comment and comment.visibility == Visibility.PUBLIC):
                sla_store.refresh(conn, [ticket_id])
            after = {**state, **values}
            outcome = WriteOutcome(
                ticket_id=ticket_id,
                status=after["status"],
                priority=after["priority"],
                owner=after["owner"],
                queue=after["queue"],
                version=state["version"] + 1,
                updated_at=now,
                changes=changes,
                comment=comment,
                classification=classified,
                attachments=files,
            )
            result = outcome.model_dump_json()
            if ctx.idempotency_key is not None:
                _record_request(conn, ctx, ctx.idempotency_key, ticket_id, result, now)
            _spend(conn, ctx, ticket_id, result, now)
            audit(conn, outcome)
            return outcome, False

        return await self.repository.transaction(work, row=ticket_id)


_sla_facts = {"status", "queue", "priority"}
"""The ticket columns an SLA state is derived from (with a public agent reply)."""


def _spent(conn: Connection, ctx: WriteContext) -> bool:
    """Whether ``ctx.confirmation_nonce`` was used already (False without one)."""
    return (
        ctx.confirmation_nonce is not None
        and conn.execute(
            select(_REQUESTS.c.pk).where(
                _REQUESTS.c.caller == ctx.actor,
                _REQUESTS.c.idempotency_key == f"confirmation:{ctx.confirmation_nonce}",
            )
        ).first()
        is not None
    )


def _spend(conn: Connection, ctx: WriteContext, ticket_id: str, result: str, now: datetime) -> None:
    """Record ``ctx.confirmation_nonce`` as used: a ``write_requests`` row keyed
    ``confirmation:<nonce>`` (unique per caller), storing ``result``."""
    if ctx.confirmation_nonce is not None:
        _record_request(conn, ctx, f"confirmation:{ctx.confirmation_nonce}", ticket_id, result, now)


def _record_request(
    conn: Connection, ctx: WriteContext, key: str, ticket_id: str, result: str, now: datetime
) -> None:
    """The ``write_requests`` row of ``key`` for this caller (an idempotency key, or a
    spent confirmation): a second row with the key breaks the unique index."""
    conn.execute(
        insert(_REQUESTS).values(
            caller=ctx.actor,
            idempotency_key=key,
            tool=ctx.tool,
            request_sha256=ctx.request_sha256,
            ticket_id=ticket_id,
            result=result,
            created_at=now,
        )
    )


def _text(value: Any) -> str | None:
    return None if value is None else str(getattr(value, "value", value))


def _current(state: dict[str, Any]) -> dict[str, Any]:
    return {k: _text(v) if k != "version" else v for k, v in state.items() if k != "id"}
