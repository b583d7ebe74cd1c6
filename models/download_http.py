"""Fetch one file over HTTP into its `.incomplete` file, resuming with a Range request. No threads here.

`fetch_into` makes one attempt: it returns when the partial file holds every byte, raises `Retryable`
for what a later attempt may fix (connection drop, stall, 5xx), `Stopped` when asked to stop, and
`DownloadError` for the rest.
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import queue
import re
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from models.download_types import DownloadError, DownloadFile

_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")
_REDIRECTS = (301, 302, 303, 307, 308)
_MAX_REDIRECTS = 10
_DISK_FULL = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}
_HASH_BUFFERS = 4
USER_AGENT = "tailor/0.1 (model downloader)"


class Retryable(Exception):
    """A failure a later attempt may fix (connection drop, stall, 5xx, 429)."""


class Stopped(Exception):
    """The download was paused or cancelled while this attempt ran."""


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


def _open(url: str, headers: dict[str, str], timeout: float,
          register: Callable[[http.client.HTTPConnection | None], None]) -> http.client.HTTPResponse:
    """GET `url`, following redirects; Authorization is not sent to another origin."""
    origin = urlsplit(url)[:2]
    headers = dict(headers)
    for _ in range(_MAX_REDIRECTS + 1):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise DownloadError("network", f"unsupported URL {url!r}")
        if parts[:2] != origin:
            headers = {k: v for k, v in headers.items() if k.lower() not in ("authorization", "cookie")}
        if parts.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                parts.hostname, parts.port, timeout=timeout, context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        register(conn)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        try:
            conn.request("GET", path, headers={"User-Agent": USER_AGENT, **headers})
            resp = conn.getresponse()
        except TimeoutError as exc:
            conn.close()
            raise Retryable(f"no answer from {parts.hostname} for {timeout:g} s") from exc
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise Retryable(f"cannot reach {parts.hostname}: {exc}") from exc
        if resp.status in _REDIRECTS and resp.getheader("Location"):
            url = urljoin(url, resp.getheader("Location"))
            resp.close()
            conn.close()
            continue
        return resp
    raise DownloadError("network", f"too many redirects from {url}")


def fetch_into(
    file: DownloadFile,
    partial: Path,
    headers: dict[str, str],
    *,
    state: HashState,
    timeout: float,
    chunk_size: int,
    on_bytes: Callable[[int], None],
    should_stop: Callable[[], bool],
    register: Callable[[http.client.HTTPConnection | None], None],
) -> None:
    """One attempt at completing `partial` (resuming from its size); `state` follows it in place."""
    size = file.size
    offset = partial.stat().st_size if partial.exists() else 0
    if offset > size:
        _truncate(partial, file)
        offset = 0
    if state.length != offset:
        state.rehash(partial, offset)
    if offset == size and size > 0:
        return
    range_headers = dict(headers)
    if offset:
        range_headers["Range"] = f"bytes={offset}-"
    resp = _open(file.url, range_headers, timeout, register)
    try:
        if _check_answer(resp, file, offset) is None and offset:  # a 200: the whole file, from byte 0
            _truncate(partial, file)
            state.reset()
            state.restarted += 1
            offset = 0
        _copy_body(resp, file, partial, state, size - offset, chunk_size, on_bytes, should_stop, timeout)
    finally:
        resp.close()
        register(None)


def _check_answer(resp: http.client.HTTPResponse, file: DownloadFile, offset: int) -> int | None:
    """None for a usable 200; the byte count for a usable 206; else raise."""
    status = resp.status
    name = file.path_in_repo
    if status == 200:
        declared = resp.getheader("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) != file.size:
            raise DownloadError("checksum", f"size mismatch for {name}: the server sends {declared} bytes, "
                                            f"the hub lists {file.size}")
        return None
    if status == 206:
        match = _CONTENT_RANGE.match(resp.getheader("Content-Range", "").strip())
        if (not match or int(match.group(1)) != offset or int(match.group(2)) != file.size - 1
                or match.group(3) not in ("*", str(file.size))):
            raise Retryable(f"unexpected Content-Range {resp.getheader('Content-Range')!r} for {name}")
        return file.size - offset
    if status == 416:
        raise Retryable(f"range not satisfiable for {name}")
    if status in (401, 403):
        raise DownloadError("gated", f"access denied to {name} (HTTP {status}): the repo is gated or "
                                     "private; accept its terms on the hub and log in with a token")
    if status == 404:
        raise DownloadError("not_found", f"{name} not found on the server (HTTP 404)")
    if status >= 500 or status in (408, 429):
        raise Retryable(f"HTTP {status} {resp.reason} for {name}")
    raise DownloadError("network", f"HTTP {status} {resp.reason} for {name}")


def _copy_body(resp, file, partial, state, remaining, chunk_size, on_bytes, should_stop, timeout) -> None:
    """Receive and write on this thread; hash on another (sha256 is as slow as a loopback socket)."""
    free: queue.Queue[bytearray] = queue.Queue()
    for _ in range(_HASH_BUFFERS):
        free.put(bytearray(chunk_size))
    work: queue.Queue[tuple[bytearray, int] | None] = queue.Queue()
    hasher = threading.Thread(target=_hash_loop, args=(state, work, free), name="sha256", daemon=True)
    hasher.start()
    name = file.path_in_repo
    try:
        with partial.open("ab", buffering=0) as out:
            while remaining > 0:
                if should_stop():
                    raise Stopped
                buf = free.get()
                view = memoryview(buf)
                try:
                    n = resp.readinto(view[: min(chunk_size, remaining)])
                except TimeoutError as exc:
                    raise Retryable(f"stalled: no bytes for {timeout:g} s while fetching {name}") from exc
                except (OSError, http.client.HTTPException, ValueError) as exc:
                    if should_stop():
                        raise Stopped from exc
                    raise Retryable(f"connection lost while fetching {name}: {exc!r}") from exc
                if not n:
                    if should_stop():
                        raise Stopped
                    raise Retryable(f"connection closed early while fetching {name}")
                _write_all(out, view[:n], name)
                work.put((buf, n))
                state.length += n
                state.fetched += n
                remaining -= n
                on_bytes(n)
    finally:
        work.put(None)
        hasher.join()


def _hash_loop(state: HashState, work: queue.Queue, free: queue.Queue) -> None:
    while (item := work.get()) is not None:
        buf, n = item
        state.sha256.update(memoryview(buf)[:n])
        free.put(buf)


def _write_all(out, data: memoryview, name: str) -> None:
    try:
        written = 0
        while written < len(data):
            written += out.write(data[written:])
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


def abort_connection(conn: http.client.HTTPConnection | None) -> None:
    """Wake a reader blocked on `conn` (from another thread): shut its socket down."""
    sock = getattr(conn, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
