"""Reading a remote server's answers within fixed limits, and interrupting a read from another thread.

The server is someone else's: an error page that never ends, or a model list of gigabytes, must
not fill this machine's memory. Every body is read in chunks up to a cap, and for a limited time;
what lies beyond either is never read, and the caller is told which one ended the read.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import httpx

MAX_ERROR_BODY = 64 << 10  # an error answer's text: its message is a line or two
MAX_JSON_BODY = 8 << 20  # a whole JSON answer (the model list)


def size_text(nbytes: int) -> str:
    """8 MiB, 64 KiB, 100 bytes."""
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / (1 << shift):g} {unit}"
    return f"{nbytes} bytes"


@dataclass(slots=True, frozen=True)
class Capped:
    """What was read of a body: its bytes, how long they took, and why the read stopped before the
    body's end ("size": it went on past the limit; "time": it came too slowly), or None: it did not."""

    data: bytes
    seconds: float
    cut: Literal["size", "time"] | None = None

    def pace(self) -> str:
        """How much came in how long: "121 bytes in 120 s"."""
        seconds = f"{self.seconds:.0f}" if self.seconds >= 10 else f"{self.seconds:.1f}"
        return f"{len(self.data):,} bytes in {seconds} s"


def read_capped(chunks: Iterable[bytes], limit: int, deadline_s: float | None = None) -> Capped:
    """Up to `limit` bytes, read for at most about `deadline_s` seconds.

    The deadline is checked as each chunk comes, so a server that drips a byte at a time (each
    within the read timeout) still ends the read; that is a cut of its own ("time"), not a body
    too long: the one that dripped 121 bytes in two minutes did not send 64 KiB.
    """
    body = bytearray()
    start = time.monotonic()
    for chunk in chunks:
        room = limit - len(body)
        if len(chunk) > room:
            body += chunk[:room]
            return Capped(bytes(body), time.monotonic() - start, "size")
        body += chunk
        if deadline_s is not None and time.monotonic() - start > deadline_s:
            return Capped(bytes(body), time.monotonic() - start, "time")
    return Capped(bytes(body), time.monotonic() - start)


def interrupt(response: httpx.Response) -> None:
    """Wake the thread reading `response` at once: its read ends as if the server had closed.

    Closing a socket does not wake a `recv` blocked on it in another thread (it waits for the
    read timeout); shutting it down does. Lingering 0 makes the reader's close a reset, so the
    server learns at once that nobody reads (and stops generating): a plain close after the
    shutdown can leave it blocked in a write. Without a socket (another transport), close the response.
    """
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):  # (struct linger: two ints; Windows reads the first bytes as two shorts)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        return
    with contextlib.suppress(Exception):
        response.close()
