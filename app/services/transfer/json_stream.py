"""Reading a large JSON file a piece at a time: a pull parser over its objects and arrays.

An import walks the file's structure (the top-level array, a chat's object, its messages) with
`items()` and `elements()`, and decodes each small value whole with `value()` (json's C decoder,
`raw_decode`, over a buffer that slides along the file in chunks of 256 KiB). So memory holds about
one chunk and the value being read, never the file. The chunk is small against a large chat because
a chunk, its decoded text and the buffer it joins are all in memory for a moment while a chat is
being read (with 1 MiB chunks the bench's peak was 1.6 times the largest chat, with 256 KiB 1.1).
A value cut by the end of the buffer is decoded again once more text is read (at least as much again
as it already has, so a large value costs a few tries, not one per chunk). Damage is a StreamError
with the byte offset where it was found. No Qt here.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import BinaryIO

CHUNK_BYTES = 1 << 18
_SPACE = re.compile(r"[ \t\n\r]*")
_NUMBER_TAIL = re.compile(r"[0-9.eE+-]*\Z")
# A decoding error this close to the end of the buffer may only mean the text goes on in the next
# chunk ("tru|e", "1.|5", "\\u00|e9", a delimiter not read yet); further back it is real.
_NEAR_END = 12


class StreamError(ValueError):
    """The file is damaged: `reason` (e.g. "ends early", "invalid JSON (Expecting ',' delimiter)") at `offset`."""

    def __init__(self, reason: str, offset: int):
        super().__init__(f"{reason} at byte {offset:,}")
        self.reason, self.offset = reason, offset


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


class JsonStream:
    """One JSON text read from `file` (binary, UTF-8) from byte `start` on, a chunk at a time.

    Each call leaves the stream just after what it read. `items()` and `elements()` hand the
    caller each member in turn; the caller reads it (`value()`, `skip()`, or walks into it) before
    asking for the next.
    """

    def __init__(self, file: BinaryIO, start: int = 0, chunk_bytes: int = CHUNK_BYTES):
        self._file, self._chunk = file, chunk_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._json = json.JSONDecoder()
        self._buf, self._pos = "", 0
        self._base = start  # the byte offset of self._buf[0]
        self._read = start  # bytes read from the file so far
        self._eof = False
        self._damage_ahead: StreamError | None = None  # bytes further on that are not UTF-8
        self._at_start = start == 0  # where a byte-order mark may be

    @property
    def offset(self) -> int:
        """The byte offset in the file of what is read next."""
        if self._buf.isascii():
            return self._base + self._pos
        return self._base + _utf8_len(self._buf[: self._pos])

    # ------------------------------------------------------------ reading

    def peek(self) -> str:
        """The next character that is not white space ('' at the end of the file)."""
        while True:
            self._pos = _SPACE.match(self._buf, self._pos).end()
            if self._pos < len(self._buf) or not self._fill():
                return self._buf[self._pos] if self._pos < len(self._buf) else ""

    def value(self) -> object:
        """Decode the whole value that starts here."""
        if self.peek() == "":
            raise StreamError("the file ends early", self.offset)
        while True:
            try:
                found, end = self._json.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError as exc:
                if self._may_go_on(exc) and self._fill(len(self._buf) - self._pos):
                    continue
                raise self._damage(exc) from None
            except RecursionError:
                raise StreamError("nested too deeply", self.offset) from None
            # A number followed only by what could still be a number ("2.", "1e-") may go on in the next chunk.
            if _is_number(found) and _NUMBER_TAIL.match(self._buf, end) and self._fill():
                continue
            self._pos = end
            return found

    def skip(self) -> None:
        """Read past the value that starts here without keeping it (a large array a member at a time)."""
        first = self.peek()
        try:
            if first == "{":
                for _ in self.items():
                    self.skip()
            elif first == "[":
                for _ in self.elements():
                    self.skip()
            else:
                self.value()
        except RecursionError:
            raise StreamError("nested too deeply", self.offset) from None

    def expect_end(self) -> None:
        """Check that nothing but white space follows."""
        if self.peek() != "":
            raise StreamError("text after the end of the JSON", self.offset)

    def items(self) -> Iterator[str]:
        """The keys of the object that starts here, each with the stream at its value."""
        self._expect("{", "Expecting '{'")
        if self.peek() == "}":
            self._pos += 1
            return
        while True:
            if self.peek() != '"':
                self._fail("Expecting property name enclosed in double quotes")
            key = self.value()
            self._expect(":", "Expecting ':' delimiter")
            yield key
            if not self._after_member("}"):
                return

    def elements(self) -> Iterator[int]:
        """The indexes of the array that starts here, each with the stream at its element."""
        self._expect("[", "Expecting '['")
        if self.peek() == "]":
            self._pos += 1
            return
        index = 0
        while True:
            yield index
            if not self._after_member("]"):
                return
            index += 1

    # ------------------------------------------------------------ inside

    def _after_member(self, close: str) -> bool:
        """Read the ',' after a member (True: another follows) or the `close` (False)."""
        found = self.peek()
        if found not in (",", close):
            self._fail("Expecting ',' delimiter")
        self._pos += 1
        return found == ","

    def _expect(self, char: str, what: str) -> None:
        if self.peek() != char:
            self._fail(what)
        self._pos += 1

    def _fail(self, what: str) -> None:
        if self.peek() == "":
            raise StreamError("the file ends early", self.offset)
        raise StreamError(f"invalid JSON ({what})", self.offset)

    def _may_go_on(self, exc: json.JSONDecodeError) -> bool:
        return exc.msg.startswith("Unterminated string") or exc.pos >= len(self._buf) - _NEAR_END

    def _damage(self, exc: json.JSONDecodeError) -> StreamError:
        if exc.msg.startswith("Unterminated string") or exc.pos >= len(self._buf.rstrip()):  # cut off
            return StreamError("the file ends early", self._read)
        return StreamError(f"invalid JSON ({exc.msg})", self._byte_at(exc.pos))

    def _byte_at(self, pos: int) -> int:
        return self._base + _utf8_len(self._buf[:pos])

    def _fill(self, at_least: int = 0) -> bool:
        """Read the next chunk (at least `at_least` bytes) onto the buffer, dropping what was read;
        False at the end of the file."""
        if self._damage_ahead is not None:
            raise self._damage_ahead
        if self._eof:
            return False
        data = self._file.read(max(self._chunk, at_least))
        text = self._decode(data)
        self._read += len(data)
        self._eof = not data
        if self._at_start and text:
            self._at_start = False
            if text.startswith("\ufeff"):  # a byte-order mark some editors write: not part of the JSON
                text, self._base = text[1:], self._base + 3
        if self._pos:
            self._base = self._byte_at(self._pos)
            buf = self._buf[self._pos:]
        else:
            buf = self._buf
        # With the only reference here, `+=` can grow the string in place instead of copying it.
        self._buf = ""
        buf += text
        self._buf, self._pos = buf, 0
        return bool(data) or bool(text)

    def _decode(self, data: bytes) -> str:
        """The text of the next chunk. Bytes that are not UTF-8 are damage where they are: the text before
        them is read first (the chats before them are imported), the error comes when the reader gets there."""
        held = self._decoder.getstate()[0]  # the start of a character the last chunk cut in two
        try:
            return self._decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            self._damage_ahead = StreamError("not UTF-8 text", self._read - len(held) + exc.start)
            return (held + data)[: exc.start].decode("utf-8")
