"""Ollama's streamed replies: one JSON object a line (application/x-ndjson), ended by the client leaving
as a server-sent event stream is (streaming.py's EventStream: the reply is cancelled at once)."""

from __future__ import annotations

import json
from typing import Any

from app.server.streaming import EventStream


def ndjson_line(data: dict[str, Any]) -> bytes:
    """One line of the stream: a JSON object and a newline."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


class NdjsonStream(EventStream):
    """An ASGI response streaming `chunks` (each one or more whole lines) as application/x-ndjson; otherwise
    an EventStream (closed early when the client leaves, `on_close` once it is over, more `headers`)."""

    CONTENT_TYPE = b"application/x-ndjson"
