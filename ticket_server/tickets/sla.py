"""SLA policies and the SLA state of a ticket, derived from its stored history.

A policy (``Policy``) is data an operator loads (``ticket-server sla load FILE``): per
queue, by the queue's name (``*`` is the default for queues without an entry), a
business calendar (``tickets.business_time.Calendar``), the statuses that pause the
clock, and per priority a first-response and a resolution target in business minutes.

The SLA state is derived at read time from what the database already stores for every
ticket: its creation time, its status and queue changes (``ticket_events``) and its
first public reply by an agent (``comments``). Nothing is stored per ticket, so the
state is exact across status changes, replies, reassignment and reopening, is the same
on both engines, and a policy change applies to every ticket (open and past) at its
next read. The rules:

- Both clocks run from the ticket's creation while its status is neither resolved/closed
  nor one that pauses the queue the ticket was in then; each stretch of time counts in
  that queue's calendar (for a queue without an entry: the ``*`` entry's pausing
  statuses and calendar, or without one, those of the ticket's current queue).
- The targets are those of the ticket's current queue and priority.
- First response is met by the first public reply of an agent. Resolution is met while
  the ticket is resolved or closed; a reopened ticket's clock runs on from where it was.
- A clock breaches at the instant its business time reaches the target while it runs:
  at exactly ``due_at`` a running clock is breached; a reply at exactly ``due_at`` meets it.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ticket_server.tickets.business_time import Calendar, NoWorkingHours, holiday_calendar_code
from ticket_server.tickets.domain import TicketPriority, TicketStatus

Now = Callable[[], datetime]
"""Where SLA reads take "now" from (tests give a fixed clock)."""


def utc_now() -> datetime:
    return datetime.now(UTC)


DEFAULT_QUEUE = "*"
DONE = frozenset({TicketStatus.RESOLVED, TicketStatus.CLOSED})
DEFAULT_PAUSE = (TicketStatus.WAITING_ON_CUSTOMER,)


class Target(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # strict: `true` is no 1-minute target, nor "30" 30 minutes (a review's finding)
    first_response: int | None = Field(default=None, ge=1, le=10_000_000, strict=True)
    resolution: int | None = Field(default=None, ge=1, le=10_000_000, strict=True)


class QueuePolicy(BaseModel):
    """One queue's entry of a policy file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time_zone: str = "UTC"
    hours: dict[str, list[str]] = Field(
        default_factory=lambda: {
            d: ["00:00-24:00"] for d in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
        }
    )
    holidays: list[date] = Field(default_factory=list)
    holiday_calendar: str | None = Field(default=None, min_length=2, max_length=16)
    pause_statuses: list[TicketStatus] = Field(default_factory=lambda: list(DEFAULT_PAUSE))
    targets: dict[TicketPriority, Target] = Field(default_factory=dict)
    plans: dict[str, dict[TicketPriority, Target]] = Field(default_factory=dict)
    """Per customer plan (``Customer.plan``, any case): targets in place of ``targets``
    for the priorities given."""

    @field_validator("holiday_calendar")
    @classmethod
    def _holiday_calendar_spelling(cls, value: str | None) -> str | None:
        """Any case (``de-be``), stored as the holidays library spells it (``DE-BE``)."""
        return None if value is None else holiday_calendar_code(value)

    @field_validator("plans")
    @classmethod
    def _plan_names(
        cls, value: dict[str, dict[TicketPriority, Target]]
    ) -> dict[str, dict[TicketPriority, Target]]:
        folded = [name.casefold() for name in value]
        for name in value:
            if not name.strip() or len(name) > 32:
                raise ValueError(f"plan name {name[:40]!r}: 1 to 32 characters")
            if folded.count(name.casefold()) > 1:
                raise ValueError(f"plan {name!r} is given twice (plans are compared in any case)")
        return value

    def target(self, priority: TicketPriority, plan: str | None = None) -> Target | None:
        """The target of a ticket of ``priority`` whose customer is on ``plan``: the
        plan's own for that priority if it has one, else the queue's."""
        if plan is not None:
            for name, targets in self.plans.items():
                if name.casefold() == plan.casefold() and priority in targets:
                    return targets[priority]
        return self.targets.get(priority)

    @field_validator("pause_statuses")
    @classmethod
    def _open_only(cls, value: list[TicketStatus]) -> list[TicketStatus]:
        done = [s.value for s in value if s in DONE]
        if done:
            raise ValueError(f"{', '.join(done)} stop the clock already; list open statuses only")
        return value

    @cached_property
    def calendar(self) -> Calendar:
        hours = tuple(sorted((day, tuple(spans)) for day, spans in self.hours.items()))
        return _calendar(
            self.time_zone, hours, tuple(sorted(set(self.holidays))), self.holiday_calendar
        )


@lru_cache(maxsize=256)
def _calendar(
    time_zone: str,
    hours: tuple[tuple[str, tuple[str, ...]], ...],
    holidays: tuple[date, ...],
    holiday_calendar: str | None,
) -> Calendar:
    """One calendar per definition, kept across reads: a policy is read at every SLA
    read, and a calendar remembers the working time of the days it has counted."""
    return Calendar.build(time_zone, dict(hours), holidays, holiday_calendar)


class Policy(BaseModel):
    """A whole SLA policy: queue name (or ``*``) -> its entry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    queues: dict[str, QueuePolicy] = Field(default_factory=dict)

    @field_validator("queues")
    @classmethod
    def _queue_names(cls, value: dict[str, QueuePolicy]) -> dict[str, QueuePolicy]:
        """Names folded as a queue's key is (``queues add``: lower case, no spaces), so
        ``Billing`` means the billing queue rather than none."""
        folded: dict[str, QueuePolicy] = {}
        given: dict[str, str] = {}
        for name, entry in value.items():
            key = name.strip().lower()
            if key in given:
                raise ValueError(f"queues {given[key]!r} and {name!r} name one queue")
            folded[key], given[key] = entry, name
        return folded

    def check(self) -> Policy:
        """``ValueError`` naming the queue whose calendar is invalid (zone, hours, or
        hours without any working interval: its clocks would never run)."""
        for name, entry in self.queues.items():
            if not name or len(name) > 64:
                raise ValueError(f"queue name {name[:70]!r}: 1 to 64 characters")
            if not any(entry.hours.values()):
                raise ValueError(
                    f"queue {name}: hours has no working interval on any day, so its clocks "
                    "would never run; give a weekday one (like 09:00-17:00), or leave hours "
                    "out for every hour of every day"
                )
            try:
                _ = entry.calendar
            except (ValueError, KeyError) as exc:  # ZoneInfoNotFoundError is a KeyError
                raise ValueError(f"queue {name}: {exc}") from exc
        return self

    def entry(self, queue: str) -> QueuePolicy | None:
        return self.queues.get(queue) or self.queues.get(DEFAULT_QUEUE)


def parse_policy(path: Path) -> Policy:
    """A policy file, TOML (``.toml``) or JSON; ``ValueError`` says what is wrong."""
    from pydantic import ValidationError

    toml = path.suffix.lower() == ".toml"
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path.name}: not UTF-8 text (byte {exc.start})") from exc
    try:
        raw = tomllib.loads(text) if toml else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        # not "not valid yaml" for a .yaml file read as JSON (a review's finding)
        kind = "TOML" if toml else "JSON (a file not named .toml is read as JSON)"
        raise ValueError(f"{path.name}: not valid {kind}: {exc}") from exc
    try:
        return Policy.model_validate(raw).check()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{path.name}: {where}: {first['msg']}") from exc


# --- the state of one ticket ---------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """A status or queue change of the ticket's history (``field``: status | queue)."""

    field: str
    old_value: str | None
    new_value: str | None
    at: datetime


@dataclass(frozen=True)
class TicketFacts:
    """What the SLA state is derived from, as stored."""

    created_at: datetime
    status: TicketStatus
    queue: str
    priority: TicketPriority
    changes: Sequence[Change]
    first_reply_at: datetime | None
    plan: str | None = None  # the customer's plan (``Customer.plan``)


class Clock(BaseModel):
    # One target's state; minutes are business minutes; left < 0: overdue.
    target_minutes: int
    due_at: datetime | None
    met_at: datetime | None
    breached: bool
    breached_at: datetime | None
    business_minutes_left: int


class SlaState(BaseModel):
    # covered false: no policy or no target applies (reason says which).
    covered: bool
    reason: str | None = None
    time_zone: str | None = None
    paused: bool = False
    first_response: Clock | None = None
    resolution: Clock | None = None


@dataclass(frozen=True)
class _Span:
    start: datetime
    end: datetime
    status: TicketStatus
    queue: str


def _spans(facts: TicketFacts, now: datetime) -> list[_Span]:
    """The ticket's life from creation to ``now`` in stretches of one status and queue."""
    changes = sorted(facts.changes, key=lambda c: c.at)
    first_status = next((c for c in changes if c.field == "status"), None)
    first_queue = next((c for c in changes if c.field == "queue"), None)
    status = (
        TicketStatus(first_status.old_value)
        if first_status and first_status.old_value
        else facts.status
    )
    queue = first_queue.old_value if first_queue and first_queue.old_value else facts.queue
    spans, start = [], facts.created_at
    for change in changes:
        at = min(max(change.at, facts.created_at), now)
        if at > start:
            spans.append(_Span(start, at, status, queue))
            start = at
        if change.field == "status" and change.new_value:
            status = TicketStatus(change.new_value)
        elif change.field == "queue" and change.new_value:
            queue = change.new_value
    if now > start:
        spans.append(_Span(start, now, status, queue))
    return spans


def _clock(
    target: int,
    spans: Iterable[_Span],
    policy: Policy,
    pause: frozenset[TicketStatus],
    current: Calendar,
    stop_at: datetime | None,
    now: datetime,
) -> Clock:
    """One clock: business time counted over the running stretches until ``stop_at``
    (met) or ``now``. A stretch runs, and counts in a calendar, by the entry of the queue
    the ticket was in then (``pause`` and ``current``: those of a queue without one)."""
    goal = target * 60.0
    elapsed, breached_at, last = 0.0, None, None
    end_of_life = stop_at if stop_at is not None else now
    for span in spans:
        if span.start >= end_of_life:
            break
        entry = policy.entry(span.queue)
        pausing = entry.pause_statuses if entry is not None else pause
        if span.status in pausing or span.status in DONE:
            continue
        calendar = entry.calendar if entry is not None else current
        end = min(span.end, end_of_life)
        seconds = calendar.seconds_between(span.start, end)
        still_running = stop_at is None and end == now
        # A clock still running at its due time is breached; one stopped then is met.
        reached = elapsed + seconds >= goal if still_running else elapsed + seconds > goal
        if breached_at is None and reached:
            breached_at = calendar.add(span.start, goal - elapsed)
        elapsed += seconds
        last = (calendar, end)
    left = goal - elapsed
    due_at: datetime | None
    if breached_at is not None:
        due_at = breached_at
    elif stop_at is None and (last is None or last[1] != now):
        due_at = None  # paused (or not started): the due time moves with the pause
    else:
        calendar, end = last if last is not None else (current, now)
        try:
            due_at = calendar.add(end, left)
        except NoWorkingHours:
            due_at = None
    return Clock(
        target_minutes=target,
        due_at=due_at,
        met_at=stop_at,
        breached=breached_at is not None,
        breached_at=breached_at,
        business_minutes_left=math.floor(left / 60),
    )


def sla_state(facts: TicketFacts, policy: Policy, now: datetime) -> SlaState:
    """The SLA state of the ticket ``facts`` describe, at ``now``, under ``policy``."""
    entry = policy.entry(facts.queue)
    if entry is None:
        return SlaState(covered=False, reason=f"no SLA policy for queue {facts.queue}")
    target = entry.target(facts.priority, facts.plan)
    if target is None or (target.first_response is None and target.resolution is None):
        return SlaState(
            covered=False,
            reason=f"no SLA target for {facts.priority.value} tickets in queue {facts.queue}",
            time_zone=entry.time_zone,
        )
    pause = frozenset(entry.pause_statuses)
    calendar = entry.calendar
    spans = _spans(facts, now)
    resolved_at = None
    if facts.status in DONE:
        # Met when it last went from an open status to resolved or closed (not when a
        # resolved ticket was closed later); created so: at its creation.
        done = [
            c.at
            for c in facts.changes
            if c.field == "status" and c.new_value in DONE and c.old_value not in DONE
        ]
        resolved_at = max(done) if done else facts.created_at
    first = None
    if target.first_response is not None:
        reply = facts.first_reply_at
        first = _clock(
            target.first_response,
            spans,
            policy,
            pause,
            calendar,
            reply if reply is not None and reply <= now else None,
            now,
        )
    resolution = None
    if target.resolution is not None:
        resolution = _clock(target.resolution, spans, policy, pause, calendar, resolved_at, now)
    return SlaState(
        covered=True,
        time_zone=entry.time_zone,
        paused=facts.status in pause,
        first_response=first,
        resolution=resolution,
    )


def policy_rows(
    policy: Policy,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The policy as rows of ``sla_calendars``, ``sla_targets`` and ``sla_plan_targets``."""
    calendars, targets, plan_targets = [], [], []
    for name, entry in policy.queues.items():
        calendars.append(
            {
                "queue": name,
                "time_zone": entry.time_zone,
                "hours": json.dumps(entry.hours, sort_keys=True),
                "holidays": json.dumps(sorted(d.isoformat() for d in entry.holidays)),
                "holiday_calendar": entry.holiday_calendar,
                "pause_statuses": json.dumps([s.value for s in entry.pause_statuses]),
            }
        )
        for priority, target in entry.targets.items():
            targets.append(
                {
                    "queue": name,
                    "priority": priority,
                    "first_response_minutes": target.first_response,
                    "resolution_minutes": target.resolution,
                }
            )
        for plan, by_priority in entry.plans.items():
            for priority, target in by_priority.items():
                plan_targets.append(
                    {
                        "queue": name,
                        "plan": plan,
                        "priority": priority,
                        "first_response_minutes": target.first_response,
                        "resolution_minutes": target.resolution,
                    }
                )
    return calendars, targets, plan_targets


def policy_from_rows(
    calendars: Iterable[Mapping[str, Any]],
    targets: Iterable[Mapping[str, Any]],
    plan_targets: Iterable[Mapping[str, Any]] = (),
) -> Policy:
    """The policy ``policy_rows`` stored (a target without a calendar row gets the
    defaults: UTC, every hour)."""
    queues: dict[str, dict[str, Any]] = {}
    for row in calendars:
        queues[row["queue"]] = {
            "time_zone": row["time_zone"],
            "hours": json.loads(row["hours"]),
            "holidays": json.loads(row["holidays"]),
            "holiday_calendar": row.get("holiday_calendar"),
            "pause_statuses": json.loads(row["pause_statuses"]),
            "targets": {},
        }
    for row in targets:
        entry = queues.setdefault(row["queue"], {"targets": {}})
        entry["targets"][str(row["priority"])] = {
            "first_response": row["first_response_minutes"],
            "resolution": row["resolution_minutes"],
        }
    for row in plan_targets:
        entry = queues.setdefault(row["queue"], {"targets": {}})
        plan = entry.setdefault("plans", {}).setdefault(row["plan"], {})
        plan[str(row["priority"])] = {
            "first_response": row["first_response_minutes"],
            "resolution": row["resolution_minutes"],
        }
    return Policy.model_validate({"queues": queues})
