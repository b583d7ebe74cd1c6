"""Ollama's streamed replies: one JSON object a line (application/x-ndjson), ended by the client leaving
as a server-sent event stream is (streaming.py's EventStream: the reply is cancelled at once)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from app.server.guard import Send
from app.server.streaming import EventStream


def ndjson_line(data: dict[str, Any]) -> bytes:
    """One line of the stream: a JSON object and a newline."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


class NdjsonStream(EventStream):
    """An ASGI response streaming `chunks` (each one or more whole lines) as application/x-ndjson.

    Args:
        chunks: the encoded lines; closed early (so the reply is cancelled) when the client leaves.
        on_close: called once the stream is over, however it ended (the model lease released).
        headers: more response headers, lower-case names.
    """

    def __init__(self, chunks: AsyncIterator[bytes], on_close: Callable[[], None] | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(chunks, on_close)
        self.headers = headers or {}

    async def _pump(self, send: Send) -> None:
        headers = [(b"content-type", b"application/x-ndjson"), (b"cache-control", b"no-cache"),
                   (b"x-accel-buffering", b"no")]
        headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        async for chunk in self.chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
