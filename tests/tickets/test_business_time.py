"""Business-time arithmetic (tickets/business_time.py), pure: weekends, holidays, DST."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from ticket_server.tickets.business_time import Calendar, NoWorkingHours

WEEKDAYS = {d: ["09:00-17:00"] for d in ("mon", "tue", "wed", "thu", "fri")}
BERLIN = Calendar.build("Europe/Berlin", WEEKDAYS, [date(2026, 12, 25), date(2026, 12, 26)])


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def test_a_friday_evening_target_lands_on_monday_morning() -> None:
    # Friday 27 Nov 2026, 16:30 in Berlin (CET, UTC+1) + 60 min: 30 on Friday, 30 on Monday.
    start = utc(2026, 11, 27, 15, 30)
    assert BERLIN.add(start, 3600) == utc(2026, 11, 30, 8, 30)
    assert BERLIN.seconds_between(start, utc(2026, 11, 30, 8, 30)) == 3600
    # Nothing counts over the weekend.
    assert BERLIN.seconds_between(utc(2026, 11, 28, 0), utc(2026, 11, 30, 0)) == 0


def test_a_holiday_has_no_working_hours() -> None:
    # Thursday 24 Dec 16:30 + 60 min: Friday 25th is a holiday, then the weekend.
    assert BERLIN.add(utc(2026, 12, 24, 15, 30), 3600) == utc(2026, 12, 28, 8, 30)
    assert BERLIN.seconds_between(utc(2026, 12, 25, 0), utc(2026, 12, 26, 0)) == 0
    plain = Calendar.build("Europe/Berlin", WEEKDAYS)
    assert plain.seconds_between(utc(2026, 12, 25, 0), utc(2026, 12, 26, 0)) == 8 * 3600


def test_a_holiday_calendar_gives_a_countrys_public_holidays() -> None:
    # Wednesday 6 Jan 2027, Epiphany: a public holiday in Bavaria, not in Berlin.
    bavaria = Calendar.build("Europe/Berlin", WEEKDAYS, holiday_calendar="DE-BY")
    berlin = Calendar.build("Europe/Berlin", WEEKDAYS, holiday_calendar="DE-BE")
    day = (utc(2027, 1, 6, 0), utc(2027, 1, 7, 0))
    assert bavaria.seconds_between(*day) == 0
    assert berlin.seconds_between(*day) == 8 * 3600
    # Tuesday 5 Jan 16:30 Berlin time + 60 min: in Bavaria the rest falls on Thursday.
    assert bavaria.add(utc(2027, 1, 5, 15, 30), 3600) == utc(2027, 1, 7, 8, 30)
    assert berlin.add(utc(2027, 1, 5, 15, 30), 3600) == utc(2027, 1, 6, 8, 30)
    # Listed dates add to the calendar's: 2 Jan 2026 (a Friday) off in Bavaria too.
    both = Calendar.build("Europe/Berlin", WEEKDAYS, [date(2026, 1, 2)], "DE-BY")
    assert both.is_holiday(date(2026, 1, 2)) and both.is_holiday(date(2026, 1, 1))
    assert not bavaria.is_holiday(date(2026, 1, 2))


@pytest.mark.parametrize("code", ["XX", "DE-ZZ", "de-by-x"])
def test_an_unknown_holiday_calendar_is_refused_by_name(code: str) -> None:
    with pytest.raises(ValueError, match=f"holiday calendar {code!r}"):
        Calendar.build("UTC", WEEKDAYS, holiday_calendar=code)


def test_daylight_saving_time_ends_over_a_weekend() -> None:
    # Berlin leaves CEST (UTC+2) for CET (UTC+1) on Sunday 25 Oct 2026: Friday's 16:00
    # is 14:00 UTC, Monday's 09:00 is 08:00 UTC.
    assert BERLIN.add(utc(2026, 10, 23, 14), 2 * 3600) == utc(2026, 10, 26, 9)
    round_the_clock = Calendar.build(
        "Europe/Berlin", {d: ["00:00-24:00"] for d in ("sat", "sun", "mon")}
    )
    sunday = datetime(2026, 10, 25, tzinfo=BERLIN.zone)
    monday = datetime(2026, 10, 26, tzinfo=BERLIN.zone)
    assert round_the_clock.seconds_between(sunday, monday) == 25 * 3600  # the long day
    # Spring forward (29 March 2026): that Sunday has 23 hours.
    spring = datetime(2026, 3, 29, tzinfo=BERLIN.zone)
    assert round_the_clock.seconds_between(spring, spring + timedelta(days=1)) == 23 * 3600


def test_add_and_seconds_between_agree_over_long_spans() -> None:
    start = utc(2026, 1, 5, 7, 13)
    for hours in (1, 7.5, 40, 333):
        end = BERLIN.add(start, hours * 3600)
        assert BERLIN.seconds_between(start, end) == pytest.approx(hours * 3600)
    # Counted from a day far earlier than before (the remembered days start anew).
    early = utc(2020, 6, 1, 9)
    assert BERLIN.seconds_between(early, BERLIN.add(early, 3600)) == 3600


def test_bad_calendars_are_refused_and_an_empty_one_says_so() -> None:
    with pytest.raises(ValueError, match="HH:MM-HH:MM"):
        Calendar.build("UTC", {"mon": ["9-5pm"]})
    with pytest.raises(ValueError, match="after the start"):
        Calendar.build("UTC", {"mon": ["17:00-09:00"]})
    with pytest.raises(ValueError, match="overlap"):
        Calendar.build("UTC", {"mon": ["09:00-12:00", "11:00-13:00"]})
    with pytest.raises(ValueError, match="weekday"):
        Calendar.build("UTC", {"monday": ["09:00-17:00"]})
    with pytest.raises(NoWorkingHours):
        Calendar.build("UTC", {}).add(utc(2026, 1, 1), 60)


def test_the_answer_does_not_depend_on_what_was_asked_before() -> None:
    """The day totals are remembered from a base day; a span starting before that base
    (more than 400 days before the first one asked) moves it, and the span's two ends
    must be read from the same base. Each span runs from a Monday 00:00 UTC to a later
    one, so it holds 8 working hours on each of its weekdays, whatever was asked first."""
    for warm in (None, (utc(2026, 11, 2), utc(2026, 11, 30))):
        calendar = Calendar.build("Europe/Berlin", WEEKDAYS)
        if warm is not None:
            calendar.seconds_between(*warm)
        for start, end in [
            (utc(2025, 6, 2), utc(2026, 11, 30)),
            (utc(2024, 1, 1), utc(2024, 3, 4)),
            (utc(2026, 11, 2), utc(2026, 11, 30)),
        ]:
            weekdays = sum(
                (start + timedelta(days=d)).weekday() < 5 for d in range((end - start).days)
            )
            assert calendar.seconds_between(start, end) == weekdays * 8 * 3600, (warm, start)


def test_one_calendar_read_from_threads_at_once_answers_as_alone() -> None:
    """A review's finding: a calendar is shared (one per definition, ``sla._calendar``)
    and SQLite's reads and writes run in worker threads, so two derivations at once
    extended (or moved) its remembered sums together and both, and every later one, got
    wrong business minutes: here a third of the answers. Each thread now answers what one
    calendar asked alone answers."""
    import random
    import sys
    import threading

    rng = random.Random(34)
    spans = []
    for _ in range(150):
        start = utc(2020, 1, 1) + timedelta(minutes=rng.randrange(60 * 24 * 365 * 6))
        spans.append((start, start + timedelta(minutes=rng.randrange(60 * 24 * 900))))
    alone = [Calendar.build("Europe/Berlin", WEEKDAYS).seconds_between(*s) for s in spans]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns as often as they can
    try:
        for trial in range(6):
            shared = Calendar.build("Europe/Berlin", WEEKDAYS)
            wrong: list[int] = []

            def ask(seed: int, shared: Calendar = shared, wrong: list[int] = wrong) -> None:
                order = list(range(len(spans)))
                random.Random(seed).shuffle(order)
                wrong.extend(i for i in order if shared.seconds_between(*spans[i]) != alone[i])

            threads = [threading.Thread(target=ask, args=(trial * 4 + k,)) for k in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert wrong == [], (trial, len(wrong))
    finally:
        sys.setswitchinterval(switch)
