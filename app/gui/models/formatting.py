"""Sizes, speeds and times in words for the model manager."""

from __future__ import annotations

from datetime import datetime


def human_size(n: float) -> str:
    """Bytes in decimal units, as file managers show them: 4.9 GB."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def human_eta(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def human_date(when: datetime | None) -> str:
    return when.strftime("%Y-%m-%d") if when else "?"
