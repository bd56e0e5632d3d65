"""``tickets.classification.apply_classification`` as the tool that opens a ticket calls
it, inside its own transaction: a required field of the ticket's queue must be given
(``opening=True``, on a ticket holding no tags or values yet, as a just-opened one), a
check without a time writes nothing, and a refusal leaves the transaction to roll back
whole."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import Connection, select, text
from sqlalchemy.ext.asyncio import create_async_engine

from ticket_server.settings import Settings
from ticket_server.tickets.classification import (
    ClassificationChange,
    RequiredFieldMissing,
    apply_classification,
    read_classification,
)
from ticket_server.tickets.classification_models import TicketFieldValue, TicketTag
from ticket_server.tickets.models import Ticket


def _bare(conn: Connection, queue: str) -> tuple[int, str]:
    """A ticket of ``queue`` with no tags and no field values, as one just opened."""
    row = conn.execute(
        select(Ticket.pk, Ticket.queue)
        .where(
            Ticket.queue == queue,
            Ticket.pk.not_in(select(TicketFieldValue.ticket_pk)),
            Ticket.pk.not_in(select(TicketTag.ticket_pk)),
        )
        .limit(1)
    ).one()
    return row.pk, row.queue


async def test_opening_needs_the_required_fields_of_its_queue(settings: Settings) -> None:
    engine = create_async_engine(settings.database_url)
    now = datetime.now(UTC)

    def work(conn: Connection) -> None:
        conn.execute(
            text(
                "INSERT INTO custom_fields (name, label, type, required, queues, active, created_at) "
                "VALUES ('product', 'Product', 'text', :yes, '[\"billing\"]', :yes, :now)"
            ),
            {"yes": True, "now": now},
        )
        pk, queue = _bare(conn, "billing")
        before = read_classification(conn, [pk])[pk]
        with pytest.raises(RequiredFieldMissing, match="required field\\(s\\) product"):
            apply_classification(
                conn,
                pk,
                queue,
                ClassificationChange(add_tags=["vip"]),
                free_tags=False,
                now=now,
                opening=True,
            )
        checked = apply_classification(
            conn,
            pk,
            queue,
            ClassificationChange(fields={"product": "Ledger"}, add_tags=["vip"]),
            free_tags=False,
            now=None,
            opening=True,
        )
        assert checked.after.custom_fields["product"] == "Ledger"
        assert read_classification(conn, [pk])[pk] == before  # a check writes nothing
        done = apply_classification(
            conn,
            pk,
            queue,
            ClassificationChange(fields={"product": "Ledger"}),
            free_tags=False,
            now=now,
            opening=True,
        )
        assert read_classification(conn, [pk])[pk] == done.after
        # Another queue's ticket does not need it.
        other_pk, other_queue = _bare(conn, "support")
        apply_classification(
            conn,
            other_pk,
            other_queue,
            ClassificationChange(),
            free_tags=False,
            now=now,
            opening=True,
        )

    try:
        async with engine.begin() as conn:
            await conn.run_sync(work)
    finally:
        await engine.dispose()
