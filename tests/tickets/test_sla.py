"""The SLA state of a ticket from its history (tickets/sla.py), pure, with a fixed
clock: pause and resume, a reply meeting first response, the exact minute of a breach,
reopening, reassignment across queues with different hours, and the policy file."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from ticket_server.tickets.domain import TicketPriority, TicketStatus
from ticket_server.tickets.sla import (
    Change,
    Policy,
    Target,
    TicketFacts,
    parse_policy,
    sla_state,
)

WEEKDAYS = {d: ["09:00-17:00"] for d in ("mon", "tue", "wed", "thu", "fri")}
TARGETS = {"high": {"first_response": 60, "resolution": 480}}
BILLING = {"time_zone": "Europe/Berlin", "hours": WEEKDAYS, "targets": TARGETS}
POLICY = Policy.model_validate(
    {
        "queues": {
            "billing": BILLING,
            "us": {
                "time_zone": "America/New_York",
                "hours": WEEKDAYS,
                "targets": {"high": {"first_response": 60, "resolution": 600}},
            },
        }
    }
).check()
# Monday 30 Nov 2026, 09:00 in Berlin (CET, UTC+1).
MONDAY_9 = datetime(2026, 11, 30, 8, tzinfo=UTC)


def utc(day: int, hour: int, minute: int = 0, second: int = 0) -> datetime:
    return (
        datetime(2026, 11, day, hour, minute, second, tzinfo=UTC)
        if day <= 30
        else (datetime(2026, 12, day - 30, hour, minute, second, tzinfo=UTC))
    )


def status(at: datetime, old: str, new: str) -> Change:
    return Change("status", old, new, at)


def facts(
    *changes: Change,
    current: TicketStatus = TicketStatus.OPEN,
    queue: str = "billing",
    reply: datetime | None = None,
) -> TicketFacts:
    return TicketFacts(MONDAY_9, current, queue, TicketPriority.HIGH, changes, reply)


def test_pause_and_resume() -> None:
    history = (
        status(utc(30, 9), "open", "waiting_on_customer"),
        status(utc(31, 8), "waiting_on_customer", "open"),  # Tuesday 09:00 Berlin
    )
    paused = sla_state(
        facts(history[0], current=TicketStatus.WAITING_ON_CUSTOMER), POLICY, utc(30, 12)
    )
    assert paused.paused is True
    assert paused.resolution is not None and paused.resolution.due_at is None
    assert paused.resolution.business_minutes_left == 480 - 60
    resumed = sla_state(facts(*history), POLICY, utc(31, 9))
    assert resumed.paused is False and resumed.resolution is not None
    assert resumed.resolution.business_minutes_left == 480 - 120
    assert resumed.resolution.due_at == utc(31, 15)  # Tuesday 16:00 Berlin
    # First response reached its target exactly as the clock paused, and breached the
    # moment the clock ran again.
    assert resumed.first_response is not None
    assert resumed.first_response.breached_at == utc(31, 8)


def test_a_reply_meets_first_response_until_its_due_minute() -> None:
    met = sla_state(facts(reply=utc(30, 9)), POLICY, utc(31, 12)).first_response
    assert met is not None and met.met_at == utc(30, 9) and not met.breached
    late = sla_state(facts(reply=utc(30, 9, 1)), POLICY, utc(31, 12)).first_response
    assert late is not None and late.breached and late.breached_at == utc(30, 9)
    assert late.met_at == utc(30, 9, 1) and late.business_minutes_left == -1


def test_breach_at_the_exact_minute() -> None:
    before = sla_state(facts(), POLICY, utc(30, 8, 59, 59)).first_response
    assert before is not None and not before.breached and before.due_at == utc(30, 9)
    at = sla_state(facts(), POLICY, utc(30, 9)).first_response
    assert at is not None and at.breached and at.breached_at == utc(30, 9)
    assert at.business_minutes_left == 0


def test_reopen_runs_the_resolution_clock_on() -> None:
    resolved = status(utc(30, 10), "open", "resolved")
    done = sla_state(facts(resolved, current=TicketStatus.RESOLVED), POLICY, utc(30, 12))
    assert done.resolution is not None and done.resolution.met_at == utc(30, 10)
    assert done.resolution.business_minutes_left == 480 - 120 and not done.resolution.breached
    reopened = facts(resolved, status(utc(31, 8), "resolved", "open"))
    again = sla_state(reopened, POLICY, utc(31, 9)).resolution
    assert again is not None and again.met_at is None
    assert again.business_minutes_left == 480 - 180


def test_resolution_is_met_when_the_ticket_was_resolved_not_when_it_was_closed() -> None:
    """A review's finding: a ticket resolved and closed days later said its resolution
    was met at the closing (``met_at``); it was met when it was resolved, the last time
    it went from an open status to resolved or closed."""
    resolved = status(utc(30, 10), "open", "resolved")
    closed = status(utc(31 + 3, 10), "resolved", "closed")
    clock = sla_state(facts(resolved, closed, current=TicketStatus.CLOSED), POLICY, utc(31 + 5, 9))
    assert clock.resolution is not None and clock.resolution.met_at == utc(30, 10)
    assert clock.resolution.business_minutes_left == 480 - 120
    # Reopened and resolved again: met at the second resolution.
    again = (
        resolved,
        status(utc(31, 8), "resolved", "open"),
        status(utc(31, 9), "open", "resolved"),
    )
    history = (*again, status(utc(31 + 2, 8), "resolved", "closed"))
    clock = sla_state(facts(*history, current=TicketStatus.CLOSED), POLICY, utc(31 + 5, 9))
    assert clock.resolution is not None and clock.resolution.met_at == utc(31, 9)
    assert clock.resolution.business_minutes_left == 480 - 180


def test_reassignment_counts_each_stretch_in_its_queues_hours() -> None:
    moved = Change("queue", "billing", "us", utc(30, 10))  # 11:00 Berlin: 2h counted there
    # New York works 09:00-17:00 EST = 14:00-22:00 UTC: 14:00-15:00 counts, 1h.
    state = sla_state(facts(moved, queue="us"), POLICY, utc(30, 15))
    assert state.time_zone == "America/New_York" and state.resolution is not None
    assert state.resolution.target_minutes == 600  # the current queue's target
    assert state.resolution.business_minutes_left == 600 - 180
    assert state.resolution.due_at == utc(30, 22)  # 17:00 in New York


def test_each_stretch_pauses_by_the_statuses_of_its_queue() -> None:
    """A ticket moved between queues that pause on different statuses: each stretch is
    paused, or not, as the queue it was in then says, as it counts in that queue's hours.
    Before, the current queue's pausing statuses judged the ticket's whole life."""
    ops = {**BILLING, "pause_statuses": ["in_progress"]}  # billing pauses on waiting_on_customer
    policy = Policy.model_validate({"queues": {"billing": BILLING, "ops": ops}}).check()
    history = (
        status(utc(30, 9), "open", "waiting_on_customer"),  # billing pauses: 09-10 UTC
        Change("queue", "billing", "ops", utc(30, 10)),  # ops does not: 10-11 counts
        status(utc(30, 11), "waiting_on_customer", "in_progress"),  # ops pauses
    )
    ticket = TicketFacts(
        MONDAY_9, TicketStatus.IN_PROGRESS, "ops", TicketPriority.HIGH, history, None
    )
    state = sla_state(ticket, policy, utc(30, 12))
    assert state.paused is True and state.resolution is not None
    assert state.resolution.business_minutes_left == 480 - 120  # 08-09 and 10-11 UTC
    assert state.resolution.due_at is None  # paused


def test_without_a_policy_or_target_the_reason_is_given() -> None:
    none = sla_state(facts(queue="support"), POLICY, utc(30, 12))
    assert not none.covered and none.reason == "no SLA policy for queue support"
    low = TicketFacts(MONDAY_9, TicketStatus.OPEN, "billing", TicketPriority.LOW, (), None)
    assert sla_state(low, POLICY, utc(30, 12)).reason == (
        "no SLA target for low tickets in queue billing"
    )
    default = Policy.model_validate({"queues": {"*": {"targets": TARGETS}}})
    assert sla_state(facts(queue="support"), default, utc(30, 12)).covered


def test_a_customers_plan_has_its_own_targets() -> None:
    """A plan's targets replace the queue's for the priorities the plan gives (its name
    in any case); other plans, other priorities and tickets without a plan keep the
    queue's; a plan given twice in two cases is refused."""
    plans = {"Enterprise": {"high": {"first_response": 15}}, "Starter": {"low": {"resolution": 9}}}
    policy = Policy.model_validate(
        {"queues": {"billing": {"hours": WEEKDAYS, "targets": TARGETS, "plans": plans}}}
    ).check()
    opened = TicketFacts(MONDAY_9, TicketStatus.OPEN, "billing", TicketPriority.HIGH, (), None)

    def first_response(plan: str | None) -> int | None:
        state = sla_state(TicketFacts(**{**opened.__dict__, "plan": plan}), policy, utc(30, 12))
        return None if state.first_response is None else state.first_response.target_minutes

    assert first_response("enterprise") == first_response("ENTERPRISE") == 15
    assert first_response("Starter") == first_response("Team") == first_response(None) == 60
    # The plan's target is the whole target: Enterprise's high tickets have no resolution one.
    entry = policy.entry("billing")
    assert entry is not None
    assert entry.target(TicketPriority.HIGH, "Enterprise") == Target(first_response=15)
    assert entry.target(TicketPriority.HIGH, "Team") == Target(first_response=60, resolution=480)
    with pytest.raises(ValueError, match="given twice"):
        Policy.model_validate({"queues": {"b": {"plans": {"Pro": {}, "PRO": {}}}}})


def test_policy_files_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "sla.toml"
    toml.write_text(
        '[queues.billing]\ntime_zone = "Europe/Berlin"\nholidays = ["2026-12-25"]\n'
        'hours = { mon = ["09:00-17:00"] }\ntargets.urgent = { first_response = 30 }\n'
    )
    policy = parse_policy(toml)
    entry = policy.entry("billing")
    assert entry is not None and entry.pause_statuses == [TicketStatus.WAITING_ON_CUSTOMER]
    assert entry.targets[TicketPriority.URGENT].resolution is None
    bad = tmp_path / "sla.json"
    for text, says in [
        ('{"queues": {"b": {"time_zone": "Mars/Base"}}}', "queue b"),
        ('{"queues": {"b": {"pause_statuses": ["resolved"]}}}', "open statuses only"),
        ('{"queues": {"b": {"targets": {"high": {"first_response": 0}}}}}', "first_response"),
        ('{"queues": {"b": {"colour": "red"}}}', "colour"),
        ("{not json", "not valid"),
    ]:
        bad.write_text(text)
        with pytest.raises(ValueError, match=says):
            parse_policy(bad)


def test_the_readme_policy_loads(tmp_path: Path) -> None:
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = re.search(r"```toml\n# sla.toml\n(.*?)```", readme, re.S)
    assert block is not None
    (tmp_path / "sla.toml").write_text(block.group(1))
    policy = parse_policy(tmp_path / "sla.toml")
    billing = policy.entry("billing")
    assert billing is not None and billing.calendar.weekly[4][1][0].hour == 13
    assert policy.entry("support") is policy.queues["*"]


def test_a_policys_queue_names_are_folded_as_queue_names_are(tmp_path: Path) -> None:
    """A review's finding: queue names are lower case (`queues add` folds them), but a
    policy's `[queues.Billing]` (the display name) loaded without a word and applied to
    no ticket: billing's tickets fell to the `*` targets. A policy's queue names are now
    folded the same way, and two that fold to one name are refused."""
    toml = tmp_path / "sla.toml"
    toml.write_text(
        "[queues.Billing]\ntargets.urgent = { first_response = 30 }\n"
        '[queues."*"]\ntargets.urgent = { first_response = 90 }\n'
    )
    policy = parse_policy(toml)
    assert list(policy.queues) == ["billing", "*"]
    billing = policy.entry("billing")
    assert billing is not None and billing.targets[TicketPriority.URGENT].first_response == 30
    toml.write_text("[queues.Billing]\n[queues.billing]\n")
    with pytest.raises(ValueError, match="'Billing' and 'billing'"):
        parse_policy(toml)
