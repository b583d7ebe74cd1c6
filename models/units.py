"""Sizes as people read them."""

from __future__ import annotations

GIB = 1024**3


def human_size(n: float) -> str:
    """Bytes in decimal units, as file managers show them: 4.9 GB."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def gb(n: int) -> str:
    """Bytes in binary gigabytes, as the plan's reasons and the memory forecast say them: 4.6 GiB."""
    return f"{n / GIB:.1f} GiB"
