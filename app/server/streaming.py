"""Responses that end when the client leaves: server-sent events, and a watch for plain requests.

A reply the client no longer reads must stop in the engine at once, not when the next
token fails to send (a queued request sends nothing for a while): both wait on the ASGI
`http.disconnect` message alongside the work.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from app.server.guard import Receive, Scope, Send

T = TypeVar("T")

DONE_LINE = b"data: [DONE]\n\n"


def sse(data: dict[str, Any]) -> bytes:
    """One server-sent event carrying a JSON object."""
    return b"data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"


class ClientGone(Exception):
    """The HTTP client disconnected before its reply was ready."""


async def wait_disconnect(receive: Receive) -> None:
    """Return when the client disconnects (the request body was read before)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(work: Awaitable[T], receive: Receive) -> T:
    """The result of `work`, or ClientGone (and `work` cancelled) if the client leaves first."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(wait_disconnect(receive))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
        watch.cancel()
    if not task.done() or task.cancelled():
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise ClientGone()
    return task.result()


class EventStream:
    """An ASGI response streaming `chunks` as text/event-stream.

    Args:
        chunks: the encoded events; closed early (so the reply is cancelled) when the client leaves.
        on_close: called once the stream is over, however it ended (the reply's model lease released):
            a generator closed before its first chunk never runs its own `finally`.
        headers: more response headers, lower-case names.
    """

    CONTENT_TYPE = b"text/event-stream; charset=utf-8"

    def __init__(self, chunks: AsyncIterator[bytes], on_close: Callable[[], None] | None = None,
                 headers: dict[str, str] | None = None):
        self.chunks = chunks
        self.on_close = on_close
        self.headers = headers or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        pump = asyncio.ensure_future(self._pump(send))
        watch = asyncio.ensure_future(wait_disconnect(receive))
        try:
            await asyncio.wait({pump, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not pump.done():
                pump.cancel()
            try:
                with contextlib.suppress(asyncio.CancelledError, OSError):
                    await pump
                await self.chunks.aclose()  # type: ignore[attr-defined]
            finally:
                self._closed()

    def _closed(self) -> None:
        done, self.on_close = self.on_close, None
        if done is not None:
            done()

    async def _pump(self, send: Send) -> None:
        headers = [(b"content-type", self.CONTENT_TYPE), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
        headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        async for chunk in self.chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        self._closed()  # before the last byte: a client that saw the end sees the model's lease returned
        await send({"type": "http.response.body", "body": b"", "more_body": False})
