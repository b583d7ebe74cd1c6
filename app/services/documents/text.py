"""Text told from binary, and decoded.

A file that should hold text (a .txt, a .log, source code, Markdown, CSV, HTML) is sniffed on its first
64 KB: a NUL byte means binary (no text encoding Tailor reads puts one there, except UTF-16, which is
recognised by its byte-order mark first); so does a share of invalid UTF-8 sequences above 2 %. Below that,
the few bad bytes (a Latin-1 "é" in a UTF-8 log) are replaced and counted in a warning rather than
refusing a whole file for them.
"""

from __future__ import annotations

import codecs
from typing import BinaryIO

from app.services.documents.errors import NotText
from app.services.documents.limits import MAX_INVALID_UTF8_SHARE, SNIFF_BYTES

_READ_BLOCK = 1 << 20
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def sniff_encoding(name: str, head: bytes) -> str:
    """The codec to read a file whose first bytes are `head`; NotText if they are binary."""
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return codec
    if b"\x00" in head:
        raise NotText(name, "holds binary data (NUL bytes), not text; it was not indexed")
    # Cut at the last complete line so a multi-byte character split by the sniff's end is not counted.
    cut = head.rfind(b"\n")
    sample = head if cut < 0 or len(head) < SNIFF_BYTES else head[: cut + 1]
    invalid = sample.decode("utf-8", errors="replace").count("\ufffd")
    if sample and invalid / len(sample) > MAX_INVALID_UTF8_SHARE:
        raise NotText(name, f"holds binary data ({invalid / len(sample):.0%} of its first bytes are not "
                            f"UTF-8; text is read up to {MAX_INVALID_UTF8_SHARE:.0%}), not text")
    return "utf-8"


def read_text(name: str, file: BinaryIO, max_chars: int) -> tuple[str, list[str]]:
    """The text of an open file, at most `max_chars` characters, with warnings (bytes replaced, cut short).

    Read in blocks through an incremental decoder, so a file is never held twice as bytes and text.

    Raises:
        NotText: the file's first bytes are binary.
    """
    head = file.read(SNIFF_BYTES)
    codec = sniff_encoding(name, head)
    decoder = codecs.getincrementaldecoder(codec)(errors="replace")
    parts: list[str] = []
    size = 0
    warnings: list[str] = []
    block = head
    while block:
        part = decoder.decode(block)
        parts.append(part)
        size += len(part)
        if size > max_chars:
            warnings.append(f"only the first {max_chars:,} characters were read (MAX_TEXT_CHARS)")
            break
        block = file.read(_READ_BLOCK)
    else:
        parts.append(decoder.decode(b"", final=True))
    text = "".join(parts)[:max_chars]
    replaced = text.count("\ufffd")
    if replaced:
        what = "1 byte" if replaced == 1 else f"{replaced:,} bytes"
        warnings.insert(0, f"{what} not valid {codec.upper().removesuffix('-SIG')} replaced by \ufffd")
    return text.replace("\r\n", "\n").replace("\r", "\n"), warnings
