"""A forward-only, buffered reader of a file header over a ByteSource, with a cap on bytes read."""

from __future__ import annotations

import struct

from models.formats.byte_source import ByteSource
from models.formats.errors import InvalidModelFile

FIRST_CHUNK = 1 << 20
MAX_CHUNK = 16 << 20
DEFAULT_MAX_HEADER_BYTES = 64 << 20

_U8 = struct.Struct("<B")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class HeaderReader:
    """Reads a header front to back, fetching chunks of the source only as they are needed.

    The first fetch is `FIRST_CHUNK` bytes; each later one is as large as all fetched so
    far (capped at `MAX_CHUNK`), so a header of H bytes costs O(log H) requests and at
    most about 2H bytes. Consumed bytes are dropped, so memory stays near one chunk.

    Args:
        source: Where the bytes come from.
        max_bytes: No byte past this offset is read; a header that needs more is refused.
    """

    def __init__(self, source: ByteSource, max_bytes: int = DEFAULT_MAX_HEADER_BYTES) -> None:
        self.source = source
        self.max_bytes = max_bytes
        self._buf = b""
        self._buf_start = 0  # file offset of _buf[0]
        self._i = 0  # index of the next unread byte in _buf
        self._fetched_to = 0
        self._eof = False

    @property
    def pos(self) -> int:
        """File offset of the next byte to read."""
        return self._buf_start + self._i

    def fail(self, problem: str) -> InvalidModelFile:
        """The error to raise for `problem` in this source."""
        return InvalidModelFile(self.source.name, problem)

    def remaining(self) -> int:
        """Bytes that may still be read: to the end of the file or of the header cap."""
        limit = self.max_bytes
        if self.source.size is not None:
            limit = min(limit, self.source.size)
        return max(0, limit - self.pos)

    def _fill(self, n: int, what: str) -> None:
        """Make at least `n` unread bytes available, or raise naming `what`."""
        size = self.source.size
        if len(self._buf) - self._i < n and size is not None and self.pos + n > size:
            raise self.fail(
                f"the file ends inside {what}: {n} bytes at offset {self.pos} run past its end "
                f"({size} bytes); the file is truncated or corrupt"
            )
        while len(self._buf) - self._i < n:
            if self._eof:
                raise self.fail(f"the file ends inside {what} at byte {self._fetched_to}: it is truncated")
            if self.pos + n > self.max_bytes:
                raise self.fail(f"{what} lies past the first {self.max_bytes >> 20} MiB: header too large")
            want = max(n - (len(self._buf) - self._i), min(MAX_CHUNK, max(FIRST_CHUNK, self._fetched_to)))
            want = min(want, self.max_bytes - self._fetched_to)
            data = self.source.read(self._fetched_to, want)
            if len(data) < want:
                self._eof = True
            self._fetched_to += len(data)
            self._buf = self._buf[self._i :] + data
            self._buf_start += self._i
            self._i = 0

    def take(self, n: int, what: str) -> bytes:
        """The next `n` bytes."""
        self._fill(n, what)
        start = self._i
        self._i += n
        return self._buf[start : self._i]

    def skip(self, n: int, what: str) -> None:
        """Step over `n` bytes (they are still fetched, but not kept)."""
        while n > 0:
            step = min(n, MAX_CHUNK)
            self._fill(step, what)
            self._i += step
            n -= step

    def unpack(self, fmt: struct.Struct, what: str) -> tuple:
        """The next value(s) in `fmt`."""
        self._fill(fmt.size, what)
        values = fmt.unpack_from(self._buf, self._i)
        self._i += fmt.size
        return values

    def u8(self, what: str) -> int:
        return self.unpack(_U8, what)[0]

    def u32(self, what: str) -> int:
        return self.unpack(_U32, what)[0]

    def u64(self, what: str) -> int:
        return self.unpack(_U64, what)[0]

    def check_count(self, count: int, min_record: int, what: str) -> None:
        """Refuse a count whose records could not fit in the bytes that remain."""
        room = self.remaining()
        if count * min_record > room:
            raise self.fail(
                f"{what} count {count} is absurd: it needs at least {count * min_record} bytes "
                f"but only {room} remain: the file is truncated or corrupt"
            )

    def skip_strings(self, count: int, what: str) -> None:
        """Step over `count` GGUF strings (u64 length + bytes), checking every length."""
        for _ in range(count):
            if len(self._buf) - self._i < 8:
                self._fill(8, what)
            n = _U64.unpack_from(self._buf, self._i)[0]
            self._i += 8
            if len(self._buf) - self._i < n:
                self._fill(n, f"a string of length {n} in {what}")
            self._i += n

    def string(self, what: str, strict: bool = True) -> str:
        """The next GGUF string; invalid UTF-8 is an error when `strict`, else replaced."""
        n = self.u64(f"the length of {what}")
        raw = self.take(n, f"{what} (length {n})")
        try:
            return raw.decode("utf-8", errors="strict" if strict else "replace")
        except UnicodeDecodeError as exc:
            raise self.fail(f"{what} is not valid UTF-8 (byte {exc.start}: {raw[exc.start:exc.start + 4]!r})") from None
