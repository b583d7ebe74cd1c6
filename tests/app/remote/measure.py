"""What a client took from a server: the body bytes it read off the socket, and its peak memory."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from typing import TypeVar

import httpx

T = TypeVar("T")


class CountingTransport(httpx.HTTPTransport):
    """httpx's real HTTP transport, counting the response body bytes the client pulled from the socket."""

    def __init__(self) -> None:
        super().__init__()
        self.body_bytes = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        response.stream = _Counted(response.stream, self)
        return response


class _Counted(httpx.SyncByteStream):
    def __init__(self, stream: httpx.SyncByteStream, owner: CountingTransport):
        self._stream, self._owner = stream, owner

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._stream:
            self._owner.body_bytes += len(chunk)
            yield chunk

    def close(self) -> None:
        self._stream.close()


def peak_memory(run: Callable[[], T]) -> tuple[T, int]:
    """What `run` returns, and the peak of Python's allocations (all threads) above the start while it ran."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, peak - before
