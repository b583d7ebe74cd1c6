"""Read byte ranges of a local file or an http(s) URL, without fetching the whole thing."""

from __future__ import annotations

import os
import re
import urllib.error
import urllib.parse
import urllib.request
from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from models.formats.errors import InvalidModelFile
from models.formats.local_file import open_regular_file


class _NoCredentialsAcrossOrigins(urllib.request.HTTPRedirectHandler):
    """Follows redirects, but never carries the hub token to another host (the CDN)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, ANN201 - urllib's signature
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin(newurl) != _origin(req.full_url):
            for name in ("Authorization", "Cookie"):
                new.remove_header(name)
        return new


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, parts.netloc


_OPENER = urllib.request.build_opener(_NoCredentialsAcrossOrigins)

DEFAULT_TIMEOUT_S = 30.0
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_SKIP_CHUNK = 1 << 20


class ByteSource(ABC):
    """Random access to the bytes of one file.

    Attributes:
        name: The path or URL, as used in error messages.
        bytes_fetched: Bytes read from disk or received from the network so far.
    """

    name: str
    bytes_fetched: int

    @property
    @abstractmethod
    def size(self) -> int | None:
        """Total size in bytes, or None while unknown."""

    @abstractmethod
    def read(self, offset: int, length: int) -> bytes:
        """Up to `length` bytes from `offset`; fewer only at the end of the file."""

    def close(self) -> None:  # noqa: B027 - optional for sources that hold nothing
        """Release the file or connection."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class FileByteSource(ByteSource):
    """A local file."""

    def __init__(self, path: str | Path) -> None:
        self.name = str(path)
        self.bytes_fetched = 0
        # A FIFO or device is refused here, before any read could block (closed by close()).
        self._file: IO[bytes] = open_regular_file(path)
        self._size = os.fstat(self._file.fileno()).st_size

    @property
    def size(self) -> int | None:
        return self._size

    def read(self, offset: int, length: int) -> bytes:
        if offset >= self._size or length <= 0:
            return b""
        self._file.seek(offset)
        data = self._file.read(length)
        self.bytes_fetched += len(data)
        return data

    def close(self) -> None:
        self._file.close()


class HttpByteSource(ByteSource):
    """An http(s) URL read with `Range: bytes=a-b` requests.

    A server that honours Range answers 206 and sends only the range. One that ignores it
    answers 200 with the whole file: the response is then kept open and read as a stream,
    only as far as needed, and closed by `close()`, so the rest is never downloaded.

    Args:
        url: The http or https URL.
        headers: Extra request headers (e.g. `Authorization` for a hub token).
        timeout: Seconds to wait for connecting and for each read.
    """

    def __init__(self, url: str, headers: dict[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.name = url
        self.bytes_fetched = 0
        self._headers = dict(headers or {})
        self._timeout = timeout
        self._size: int | None = None
        self._stream: IO[bytes] | None = None  # a 200 response, read sequentially
        self._stream_pos = 0

    @property
    def size(self) -> int | None:
        return self._size

    def read(self, offset: int, length: int) -> bytes:
        if length <= 0 or (self._size is not None and offset >= self._size):
            return b""
        if self._stream is not None:
            return self._read_stream(offset, length)
        request = urllib.request.Request(
            self.name, headers={**self._headers, "Range": f"bytes={offset}-{offset + length - 1}"}
        )
        try:
            response = _OPENER.open(request, timeout=self._timeout)
        except urllib.error.HTTPError as exc:
            if exc.code == 416:  # range starts past the end
                return b""
            raise InvalidModelFile(self.name, f"the server answered HTTP {exc.code} {exc.reason}") from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise InvalidModelFile(self.name, f"cannot be fetched ({reason})") from exc
        if response.status == 206:
            with response:
                match = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
                if match and int(match.group(1)) != offset:
                    raise InvalidModelFile(self.name, f"the server sent bytes from {match.group(1)}, not from {offset}")
                if match and match.group(3) != "*":
                    self._size = int(match.group(3))
                return self._recv(response, length)
        # 200: the server ignored Range and sends the whole file from byte 0.
        total = response.headers.get("Content-Length")
        if total is not None and total.isdigit():
            self._size = int(total)
        self._stream, self._stream_pos = response, 0
        return self._read_stream(offset, length)

    def _read_stream(self, offset: int, length: int) -> bytes:
        assert self._stream is not None
        if offset < self._stream_pos:  # going back: start the stream again
            self.close()
            return self.read(offset, length)
        while self._stream_pos < offset:
            skipped = self._recv(self._stream, min(_SKIP_CHUNK, offset - self._stream_pos))
            if not skipped:
                return b""
            self._stream_pos += len(skipped)
        data = self._recv(self._stream, length)
        self._stream_pos += len(data)
        return data

    def _recv(self, stream: IO[bytes], length: int) -> bytes:
        parts: list[bytes] = []
        got = 0
        try:
            while got < length:
                part = stream.read(length - got)
                if not part:
                    break
                parts.append(part)
                got += len(part)
        except (TimeoutError, OSError) as exc:
            raise InvalidModelFile(self.name, f"the download stopped ({exc})") from exc
        self.bytes_fetched += got
        return b"".join(parts)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
            self._stream_pos = 0


def open_byte_source(
    source: str | Path | ByteSource, headers: dict[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT_S
) -> ByteSource:
    """A ByteSource for a path, an http(s) URL, or `source` itself when it already is one.

    Raises:
        InvalidModelFile: A local file is missing or unreadable.
    """
    if isinstance(source, ByteSource):
        return source
    text = str(source)
    if isinstance(source, str) and text.startswith(("http://", "https://")):
        return HttpByteSource(text, headers=headers, timeout=timeout)
    return FileByteSource(source)
