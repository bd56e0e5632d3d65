"""Tool versioning as data: every deprecated tool name, its replacement, how its
arguments map and when it retires, in one table.

MCP has no standard deprecation field, so the machine-readable facts go in ``_meta``
under one namespaced key (MCP spec, "General fields: _meta": prefixed key names are
reserved to their owner): on the tool as listed, and on every result of a call to it.
On and after its retirement date a tool is no longer listed, and a call to it is an
``isError`` result naming the replacement and how the arguments map. The deployment may
move a date (``TICKET_SERVER_RETIREMENT_DATES``); everything else here is the code's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime

META_KEY = "dev.ticket-server/deprecation"

Clock = Callable[[], date]
"""Today's date (UTC); tests move it."""


def utc_today() -> date:
    return datetime.now(UTC).date()


@dataclass(frozen=True)
class Deprecation:
    """``tool`` is deprecated in favour of ``replacement`` and retires on ``sunset``;
    ``arguments`` tells a model how to call the replacement instead."""

    tool: str
    replacement: str
    sunset: date
    arguments: str

    def announcement(self) -> str:
        """The first line of the deprecated tool's description."""
        return f"DEPRECATED, retires {self.sunset.isoformat()}: use {self.replacement}."

    def meta(self) -> dict[str, object]:
        return {
            META_KEY: {
                "deprecated": True,
                "replacement": self.replacement,
                "sunset": self.sunset.isoformat(),
            }
        }

    def retired(self, today: date) -> bool:
        return today >= self.sunset

    def retired_message(self) -> str:
        return (
            f"The tool {self.tool} was retired on {self.sunset.isoformat()}. "
            f"Call {self.replacement} instead: {self.arguments}"
        )


# Release 0.2.0 (2026-11-30) deprecated the original tools, retiring them one quarter later.
DEPRECATED: tuple[Deprecation, ...] = (
    Deprecation(
        "get_ticket_status",
        "get_ticket_status_v2",
        date(2027, 2, 28),
        "pass the same ticket_id; the result has status, owner and updated_at (an RFC 3339 "
        "time) in place of updated (a date), plus subject, priority, queue and created_at.",
    ),
    Deprecation(
        "search_tickets",
        "search_tickets_v2",
        date(2027, 2, 28),
        "pass the same query and limit; v2 matches words in subject and body, returns the "
        "tickets under `tickets` and a next_cursor for further pages.",
    ),
)


@dataclass(frozen=True)
class ToolVersions:
    """The deprecated tools of one deployment (dates as the settings move them) and the
    clock that decides retirement."""

    deprecations: Mapping[str, Deprecation]
    clock: Clock = utc_today

    @classmethod
    def with_dates(
        cls, retirement_dates: Mapping[str, date], clock: Clock = utc_today
    ) -> ToolVersions:
        """``DEPRECATED`` with each date in ``retirement_dates`` (by tool name) moved."""
        return cls(
            {d.tool: replace(d, sunset=retirement_dates.get(d.tool, d.sunset)) for d in DEPRECATED},
            clock,
        )

    def get(self, tool: str) -> Deprecation | None:
        return self.deprecations.get(tool)

    def family(self, tool: str) -> str:
        """The current name of the operation ``tool`` performs: its replacement when it is
        deprecated, else itself (a deprecated name and its replacement share one rate limit)."""
        deprecation = self.deprecations.get(tool)
        return deprecation.replacement if deprecation is not None else tool

    def retired(self, tool: str) -> Deprecation | None:
        """The deprecation of ``tool`` if it has retired by today, else None."""
        deprecation = self.deprecations.get(tool)
        return (
            deprecation if deprecation is not None and deprecation.retired(self.clock()) else None
        )
