"""Read an OpenAI-style server-sent event stream into JSON objects, strictly.

Servers differ in small ways (blank `data:` keep-alives, comments, `event:` lines); those
are skipped. Anything else that is not a JSON object is a MalformedStream: the reply would
otherwise be cut or garbled without a word.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any


class MalformedStream(ValueError):
    """The server's event stream is not OpenAI's format."""


def read_events(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The JSON object of each `data:` event, until `data: [DONE]`; MalformedStream if it never comes."""
    data: list[str] = []
    for line in lines:
        if line.startswith(":") or line.startswith(("event:", "id:", "retry:")):
            continue
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
            continue
        if line.strip():
            raise MalformedStream(f"unexpected line in the event stream: {line[:80]!r}")
        # A blank line ends the event.
        if not data:
            continue
        payload, data = "\n".join(data), []
        if payload.strip() == "[DONE]":
            return
        if not payload.strip():
            continue
        yield _parse(payload)
    if data:
        payload = "\n".join(data)
        if payload.strip() == "[DONE]":
            return
        yield _parse(payload)
        return
    raise MalformedStream("the event stream ended without data: [DONE] (the reply may be cut)")


def _parse(payload: str) -> dict[str, Any]:
    try:
        event = json.loads(payload)
    except ValueError:
        raise MalformedStream(f"an event is not JSON: {payload[:80]!r}") from None
    if not isinstance(event, dict):
        raise MalformedStream(f"an event is not a JSON object: {payload[:80]!r}")
    return event
