"""Times as the history keeps them (seconds since 1970, UTC), checked before they are shown or kept.

A file may hold any number where a time belongs (1e308, 10^400, NaN); a time that datetime cannot show
would break every listing and export that shows it. `checked_time` is the one test: a number from
1970 to the end of year 9999; anything else is no time.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

EARLIEST = 0.0  # 1970-01-01 00:00 UTC
LATEST = 253402300799.0  # 9999-12-31 23:59:59 UTC, the last second datetime shows
UNKNOWN_TIME = "unknown time"


def checked_time(value: object) -> float | None:
    """`value` as a time when it is a number from 1970 to 9999 (not a bool); None otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        seconds = float(value)
    except OverflowError:  # an int beyond any float
        return None
    return seconds if math.isfinite(seconds) and EARLIEST <= seconds <= LATEST else None


def iso_time(timestamp: object) -> str:
    """A stored time as `2026-12-01 19:45 UTC` (UTC, so an export reads the same on any machine);
    "unknown time" for one that is no time (see `checked_time`)."""
    seconds = checked_time(timestamp)
    if seconds is None:
        return UNKNOWN_TIME
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")
