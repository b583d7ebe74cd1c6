"""Connections the server holds: a deadline for each request's headers and a cap on how many are open.

uvicorn waits forever for a request head that never ends (a client that stops mid-headers,
or a slowloris holding sockets on purpose) and accepts any number of connections. Here each
connection must deliver a complete head within `header_timeout_s` of connecting or of its
previous response; then it gets a 408 (when it sent part of one) and is closed. At most
`max_connections` are open: one more evicts the connection that has waited longest for its
headers, so stalled sockets can never lock out a real client; when every open connection is
in the middle of a request, the newcomer gets a 503 at once.

The protocol is uvicorn's h11 one with hooks on its callbacks; of its insides only
`self.cycle` (a new one per request head parsed, `response_complete` once answered),
`self.conn` (h11's states), `self.transport` and `self.loop` are relied on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.server.errors import ApiError

log = logging.getLogger(__name__)

# A refused connection is answered, half-closed, and given this long to stop sending before
# it is closed: closing with its request unread would reset it before it reads the 503.
_LINGER_S = 1.0

_REASONS = {408: b"Request Timeout", 503: b"Service Unavailable"}
# A flood of connections must not become a flood of log lines.
_WARN_EVERY_S = 60.0


@dataclass(slots=True, frozen=True)
class ConnectionLimits:
    """How long a request's headers may take, and how many connections may be open at once."""

    header_timeout_s: float
    max_connections: int


class _Registry:
    """One server's connections, in the order they began waiting for a request head."""

    def __init__(self, limits: ConnectionLimits):
        self.limits = limits
        self.open: set[_LimitedH11Protocol] = set()
        self.waiting: dict[_LimitedH11Protocol, None] = {}  # insertion order = oldest first
        self._warned_at = -_WARN_EVERY_S

    def warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            log.warning("%s (logged at most once a minute)", message)

    def admit(self, conn: _LimitedH11Protocol) -> bool:
        """Make room for `conn` (evicting the longest-waiting connection if full); False if none can go."""
        if len(self.open) >= self.limits.max_connections:
            victim = next(iter(self.waiting), None)
            if victim is None:
                return False
            self.warn(f"connection limit ({self.limits.max_connections}) reached: closing the connection "
                      "that waited longest for its request")
            victim.drop(ApiError(
                503, f"The server is at its limit of {self.limits.max_connections} connections and this one "
                "had not sent a request.", "server_error", None, "too_many_connections",
            ))
        self.open.add(conn)
        return True

    def wait(self, conn: _LimitedH11Protocol) -> None:
        self.waiting.pop(conn, None)
        self.waiting[conn] = None

    def busy(self, conn: _LimitedH11Protocol) -> None:
        self.waiting.pop(conn, None)

    def leave(self, conn: _LimitedH11Protocol) -> None:
        self.open.discard(conn)
        self.waiting.pop(conn, None)


class _LimitedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and the registry's cap."""

    registry: _Registry  # set on the per-server subclass made by limited_protocol()

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._timer: asyncio.TimerHandle | None = None
        self._got_bytes = False  # of a new request head, since the wait began
        self._refused = False

    # ------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self.registry.admit(self):
            self._refuse()
            return
        self._track()

    def connection_lost(self, exc: Exception | None) -> None:
        self.registry.leave(self)
        self._cancel_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # read and dropped until the linger ends
        if self.conn.their_state is h11.IDLE:  # not the rest of a body answered early
            self._got_bytes = True
        super().data_received(data)

    # ------------------------------------------------------------ uvicorn hooks

    def handle_events(self) -> None:
        super().handle_events()
        self._track()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._track()

    # ------------------------------------------------------------ deadline and refusal

    def _track(self) -> None:
        """Start the deadline when the connection waits on its client, stop it when a request runs."""
        if self.transport.is_closing():
            return
        # No request in hand (none yet, or its response is sent): the next move is the client's.
        waiting = self.cycle is None or self.cycle.response_complete
        if waiting and self._timer is None:
            self._got_bytes = False
            self._timer = self.loop.call_later(self.registry.limits.header_timeout_s, self._head_timed_out)
            self.registry.wait(self)
        elif not waiting and self._timer is not None:
            self._cancel_timer()
            self.registry.busy(self)

    def _head_timed_out(self) -> None:
        self._timer = None
        self.drop(ApiError(
            408, f"The request's headers did not arrive within {self.registry.limits.header_timeout_s:g} s.",
            "invalid_request_error", None, "request_timeout",
        ))

    def drop(self, error: ApiError) -> None:
        """Close a connection that has not sent a request head, answering `error` if it began one."""
        self.registry.leave(self)
        self._cancel_timer()
        if self.transport.is_closing():
            return
        if self._got_bytes:
            self._write_error(error)
        self.transport.close()

    def _refuse(self) -> None:
        self._refused = True
        limit = self.registry.limits.max_connections
        self.registry.warn(f"connection limit ({limit}) reached with every connection busy: answering 503")
        self._write_error(ApiError(
            503, f"The server has {limit} connections open, all busy with requests; try again shortly.",
            "server_error", None, "too_many_connections",
        ))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._timer = self.loop.call_later(_LINGER_S, self.transport.close)

    def _write_error(self, error: ApiError) -> None:
        # Written as raw bytes: h11 cannot send a response to a request it has not parsed.
        body = error.body_bytes()
        head = (
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
            % (error.status, _REASONS[error.status], len(body))
        )
        self.transport.write(head + body)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def limited_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """An HTTP protocol class for one server (uvicorn's `http=`), its connections counted together."""
    registry = _Registry(limits)
    return type("TailorH11Protocol", (_LimitedH11Protocol,), {"registry": registry})
