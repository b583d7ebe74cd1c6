"""Test images: real files written by Pillow, and hostile headers built by hand (cheaply: no pixels)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from PIL import Image

from app.services.media.intake import PreparedImage

RED = (255, 0, 0)
BLUE = (0, 0, 255)
WHITE = (255, 255, 255)


def red_square(width: int = 64, height: int = 48, side: int = 16) -> Image.Image:
    """A red square in the middle of a white image."""
    image = Image.new("RGB", (width, height), WHITE)
    left, top = (width - side) // 2, (height - side) // 2
    image.paste(RED, (left, top, left + side, top + side))
    return image


def save(image: Image.Image, path: Path, fmt: str, **options) -> Path:
    image.save(path, fmt, **options)
    return path


def pixel(image: PreparedImage, x: int, y: int) -> tuple[int, int, int]:
    """The RGB of the pixel at (x, y) of a prepared image's bytes."""
    assert len(image.rgb) == image.width * image.height * 3
    at = (y * image.width + x) * 3
    return tuple(image.rgb[at:at + 3])  # type: ignore[return-value]


def near(actual: tuple[int, ...], expected: tuple[int, ...], tolerance: int = 0) -> bool:
    return all(abs(a - e) <= tolerance for a, e in zip(actual, expected, strict=True))


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_bomb(width: int = 30_000, height: int = 30_000) -> bytes:
    """A PNG whose header says width × height (RGB, 8 bits) over a tiny IDAT: a few dozen bytes."""
    return (b"\x89PNG\r\n\x1a\n"
            + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + _png_chunk(b"IDAT", zlib.compress(b"\0" * 64))
            + _png_chunk(b"IEND", b""))


def jpeg_bomb(width: int = 30_000, height: int = 30_000) -> bytes:
    """A JPEG start-of-frame saying width × height (one component), with nothing after it."""
    return b"\xff\xd8\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00\xff\xd9"


def gif_bomb(width: int = 30_000, height: int = 30_000, *, screen: int | None = None) -> bytes:
    """A GIF whose logical screen (or, with `screen`, only its first frame) is width × height."""
    screen_w, screen_h = (screen, screen) if screen else (width, height)
    return (b"GIF89a" + struct.pack("<HHBBB", screen_w, screen_h, 0, 0, 0)
            + b"\x2c" + struct.pack("<HHHHB", 0, 0, width, height, 0) + b"\x02\x02\x44\x01\x00\x3b")


def bmp_bomb(width: int = 30_000, height: int = 30_000) -> bytes:
    info = struct.pack("<IiiHHIIiiII", 40, width, -height, 1, 24, 0, 0, 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 14 + len(info), 0, 0, 14 + len(info)) + info


def webp_bomb(width: int = 16_000, height: int = 16_000) -> bytes:
    """An extended WebP (VP8X) whose canvas is width × height, with no frame."""
    body = b"\0\0\0\0" + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    chunk = b"VP8X" + struct.pack("<I", len(body)) + body
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk
