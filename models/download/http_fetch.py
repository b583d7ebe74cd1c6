"""Fetch one file over HTTP(S) into its `.incomplete` file, resuming with a Range request.

`fetch_into` makes one attempt: it returns when the partial file holds every byte, raises `Retryable`
for what a later attempt may fix (connection drop, stall, a transfer below the floor rate, 5xx,
429), `Stopped` when asked to stop, and `DownloadError` for the rest. The requests go through
models.hub.http_client (proxies and the system's certificate store, as the hub's API calls).
"""

from __future__ import annotations

import errno
import hashlib
import queue
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2

from models.download.request import DownloadError, DownloadFile
from models.hub.http_client import USER_AGENT
from models.units import human_size

_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")
_DISK_FULL = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}
_HASH_QUEUE = 4  # batches waiting for the hasher: back-pressure, so memory stays near 4 chunks


class Retryable(Exception):
    """A failure a later attempt may fix (connection drop, stall, slow transfer, 5xx, 429).

    Attributes:
        retry_after: Seconds the server asked to wait (Retry-After), if it said.
        slow: The attempt was cut for staying below the floor rate: it counts as a failed attempt
            even though it brought some bytes (a drip must not reset the retry count forever).
    """

    def __init__(self, message: str, *, retry_after: float | None = None, slow: bool = False) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.slow = slow


class Stopped(Exception):
    """The download was paused or cancelled while this attempt ran."""


@dataclass(frozen=True, slots=True)
class RateFloor:
    """The slowest transfer kept: fewer than `min_bps * window_s` bytes in `window_s` seconds is cut.

    The stall timeout only sees silence; a server dripping a byte every few seconds never stalls
    and would never end. Its attempt is cut, retried with back-off, and the download fails after
    the retries. The bytes it brought stay in the partial file.
    """

    min_bps: float = 10_000
    window_s: float = 60.0


@dataclass(slots=True)
class HashState:
    """The sha256 of the first `length` bytes of the partial file, updated in place as bytes arrive.

    Attributes:
        restarted: How many times the file started over from byte 0 (a server that ignored Range).
        fetched: Body bytes received for this file over every attempt.
    """

    length: int = 0
    sha256: hashlib._Hash = field(default_factory=hashlib.sha256)
    restarted: int = 0
    fetched: int = 0

    def reset(self) -> None:
        self.length = 0
        self.sha256 = hashlib.sha256()

    def rehash(self, partial: Path, length: int) -> None:
        """Hash the first `length` bytes already on disk (a resume after a restart of the app)."""
        self.reset()
        with partial.open("rb") as f:
            left = length
            while left > 0:
                chunk = f.read(min(left, 4 << 20))
                if not chunk:
                    break
                self.sha256.update(chunk)
                left -= len(chunk)
        self.length = length - left


class Connection:
    """The sockets of one attempt, so another thread can wake a read blocked on them (pause, cancel).

    httpx2 has no call for that; its `trace` extension reports each socket as it is connected (and
    wrapped in TLS), and shutting a socket down makes the blocked read return at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.aborted = False
        self.expired = False  # aborted because the answer did not come in time

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if event not in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is None:
            return
        with self._lock:
            self._sockets.append(sock)
            aborted = self.aborted
        if aborted:
            _shutdown(sock)

    def abort(self) -> None:
        with self._lock:
            self.aborted = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shutdown(sock)

    def expire(self) -> None:
        self.expired = True
        self.abort()


def _shutdown(sock: socket.socket) -> None:
    try:
        if sock.fileno() != -1:
            # The plain socket's shutdown, also for a TLS socket (whose own would touch its SSL state).
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


def abort_connection(conn: Connection | None) -> None:
    """Wake a reader blocked on `conn` (from another thread)."""
    if conn is not None:
        conn.abort()


def fetch_into(
    client: httpx2.Client,
    file: DownloadFile,
    partial: Path,
    headers: dict[str, str],
    *,
    state: HashState,
    timeout: float,
    chunk_size: int,
    floor: RateFloor | None,
    on_bytes: Callable[[int], None],
    should_stop: Callable[[], bool],
    conn: Connection,
) -> None:
    """One attempt at completing `partial` (resuming from its size); `state` follows it in place.

    Args:
        timeout: No byte for this long is a stall; the answer's headers must come within it too.
        floor: The slowest transfer kept (None: no floor).
    """
    size = file.size
    offset = partial.stat().st_size if partial.exists() else 0
    if offset > size:
        _truncate(partial, file)
        offset = 0
    if state.length != offset:
        state.rehash(partial, offset)
    if offset == size and size > 0:
        return
    request_headers = {"User-Agent": USER_AGENT, **headers, "Accept-Encoding": "identity"}
    if offset:
        request_headers["Range"] = f"bytes={offset}-"
    host = urlsplit(file.url).hostname or file.url
    # A server may also drip the status line and headers: the whole answer must come in time.
    deadline = threading.Timer(timeout, conn.expire)
    deadline.daemon = True
    body = False
    try:
        deadline.start()
        with client.stream("GET", file.url, headers=request_headers, extensions={"trace": conn.trace}) as resp:
            deadline.cancel()
            if _check_answer(resp, file, offset) is None and offset:  # a 200: the whole file, from byte 0
                _truncate(partial, file)
                state.reset()
                state.restarted += 1
                offset = 0
            body = True
            _copy_body(resp, file, partial, state, size - offset, chunk_size, floor, on_bytes, should_stop)
    except httpx2.HTTPError as exc:
        if should_stop() or conn.aborted and not conn.expired:
            raise Stopped from exc
        raise _mapped(exc, file, host, timeout, body, conn) from exc
    except httpx2.InvalidURL as exc:
        raise DownloadError("network", f"unsupported URL {file.url!r}") from exc
    finally:
        deadline.cancel()


def _mapped(exc: httpx2.HTTPError, file: DownloadFile, host: str, timeout: float, body: bool,
            conn: Connection) -> Exception:
    """The Retryable or DownloadError an httpx2 failure stands for."""
    name = file.path_in_repo
    if conn.expired:
        return Retryable(f"no answer from {host} within {timeout:g} s")
    if isinstance(exc, httpx2.TooManyRedirects):
        return DownloadError("network", f"too many redirects fetching {name}")
    if isinstance(exc, httpx2.UnsupportedProtocol):
        return DownloadError("network", f"unsupported URL {file.url!r}")
    cert = _cause(exc, ssl.SSLCertVerificationError)
    if cert is not None:
        return DownloadError("network", f"the certificate of {host} is not trusted ({cert.verify_message}): add the "
                                        "CA that signed it to the system's certificate store, or point "
                                        "SSL_CERT_FILE at it")
    if isinstance(exc, httpx2.ProxyError):
        return Retryable(f"the proxy did not connect to {host}: {exc}")
    if isinstance(exc, httpx2.TimeoutException):
        if body:
            return Retryable(f"stalled: no bytes for {timeout:g} s while fetching {name}")
        return Retryable(f"no answer from {host} for {timeout:g} s")
    if isinstance(exc, httpx2.ConnectError):
        return Retryable(f"cannot reach {host}: {exc}")
    if body:
        return Retryable(f"connection lost while fetching {name}: {exc!r}")
    return Retryable(f"cannot reach {host}: {exc!r}")


def _cause(exc: BaseException, kind: type[BaseException]) -> Any:
    seen = 0
    cur: BaseException | None = exc
    while cur is not None and seen < 10:
        if isinstance(cur, kind):
            return cur
        cur = cur.__cause__ or cur.__context__
        seen += 1
    return None


def retry_after_s(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds of a Retry-After header (a number, or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _check_answer(resp: httpx2.Response, file: DownloadFile, offset: int) -> int | None:
    """None for a usable 200; the byte count for a usable 206; else raise."""
    status = resp.status_code
    name = file.path_in_repo
    if status == 200:
        declared = resp.headers.get("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) != file.size:
            raise DownloadError("checksum", f"size mismatch for {name}: the server sends {declared} bytes, "
                                            f"the hub lists {file.size}")
        return None
    if status == 206:
        content_range = resp.headers.get("Content-Range", "").strip()
        match = _CONTENT_RANGE.match(content_range)
        if (not match or int(match.group(1)) != offset or int(match.group(2)) != file.size - 1
                or match.group(3) not in ("*", str(file.size))):
            raise Retryable(f"unexpected Content-Range {content_range!r} for {name}")
        return file.size - offset
    if status == 416:
        raise Retryable(f"range not satisfiable for {name}")
    if status in (401, 403):
        raise DownloadError("gated", f"access denied to {name} (HTTP {status}): the repo is gated or "
                                     "private; accept its terms on the hub and log in with a token")
    if status == 404:
        raise DownloadError("not_found", f"{name} not found on the server (HTTP 404)")
    if status >= 500 or status in (408, 429):
        raise Retryable(f"HTTP {status} {resp.reason_phrase} for {name}",
                        retry_after=retry_after_s(resp.headers.get("Retry-After")))
    raise DownloadError("network", f"HTTP {status} {resp.reason_phrase} for {name}")


def _copy_body(resp: httpx2.Response, file: DownloadFile, partial: Path, state: HashState, remaining: int,
               chunk_size: int, floor: RateFloor | None, on_bytes: Callable[[int], None],
               should_stop: Callable[[], bool]) -> None:
    """Receive and write on this thread, so every byte received is on disk (a stall or a kill loses
    nothing); hash on another, in batches of `chunk_size` (sha256 is as slow as a loopback socket)."""
    work: queue.Queue[list[bytes] | None] = queue.Queue(_HASH_QUEUE)
    hasher = threading.Thread(target=_hash_loop, args=(state, work), name="sha256", daemon=True)
    hasher.start()
    name = file.path_in_repo
    batch: list[bytes] = []
    batch_n = 0
    window_start = time.monotonic()
    window_bytes = 0
    try:
        with partial.open("ab", buffering=0) as out:
            for piece in resp.iter_raw():
                if should_stop():
                    raise Stopped
                if len(piece) > remaining:
                    piece = piece[:remaining]
                n = len(piece)
                _write_all(out, piece, name)
                batch.append(piece)
                batch_n += n
                if batch_n >= chunk_size:
                    work.put(batch)
                    batch, batch_n = [], 0
                state.length += n
                state.fetched += n
                remaining -= n
                on_bytes(n)
                if remaining <= 0:
                    break
                window_bytes += n
                if floor is not None and (now := time.monotonic()) - window_start >= floor.window_s:
                    if window_bytes < floor.min_bps * floor.window_s:
                        raise Retryable(
                            f"too slow: {human_size(window_bytes)} in the last {now - window_start:.1f} s "
                            f"while fetching {name} (the floor is {human_size(int(floor.min_bps))}/s)",
                            slow=True)
                    window_start, window_bytes = now, 0
        if remaining > 0:
            if should_stop():
                raise Stopped
            raise Retryable(f"connection closed early while fetching {name}")
    finally:
        if batch:
            work.put(batch)
        work.put(None)
        hasher.join()


def _hash_loop(state: HashState, work: queue.Queue[list[bytes] | None]) -> None:
    while (batch := work.get()) is not None:
        for data in batch:
            state.sha256.update(data)


def _write_all(out: Any, data: bytes, name: str) -> None:
    try:
        view = memoryview(data)
        written = 0
        while written < len(view):
            written += out.write(view[written:])
    except OSError as exc:
        if exc.errno in _DISK_FULL:
            raise DownloadError("disk_full", f"disk full while writing {name}") from exc
        raise DownloadError("network", f"cannot write {name}: {exc.strerror or exc}") from exc


def _truncate(partial: Path, file: DownloadFile) -> None:
    try:
        with partial.open("r+b") as f:
            f.truncate(0)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise DownloadError("network", f"cannot reset the partial file of {file.path_in_repo}: {exc}") from exc
