"""Read an OpenAI-style server-sent event stream into JSON objects, strictly and within limits.

Servers differ in small ways (blank `data:` keep-alives, comments, `event:` lines); those
are skipped. Anything else that is not a JSON object is a MalformedStream: the reply would
otherwise be cut or garbled without a word. The server is someone else's: one line, and one
event, may hold at most `max_event_bytes`, so a line that never ends cannot fill this
machine's memory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from app.remote.bounded_http import size_text

MAX_EVENT_BYTES = 8 << 20  # one event (its data lines together); a real chunk is a few hundred bytes

# SSE ends a line with CRLF, LF or CR.
_EOL = re.compile(rb"\r\n|\r|\n")


class MalformedStream(ValueError):
    """The server's event stream is not OpenAI's format."""


def split_lines(chunks: Iterable[bytes], max_line: int = MAX_EVENT_BYTES) -> Iterator[str]:
    """The lines of a byte stream, decoded as UTF-8; MalformedStream once one passes `max_line` bytes."""
    pending = bytearray()
    for chunk in chunks:
        # Earlier bytes hold no line end, except a CR kept back in case its LF comes in this chunk.
        scan = len(pending) - 1 if pending.endswith(b"\r") else len(pending)
        pending += chunk
        start = 0
        while (match := _EOL.search(pending, scan)) is not None:
            if match.group() == b"\r" and match.end() == len(pending):
                break
            yield _line(pending[start:match.start()], max_line)
            start = scan = match.end()
        del pending[:start]
        if len(pending) - pending.endswith(b"\r") > max_line:  # (no copy of what may be megabytes)
            raise _too_long(max_line)
    if pending:
        yield _line(pending.removesuffix(b"\r"), max_line)


def read_events(chunks: Iterable[bytes], max_event_bytes: int = MAX_EVENT_BYTES) -> Iterator[dict[str, Any]]:
    """The JSON object of each `data:` event, until `data: [DONE]`; MalformedStream if it never comes."""
    data: list[str] = []
    size = 0
    for line in split_lines(chunks, max_event_bytes):
        if line.startswith(":") or line.startswith(("event:", "id:", "retry:")):
            continue
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
            size += len(data[-1])
            if size > max_event_bytes:  # many data lines that never end their event
                raise _too_long(max_event_bytes)
            continue
        if line.strip():
            raise MalformedStream(f"unexpected line in the event stream: {line[:80]!r}")
        # A blank line ends the event.
        if not data:
            continue
        payload, data, size = "\n".join(data), [], 0
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


def _line(raw: bytes | bytearray, max_line: int) -> str:
    if len(raw) > max_line:
        raise _too_long(max_line)
    return raw.decode("utf-8", errors="replace")


def _too_long(limit: int) -> MalformedStream:
    return MalformedStream(f"an event is longer than {size_text(limit)}, Tailor's limit for one event")


def _parse(payload: str) -> dict[str, Any]:
    try:
        event = json.loads(payload)
    except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than Python parses
        raise MalformedStream(f"an event is not JSON: {payload[:80]!r}") from None
    if not isinstance(event, dict):
        raise MalformedStream(f"an event is not a JSON object: {payload[:80]!r}")
    return event
