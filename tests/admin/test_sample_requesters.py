"""The sample's queues and requesters (issue 33): made deterministically (the same seed
gives the same rows and the same requester per ticket), and seeded with the sample on
both engines: every sample ticket has a requester of its own organisation."""

from __future__ import annotations

from tests.tools.test_writes import _sql
from ticket_server.admin.conversations import generate_customers
from ticket_server.admin.requesters import RequesterPicker, generate_queues, generate_requesters
from ticket_server.settings import Settings


def test_same_seed_same_queues_requesters_and_picks() -> None:
    customers = generate_customers()
    first, again = generate_requesters(customers), generate_requesters(generate_customers())
    assert first == again and len(first) >= len(customers)
    assert len({r["email"] for r in first}) == len(first)
    assert generate_requesters(customers, seed=7) != first
    tickets = [{"id": f"SUP-{n}", "customer": customers[n % 40]["name"]} for n in range(200)]
    picks = [RequesterPicker(customers, first)(t) for t in tickets]
    assert picks == [RequesterPicker(customers, again)(t) for t in tickets]
    assert generate_queues() == generate_queues()
    assert {q["name"] for q in generate_queues()} == {
        "support", "billing", "engineering", "onboarding", "security"
    }  # fmt: skip


async def test_seeded_sample_has_queue_details_and_requesters(settings: Settings) -> None:
    rows = await _sql(
        settings,
        "SELECT count(*), count(t.requester_id), "
        "sum(CASE WHEN c.name = t.customer THEN 1 ELSE 0 END) FROM tickets t "
        "LEFT JOIN requesters r ON r.id = t.requester_id "
        "LEFT JOIN customers c ON c.id = r.customer_id",
    )
    total, with_requester, own = rows[0]
    assert total == with_requester == own == 2400
    queues = await _sql(settings, "SELECT name, display_name, time_zone FROM queues ORDER BY name")
    assert ("billing", "Billing", "Europe/London") in [tuple(q) for q in queues]
