"""Ollama's `keep_alive`: how long a model stays loaded after a reply, in any form Ollama takes.

A JSON number is seconds; a string is a Go duration ("5m", "1h30m", "300ms", "-1m", "0") or, beyond
what Ollama reads, a plain number of seconds ("300"). The result is what ModelRouter.acquire takes:
None the server's default (the field left out or null), 0 unload once the reply is over, NEVER (any
negative) keep it loaded for good, else seconds. Anything else is a 400 naming the field.
"""

from __future__ import annotations

import math
import re
from typing import Any

from app.server.errors import ApiError

NEVER = -1.0
# Go's time.ParseDuration units, in seconds (µ as the micro sign U+00B5 and the Greek mu U+03BC).
_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_DURATION = re.compile(rf"[+-]?(?:{_PART.pattern})+")
_SECONDS = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)")


def parse_keep_alive(value: Any, param: str = "keep_alive") -> float | None:
    """Seconds to keep the model loaded after this reply: None default, 0 unload after, NEVER never.

    Raises:
        ApiError: 400 naming `param` for a value that is none of Ollama's forms.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _refused(param, value)
    if isinstance(value, str):
        text = value.strip()
        if _SECONDS.fullmatch(text):
            seconds = float(text)
        elif _DURATION.fullmatch(text):
            seconds = sum(float(number) * _UNITS[unit] for number, unit in _PART.findall(text))
            seconds = -seconds if text.startswith("-") else seconds
        else:
            raise _refused(param, value)
    else:
        try:
            seconds = float(value)
        except OverflowError:  # an integer past a double (10**400)
            seconds = -math.inf if value < 0 else math.inf
    if seconds < 0:
        return NEVER
    if not math.isfinite(seconds):  # no model waits that long: a mistake
        raise _refused(param, value)
    return seconds


def _refused(param: str, value: Any) -> ApiError:
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    return ApiError(400, f"'{param}' must be a duration such as \"5m\", \"1h30m\" or \"300ms\", a number of "
                         f"seconds, 0 (unload after this reply) or a negative number (keep it loaded); not {shown}.",
                    param=param, code="invalid_value")
