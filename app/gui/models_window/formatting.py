"""Sizes, speeds and times in words for the model manager."""

from __future__ import annotations

from datetime import datetime

from models.units import human_size  # noqa: F401 - the pages import it from here


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
