"""An image part of a tool's result in words ("[image: 640x480 PNG]") until models can see: its size read from
the file's header (PNG, JPEG, GIF, WebP, BMP), never by decoding the picture."""

from __future__ import annotations

import base64
import binascii
import struct

# The header of every format named here is near the start; a JPEG's frame header follows its EXIF and ICC
# segments, which stay well under this. A longer image is named by its type and size alone.
HEADER_BYTES = 256 * 1024
NAMES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP", "image/bmp": "BMP"}


def describe_image(mime_type: str, data_b64: str) -> str:
    """The image as the model reads it: its pixel size and format where the header says them."""
    head = _decoded_head(data_b64)
    found = image_size(head) if head else None
    kind = found[2] if found else NAMES.get(mime_type.lower(), mime_type or "unknown type")
    if found:
        return f"[image: {found[0]}x{found[1]} {kind}]"
    return f"[image: {kind}, {b64_size(data_b64):,} bytes]"


def image_size(data: bytes) -> tuple[int, int, str] | None:
    """(width, height, format) from the header of a PNG, GIF, WebP, BMP or JPEG; None for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR" and len(data) >= 24:
        return (*struct.unpack(">II", data[16:24]), "PNG")
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return (*struct.unpack("<HH", data[6:10]), "GIF")
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp(data)
    if data[:2] == b"BM" and len(data) >= 26:
        width, height = struct.unpack("<ii", data[18:26])
        return width, abs(height), "BMP"
    if data[:2] == b"\xff\xd8":
        return _jpeg(data)
    return None


def _webp(data: bytes) -> tuple[int, int, str] | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        return width, int.from_bytes(data[27:30], "little") + 1, "WebP"
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1, "WebP"
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF, "WebP"
    return None


# JPEG's start-of-frame markers (baseline, progressive, lossless…); 0xC4, 0xC8 and 0xCC are other segments.
_FRAMES = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def _jpeg(data: bytes) -> tuple[int, int, str] | None:
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill bytes before a marker
            at += 1
            continue
        length = int.from_bytes(data[at + 2:at + 4], "big")
        if marker in _FRAMES:
            if at + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[at + 5:at + 9])
            return width, height, "JPEG"
        if length < 2:
            return None
        at += 2 + length
    return None


def _decoded_head(data_b64: str) -> bytes:
    text = data_b64[: HEADER_BYTES // 3 * 4]
    try:
        return base64.b64decode(text[: len(text) // 4 * 4], validate=False)
    except (binascii.Error, ValueError):
        return b""


def b64_size(data: str) -> int:
    """The size of base64 `data` once decoded, without decoding it."""
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))
