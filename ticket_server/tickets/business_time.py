"""Business-time arithmetic on one calendar: a time zone (IANA, ``zoneinfo``), weekly
working hours in that zone's local time, and holidays (local dates with no working
hours): listed dates, a country's public holidays from the ``holidays`` library, or
both. Pure: no clock, no database; every instant in and out is timezone-aware.

Local hours are turned into instants with ``zoneinfo`` day by day, so a day on which the
clocks change has its true length: 09:00-17:00 is eight hours either side of a DST
change, and an interval that starts or ends in a skipped or repeated local hour is
taken at that wall time's first occurrence (``fold=0``).
"""

from __future__ import annotations

import threading
from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from itertools import pairwise
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
MAX_DAYS = 3 * 366
"""How far a calendar is searched for working time: beyond it, no working hours at all."""


_SUMS = threading.Lock()
"""Held while a calendar's remembered sums (``_prefix``, ``_base``) are read and
extended: one calendar serves every read (``sla._calendar``), and SQLite runs reads and
writes in worker threads."""


class NoWorkingHours(ValueError):
    """The calendar has no working time within ``MAX_DAYS`` of an instant."""


def parse_hours(text: str) -> tuple[time, time]:
    """``"09:00-17:30"`` as (start, end); ``"24:00"`` may end a day."""
    try:
        start_text, end_text = (part.strip() for part in text.split("-"))
        start = time.fromisoformat(start_text)
        end = time.max if end_text == "24:00" else time.fromisoformat(end_text)
    except ValueError as exc:
        raise ValueError(f"working hours {text!r}: write them as HH:MM-HH:MM") from exc
    if end <= start:
        raise ValueError(f"working hours {text!r}: the end must be after the start")
    return start, end


@lru_cache(maxsize=64)
def public_holidays(code: str) -> Container[date]:
    """The public holidays of ``code``: a country's ISO 3166-1 alpha-2 code, optionally
    with a subdivision after a hyphen as the ``holidays`` library names it (``US``,
    ``DE-BY``, ``GB-SCT``), every year (each generated at its first lookup).
    ``ValueError`` names a country or subdivision the library does not have."""
    import holidays

    country, _, subdivision = code.partition("-")
    try:
        return holidays.country_holidays(country.upper(), subdiv=subdivision or None)
    except NotImplementedError as exc:  # the library's "not available"
        raise ValueError(
            f"holiday calendar {code!r}: not a country (and subdivision) the holidays "
            "library knows; write it as US, DE-BY or GB-SCT"
        ) from exc


@lru_cache(maxsize=64)
def holiday_calendar_code(code: str) -> str:
    """``code`` spelt as the holidays library spells it (``de-be``: ``DE-BE``,
    ``de-augsburg``: ``DE-Augsburg``), so a policy takes it in any case: a country's
    subdivision codes and names never differ in case alone but for aliases of one
    subdivision (``YAP``, ``Yap``). ``code`` as given when the library has no such one."""
    import holidays

    country, _, subdivision = code.partition("-")
    try:
        known = holidays.country_holidays(country.upper())
    except NotImplementedError:
        return code
    if not subdivision:  # "de" or "de-": the whole country
        return country.upper()
    names = (*known.subdivisions, *known.subdivisions_aliases)
    spelt = next((n for n in names if n.casefold() == subdivision.casefold()), None)
    return code if spelt is None else f"{country.upper()}-{spelt}"


@dataclass(frozen=True)
class Calendar:
    """Working time: ``weekly[weekday]`` (0 = Monday) holds that day's (start, end)
    local intervals, sorted and not overlapping; ``holidays`` are local dates off, and
    so are the public holidays of ``holiday_calendar`` (``public_holidays``)."""

    zone: ZoneInfo
    weekly: Mapping[int, tuple[tuple[time, time], ...]]
    holidays: frozenset[date] = field(default_factory=frozenset)
    holiday_calendar: str | None = None

    @classmethod
    def build(
        cls,
        time_zone: str,
        hours: Mapping[str, Iterable[str]],
        holidays: Iterable[date] = (),
        holiday_calendar: str | None = None,
    ) -> Calendar:
        """From a time zone's name, ``{"mon": ["09:00-17:00"], ...}``, holiday dates and
        a holiday calendar's code (``public_holidays``)."""
        if holiday_calendar is not None:
            public_holidays(holiday_calendar)  # ValueError for an unknown one
        weekly: dict[int, tuple[tuple[time, time], ...]] = {}
        for day, intervals in hours.items():
            if day not in WEEKDAYS:
                raise ValueError(f"weekday {day!r}: use one of {', '.join(WEEKDAYS)}")
            spans = tuple(sorted(parse_hours(text) for text in intervals))
            for (_, end), (start, _) in pairwise(spans):
                if start < end:
                    raise ValueError(f"working hours of {day} overlap")
            weekly[WEEKDAYS.index(day)] = spans
        try:
            zone = ZoneInfo(time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"time zone {time_zone[:64]!r}: not an IANA name such as UTC or Europe/Berlin"
            ) from None
        return cls(zone, weekly, frozenset(holidays), holiday_calendar)

    _days: dict[date, tuple[tuple[datetime, datetime], ...]] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )
    _totals: dict[date, float] = field(default_factory=dict, compare=False, hash=False, repr=False)
    _prefix: list[float] = field(default_factory=list, compare=False, hash=False, repr=False)
    _base: list[date] = field(default_factory=list, compare=False, hash=False, repr=False)

    def _spans(self, day: date) -> tuple[tuple[datetime, datetime], ...]:
        """The working intervals of local date ``day`` as UTC instants (remembered)."""
        found = self._days.get(day)
        if found is not None:
            return found
        spans: list[tuple[datetime, datetime]] = []
        if not self.is_holiday(day):
            for start, end in self.weekly.get(day.weekday(), ()):
                begin = datetime.combine(day, start, self.zone)
                finish = (
                    datetime.combine(day + timedelta(days=1), time(), self.zone)
                    if end == time.max
                    else datetime.combine(day, end, self.zone)
                )
                spans.append((begin.astimezone(UTC), finish.astimezone(UTC)))
        self._days[day] = found = tuple(spans)
        return found

    def is_holiday(self, day: date) -> bool:
        """Whether local date ``day`` is off: listed, or a public holiday of the calendar."""
        return day in self.holidays or (
            self.holiday_calendar is not None and day in public_holidays(self.holiday_calendar)
        )

    def _total(self, day: date) -> float:
        total = self._totals.get(day)
        if total is None:
            total = sum((end - begin).total_seconds() for begin, end in self._spans(day))
            self._totals[day] = total
        return total

    def _within(self, day: date, start: datetime, end: datetime) -> float:
        return sum(
            max(0.0, (min(finish, end) - max(begin, start)).total_seconds())
            for begin, finish in self._spans(day)
        )

    def _from(self, moment: datetime) -> Iterator[tuple[datetime, datetime]]:
        """Working intervals from ``moment`` on (the first one clipped to start there)."""
        day = moment.astimezone(self.zone).date() - timedelta(days=1)
        for _ in range(MAX_DAYS + 2):
            for begin, finish in self._spans(day):
                if finish > moment:
                    yield max(begin, moment), finish
            day += timedelta(days=1)

    def seconds_between(self, start: datetime, end: datetime) -> float:
        """Working seconds in ``[start, end)`` (0 when ``end <= start``)."""
        if end <= start:
            return 0.0
        first = start.astimezone(self.zone).date()
        last = end.astimezone(self.zone).date()
        if first == last:
            return self._within(first, start, end)
        # The earlier end first: reading it may move the base day back (and forget the
        # sums from the old one), which must happen before the later end is read.
        with _SUMS:
            earlier = self._before(first + timedelta(days=1))
            between = self._before(last) - earlier
        return self._within(first, start, end) + between + self._within(last, start, end)

    def _before(self, day: date) -> float:
        """Working seconds of the local days from a base day (remembered) up to ``day``."""
        if not self._base or day < self._base[0]:
            self._base[:] = [day - timedelta(days=400)]
            self._prefix[:] = [0.0]
        index = (day - self._base[0]).days
        while len(self._prefix) <= index:
            self._prefix.append(
                self._prefix[-1]
                + self._total(self._base[0] + timedelta(days=len(self._prefix) - 1))
            )
        return self._prefix[index]

    def add(self, start: datetime, seconds: float) -> datetime:
        """The instant at which ``seconds`` of working time have passed since ``start``
        (``start`` itself for 0 or less). ``NoWorkingHours`` if the calendar has none."""
        if seconds <= 0:
            return start
        left = seconds
        for begin, finish in self._from(start):
            span = (finish - begin).total_seconds()
            if span >= left:
                return begin + timedelta(seconds=left)
            left -= span
        raise NoWorkingHours("no working hours in this calendar")

    def is_working(self, moment: datetime) -> bool:
        return any(begin <= moment for begin, _ in self._first(moment))

    def _first(self, moment: datetime) -> Iterator[tuple[datetime, datetime]]:
        for span in self._from(moment):
            yield span
            return
