"""keep_alive.py: every form of Ollama's `keep_alive`, and what is not one."""

from __future__ import annotations

import pytest

from app.server.errors import ApiError
from app.server.keep_alive import NEVER, parse_keep_alive


@pytest.mark.parametrize(("value", "seconds"), [
    (None, None),  # left out or null: the server's default
    ("5m", 300.0), ("1h30m", 5400.0), ("1h", 3600.0), ("90s", 90.0), ("300ms", 0.3), ("1.5h", 5400.0),
    ("2h45m30.5s", 9930.5), ("+5m", 300.0), (".5m", 30.0), ("100us", 1e-4), ("100\u00b5s", 1e-4),
    ("100\u03bcs", 1e-4), ("1000000ns", 1e-3), (" 10m ", 600.0),
    (300, 300.0), (2.5, 2.5), ("300", 300.0), ("2.5", 2.5),  # numbers are seconds, as text too
    (0, 0.0), ("0", 0.0), ("0s", 0.0), (0.0, 0.0), ("-0", 0.0),  # unload once the reply is over
    (-1, NEVER), ("-1", NEVER), ("-1m", NEVER), (-0.5, NEVER), ("-1h30m", NEVER), (-10**400, NEVER), ("-" + "9" * 400, NEVER),  # never
])
def test_every_form_ollama_takes(value, seconds):
    parsed = parse_keep_alive(value)
    assert parsed is None if seconds is None else parsed == pytest.approx(seconds)


@pytest.mark.parametrize("value", [
    "", " ", "abc", "5 m", "5min", "m", "1d", "5m3", "--5m", "5m-3s", "1e3", "1e3s", "inf", "nan", "0x10",
    "five minutes", ".", ".s", "1..5s", True, False, [], ["5m"], {}, {"seconds": 5}, 10**400, "9" * 400,
])
def test_what_is_no_duration_is_a_400_naming_the_field(value):
    with pytest.raises(ApiError) as caught:
        parse_keep_alive(value)
    assert caught.value.status == 400 and caught.value.param == "keep_alive"
    assert "'keep_alive' must be a duration" in caught.value.message


def test_the_field_named_is_the_callers():
    with pytest.raises(ApiError) as caught:
        parse_keep_alive("soon", param="metadata.keep_alive")
    assert caught.value.param == "metadata.keep_alive" and "'metadata.keep_alive'" in caught.value.message
