"""The built-in clock server: what time it is, here or in any IANA time zone, and a time of one zone in
another. Zones come from `zoneinfo` (the system's tz database, or the `tzdata` package where there is none).

Tools:
    current_time(timezone="") -> "2025-03-04T14:05:09+01:00 (Tuesday; Europe/Paris, CET, UTC+01:00)"
    convert_time(time, from_timezone, to_timezone, date="") -> "14:30 in Europe/London is 15:30 in
        Europe/Paris (Tuesday 2025-03-04); Europe/Paris is 1 hour ahead"
"""

from __future__ import annotations

import os
import re
from datetime import date as Date
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

_HH_MM = re.compile(r"(\d{1,2}):(\d{2})")
_READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)


def zone(name: str) -> tuple[tzinfo, str]:
    """The zone of an IANA name ("" : this machine's own) and the name to show; ToolError naming a zone
    that does not exist."""
    if not name.strip():
        return local_zone()
    try:
        return ZoneInfo(name.strip()), name.strip()
    except (ZoneInfoNotFoundError, ValueError):  # ValueError: not a zone key at all ("../x", "/etc")
        raise ToolError(f"unknown time zone {name!r}: give an IANA name such as Europe/Paris, "
                        "America/New_York or UTC") from None


def local_zone() -> tuple[tzinfo, str]:
    """This machine's zone, by its IANA name where it can be found (TZ, then /etc/localtime's link into the
    tz database), else the fixed offset the C library reports."""
    for key in (os.environ.get("TZ", "").lstrip(":"), _localtime_key()):
        if key:
            try:
                return ZoneInfo(key), key
            except (ZoneInfoNotFoundError, ValueError):
                continue
    here = datetime.now().astimezone().tzinfo
    assert here is not None
    return here, "local time"


def _localtime_key() -> str:
    """"Europe/Paris" where /etc/localtime links into a zoneinfo folder (Linux, macOS); "" elsewhere."""
    try:
        target = str(Path("/etc/localtime").resolve())
    except OSError:
        return ""
    _, found, key = target.partition("zoneinfo/")
    return key if found else ""


def describe(moment: datetime, zone_name: str) -> str:
    """"2025-03-04T14:05:09+01:00 (Tuesday; Europe/Paris, CET, UTC+01:00)"."""
    return (f"{moment.isoformat(timespec='seconds')} ({moment:%A}; {zone_name}, {moment.tzname()}, "
            f"UTC{_offset(moment.utcoffset())})")


def _offset(delta: timedelta | None) -> str:
    minutes = int((delta or timedelta()).total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _difference(hours: float) -> str:
    if hours == 0:
        return "the same time"
    amount = f"{abs(hours):g} hour" + ("" if abs(hours) == 1 else "s")
    return f"{amount} {'ahead' if hours > 0 else 'behind'}"


def convert(time: str, from_zone: str, to_zone: str, day: str = "") -> str:
    """A wall-clock time of one zone in another, on `day` (YYYY-MM-DD; today in the first zone by default,
    which decides summer time)."""
    match = _HH_MM.fullmatch(time.strip())
    if not match or int(match[1]) > 23 or int(match[2]) > 59:
        raise ToolError(f"time must be HH:MM on a 24-hour clock, not {time!r}")
    source, source_name = zone(from_zone)
    target, target_name = zone(to_zone)
    try:
        when = Date.fromisoformat(day.strip()) if day.strip() else datetime.now(source).date()
    except ValueError:
        raise ToolError(f"date must be YYYY-MM-DD, not {day!r}") from None
    start = datetime(when.year, when.month, when.day, int(match[1]), int(match[2]), tzinfo=source)
    end = start.astimezone(target)
    ahead = ((end.utcoffset() or timedelta()) - (start.utcoffset() or timedelta())).total_seconds() / 3600
    return (f"{start:%H:%M} in {source_name} is {end:%H:%M} in {target_name} ({end:%A %Y-%m-%d}); "
            f"{target_name} is {_difference(ahead)}")


def make_server() -> MCPServer:
    """The clock as an MCP server (run it with `.run()`: stdio)."""
    server = MCPServer("clock", instructions="The current time, and times converted between time zones.")

    @server.tool(annotations=_READ_ONLY)
    def current_time(timezone: str = "") -> str:
        """The current date and time, here or in a time zone.

        `timezone`: an IANA name such as Europe/Paris, America/New_York or UTC; empty for this computer's.
        """
        where, name = zone(timezone)
        return describe(datetime.now(where), name)

    @server.tool(annotations=_READ_ONLY)
    def convert_time(time: str, from_timezone: str, to_timezone: str, date: str = "") -> str:
        """Convert a time of day from one time zone to another.

        `time`: HH:MM, 24-hour. The zones: IANA names such as Europe/Paris; empty for this computer's.
        `date`: YYYY-MM-DD, today by default (the date decides summer time).
        """
        return convert(time, from_timezone, to_timezone, date)

    return server
