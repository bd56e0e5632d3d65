"""Queues, customers and requesters (revision 0012): the rows tickets reference.

Plain functions over a SQLAlchemy ``Connection``, run inside the caller's read or
transaction: the seeders' ``ensure_references`` (every queue and organisation a batch of
tickets names gets its row, so loading tickets keeps working as before the foreign keys),
the queue lookups of the write path, the operator's queue commands, and finding or
making the requester of a new ticket.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from ticket_server.tickets.models import Customer, Queue, Requester

_QUEUES, _CUSTOMERS, _REQUESTERS = Queue.__table__, Customer.__table__, Requester.__table__
QUEUE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
"""A queue's key as stored: lower case letters, digits, ``_`` and ``-``."""
EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s]{1,189}\.[^@\s.]{1,63}$")
_NUMBERED_CUSTOMER = re.compile(r"^CUS-(\d+)$")


@dataclass(frozen=True)
class QueueInfo:
    name: str
    display_name: str
    description: str
    time_zone: str
    active: bool


@dataclass(frozen=True)
class RequesterInfo:
    id: str
    name: str
    email: str
    customer_id: str
    customer: str
    """The organisation's name (``Customer.name``, what ``Ticket.customer`` holds)."""


def display_name(name: str) -> str:
    """A queue's display name made from its key: ``customer_success`` -> ``Customer success``."""
    words = name.replace("_", " ").replace("-", " ").strip()
    return words[:1].upper() + words[1:] if words else name


def _now(conn: Connection) -> datetime:
    return datetime.now(UTC)


def ensure_references(conn: Connection, tickets: Iterable[dict[str, Any]]) -> None:
    """Give every queue and organisation that ``tickets`` name and the database lacks its
    row (a queue: its display name from the name, UTC, active; an organisation: the next
    ``CUS-<n>``, plan and region ``unknown``)."""
    queues: set[str] = set()
    customers: set[str] = set()
    for t in tickets:
        queues.add(t["queue"])
        customers.add(t["customer"])
    now = _now(conn)
    if queues:
        known = set(
            conn.execute(select(_QUEUES.c.name).where(_QUEUES.c.name.in_(sorted(queues)))).scalars()
        )
        new = sorted(queues - known)
        if new:
            conn.execute(
                insert(_QUEUES),
                [
                    {
                        "name": q,
                        "display_name": display_name(q),
                        "description": "",
                        "time_zone": "UTC",
                        "active": True,
                        "created_at": now,
                    }
                    for q in new
                ],
            )
    if customers:
        known = set(
            conn.execute(
                select(_CUSTOMERS.c.name).where(_CUSTOMERS.c.name.in_(sorted(customers)))
            ).scalars()
        )
        new = sorted(customers - known)
        if new:
            first = _next_number(conn, _CUSTOMERS, _NUMBERED_CUSTOMER)
            conn.execute(
                insert(_CUSTOMERS),
                [
                    {
                        "id": f"CUS-{first + n}",
                        "name": name,
                        "plan": "unknown",
                        "region": "unknown",
                        "billing_reference": "",
                        "created_at": now,
                    }
                    for n, name in enumerate(new)
                ],
            )


def _next_number(conn: Connection, table: Any, pattern: re.Pattern[str]) -> int:
    numbers = [
        int(m.group(1))
        for i in conn.execute(select(table.c.id)).scalars()
        if (m := pattern.match(i))
    ]
    return max(numbers, default=999) + 1


def next_id(conn: Connection, table: Any, prefix: str) -> str:
    """The next free ``<prefix>-<n>`` of ``table`` (tickets, requesters): one more than the
    number of its newest row's id, probed by the unique index until free. Callers hold the
    write lock that serialises id making (``lock_ids``)."""
    newest = conn.execute(select(table.c.id).order_by(table.c.pk.desc()).limit(1)).scalar()
    match = re.match(rf"^{prefix}-(\d+)$", newest or "")
    number = int(match.group(1)) + 1 if match else 1000
    while conn.execute(select(table.c.pk).where(table.c.id == f"{prefix}-{number}")).first():
        number += 1
    return f"{prefix}-{number}"


def lock_ids(conn: Connection) -> None:
    """PostgreSQL: serialise the transactions that make new ids (until the transaction
    ends), so two opened tickets never get one id; SQLite's writers are serialised."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(func.hashtextextended("ticket-ids", 0))))


def _queue(row: Any) -> QueueInfo:
    return QueueInfo(
        name=row.name,
        display_name=row.display_name,
        description=row.description,
        time_zone=row.time_zone,
        active=bool(row.active),
    )


def list_queues(conn: Connection, *, active_only: bool = False) -> list[QueueInfo]:
    """Every queue by name (only the active ones with ``active_only``)."""
    stmt = select(_QUEUES).order_by(_QUEUES.c.name)
    if active_only:
        stmt = stmt.where(_QUEUES.c.active.is_(True))
    return [_queue(r) for r in conn.execute(stmt)]


def get_queue(conn: Connection, name: str) -> QueueInfo | None:
    row = conn.execute(select(_QUEUES).where(_QUEUES.c.name == name)).first()
    return _queue(row) if row is not None else None


def queue_details(conn: Connection, names: Iterable[str]) -> dict[str, QueueInfo]:
    wanted = sorted(set(names))
    if not wanted:
        return {}
    rows = conn.execute(select(_QUEUES).where(_QUEUES.c.name.in_(wanted)))
    return {r.name: _queue(r) for r in rows}


def add_queue(
    conn: Connection, name: str, display: str | None, description: str, time_zone: str
) -> QueueInfo:
    """Insert a queue (``name`` already checked against ``QUEUE_NAME``, unused)."""
    conn.execute(
        insert(_QUEUES).values(
            name=name,
            display_name=display or display_name(name),
            description=description,
            time_zone=time_zone,
            active=True,
            created_at=_now(conn),
        )
    )
    found = get_queue(conn, name)
    assert found is not None
    return found


def set_queue_active(conn: Connection, name: str, active: bool) -> bool:
    """Mark a queue active or inactive; False when there is no such queue."""
    done = conn.execute(update(_QUEUES).where(_QUEUES.c.name == name).values(active=active))
    return done.rowcount == 1


def fold_email(email: str) -> str:
    return email.strip().lower()


def requester_by_email(conn: Connection, email: str) -> RequesterInfo | None:
    return _requester(conn, _REQUESTERS.c.email == fold_email(email))


def requester_by_id(conn: Connection, requester_id: str) -> RequesterInfo | None:
    return _requester(conn, _REQUESTERS.c.id == requester_id.strip().upper())


def requesters_by_id(conn: Connection, ids: Iterable[str]) -> dict[str, RequesterInfo]:
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    stmt = (
        select(_REQUESTERS, _CUSTOMERS.c.name.label("customer"))
        .join(_CUSTOMERS, _CUSTOMERS.c.id == _REQUESTERS.c.customer_id)
        .where(_REQUESTERS.c.id.in_(wanted))
    )
    return {r.id: _requester_row(r) for r in conn.execute(stmt)}


def _requester(conn: Connection, where: Any) -> RequesterInfo | None:
    stmt = (
        select(_REQUESTERS, _CUSTOMERS.c.name.label("customer"))
        .join(_CUSTOMERS, _CUSTOMERS.c.id == _REQUESTERS.c.customer_id)
        .where(where)
    )
    row = conn.execute(stmt).first()
    return _requester_row(row) if row is not None else None


def _requester_row(row: Any) -> RequesterInfo:
    return RequesterInfo(
        id=row.id,
        name=row.name,
        email=row.email,
        customer_id=row.customer_id,
        customer=row.customer,
    )


def customer_by_id(conn: Connection, customer_id: str) -> tuple[str, str] | None:
    """``(id, name)`` of the organisation ``customer_id`` (any case), or None."""
    row = conn.execute(
        select(_CUSTOMERS.c.id, _CUSTOMERS.c.name).where(
            func.upper(_CUSTOMERS.c.id) == customer_id.strip().upper()
        )
    ).first()
    return (row.id, row.name) if row is not None else None


def add_requester(conn: Connection, name: str, email: str, customer_id: str) -> RequesterInfo:
    """Insert a requester (the next ``REQ-<n>``, under ``lock_ids``) of organisation
    ``customer_id``."""
    conn.execute(
        insert(_REQUESTERS).values(
            id=next_id(conn, _REQUESTERS, "REQ"),
            name=name,
            email=fold_email(email),
            customer_id=customer_id,
            created_at=_now(conn),
        )
    )
    found = requester_by_email(conn, email)
    assert found is not None
    return found
