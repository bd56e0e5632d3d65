"""The sample's queues and requesters (revision 0012), made deterministically: the same
seed and customers give the same rows, and ticket ``SUP-<n>`` the same requester, for
the committed sample and for any count the generators make (``db seed --count``).

Requesters are contacts of the sample organisations: one to three each, a name from
the generator's lists and an e-mail address at the organisation's domain, nothing more.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from random import Random
from typing import Any

from ticket_server.admin.generator import _FIRST, _LAST, DEFAULT_SEED, QUEUES

QUEUE_DETAILS = {
    "support": ("Support", "Questions and problems with the product.", "UTC"),
    "billing": ("Billing", "Invoices, payments, plans and refunds.", "Europe/London"),
    "engineering": ("Engineering", "Defects and incidents worked on by engineers.", "UTC"),
    "onboarding": ("Onboarding", "Set-up and training of new customers.", "America/New_York"),
    "security": ("Security", "Access, vulnerabilities and compliance.", "UTC"),
}
assert set(QUEUE_DETAILS) == set(QUEUES)
FIRST_REQUESTER = 1000  # requester k has id REQ-{FIRST_REQUESTER + k}
QUEUES_SINCE = datetime.fromisoformat("2019-01-01T00:00:00+00:00")


def generate_queues() -> list[dict[str, Any]]:
    """The sample's queues, with display names, descriptions and time zones."""
    return [
        {
            "name": name,
            "display_name": display,
            "description": description,
            "time_zone": zone,
            "active": True,
            "created_at": QUEUES_SINCE,
        }
        for name, (display, description, zone) in QUEUE_DETAILS.items()
    ]


def _ascii(word: str) -> str:
    return "".join(c for c in word.lower() if c.isascii() and c.isalnum())


def generate_requesters(
    customers: Iterable[dict[str, Any]], seed: int = DEFAULT_SEED
) -> list[dict[str, Any]]:
    """One to three contacts per organisation of ``customers`` (in their order), e-mail
    addresses unique."""
    out: list[dict[str, Any]] = []
    taken: set[str] = set()
    for customer in customers:
        r = Random(f"{seed}:requesters:{customer['id']}").random
        domain = (_ascii(customer["name"].split()[0]) or "example") + ".example"
        for _ in range(1 + int(r() * 3)):
            first, last = _FIRST[int(r() * len(_FIRST))], _LAST[int(r() * len(_LAST))]
            local = f"{_ascii(first)}.{_ascii(last)}"
            email, n = f"{local}@{domain}", 2
            while email in taken:
                email, n = f"{local}{n}@{domain}", n + 1
            taken.add(email)
            out.append(
                {
                    "id": f"REQ-{FIRST_REQUESTER + len(out)}",
                    "name": f"{first} {last}",
                    "email": email,
                    "customer_id": customer["id"],
                    "created_at": customer["created_at"],
                }
            )
    return out


class RequesterPicker:
    """The requester of each sample ticket: one of its organisation's contacts, chosen
    by the ticket's id and the seed (None for an organisation with none)."""

    def __init__(
        self,
        customers: Iterable[dict[str, Any]],
        requesters: Iterable[dict[str, Any]],
        seed: int = DEFAULT_SEED,
    ) -> None:
        names = {c["id"]: c["name"] for c in customers}
        self.seed = seed
        self.by_customer: dict[str, list[str]] = {}
        for r in requesters:
            self.by_customer.setdefault(names[r["customer_id"]], []).append(r["id"])

    def __call__(self, ticket: dict[str, Any]) -> str | None:
        contacts = self.by_customer.get(ticket["customer"])
        if not contacts:
            return None
        return contacts[
            int(Random(f"{self.seed}:requester:{ticket['id']}").random() * len(contacts))
        ]
