"""The SDK's transports for one server (stdio for a command, streamable HTTP for a url), with what the
connection needs to tell the user why it ended: the end of the server's messages and its HTTP errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from app.mcp.stderr_tail import StderrTail
from app.mcp.types import ServerConfig

HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)  # the SDK's own: a server may hold a stream open that long


@dataclass(slots=True)
class Watch:
    """What a connection learns from its transport: `ended` is set when the server's messages end (its
    process exited, closed stdout, or the HTTP session was dropped); `http_error` is the last HTTP error
    status line the server answered."""

    ended: anyio.Event
    http_error: str | None = None


class _WatchedReadStream:
    """The transport's read stream, setting `watch.ended` when it ends."""

    def __init__(self, stream: Any, watch: Watch):
        self._stream = stream
        self._watch = watch

    async def receive(self) -> Any:
        try:
            return await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._watch.ended.set()
            raise

    async def aclose(self) -> None:
        await self._stream.aclose()

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:  # last_context and the like
        return getattr(self._stream, name)


@asynccontextmanager
async def open_transport(config: ServerConfig, watch: Watch, stderr: StderrTail | None) -> AsyncIterator[Any]:
    """The read and write streams of the server of `config` (stdio when it has a command)."""
    async with AsyncExitStack() as stack:
        if config.command:
            params = StdioServerParameters(command=config.command, args=list(config.args), env=dict(config.env))
            errlog = stderr.writer if stderr is not None else None
            streams = await stack.enter_async_context(
                stdio_client(params, errlog=errlog) if errlog is not None else stdio_client(params))
        else:
            client = await stack.enter_async_context(_http_client(config, watch))
            streams = await stack.enter_async_context(streamable_http_client(str(config.url), http_client=client))
        read_stream, write_stream = streams
        yield _WatchedReadStream(read_stream, watch), write_stream


def _http_client(config: ServerConfig, watch: Watch) -> httpx2.AsyncClient:
    async def note_errors(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            watch.http_error = f"HTTP {response.status_code} {response.reason_phrase}".strip()

    return httpx2.AsyncClient(headers=dict(config.headers), timeout=HTTP_TIMEOUT,
                              event_hooks={"response": [note_errors]})
