"""An image in a tool's result is described by its header until models can see: images written by Qt's own
encoders (PNG, JPEG, BMP, WebP lossy and lossless), a GIF by hand, and files that only pretend."""

from __future__ import annotations

import base64

import pytest
from PySide6.QtCore import QBuffer, QByteArray, QIODevice
from PySide6.QtGui import QColor, QImage

from app.mcp.image_size import HEADER_BYTES, describe_image, image_size

# The smallest GIF: header, a 3x2 screen, no colour table, one 1x1 image, the trailer.
GIF = (b"GIF89a\x03\x00\x02\x00\x00\x00\x00" b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")


def encoded(fmt: str, width: int, height: int, quality: int = -1) -> bytes:
    image = QImage(width, height, QImage.Format.Format_RGB32)
    image.fill(QColor("teal"))
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    assert image.save(buffer, fmt, quality)
    return bytes(data)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(("fmt", "quality", "name"), [
    ("PNG", -1, "PNG"), ("JPEG", 90, "JPEG"), ("BMP", -1, "BMP"), ("WEBP", 80, "WebP"), ("WEBP", 100, "WebP")])
def test_an_encoders_image_is_named_with_its_size(fmt: str, quality: int, name: str):
    data = encoded(fmt, 640, 480, quality)
    assert image_size(data) == (640, 480, name)
    assert describe_image(f"image/{fmt.lower()}", b64(data)) == f"[image: 640x480 {name}]"


def test_a_gif_and_a_jpeg_after_a_long_exif_segment():
    assert describe_image("image/gif", b64(GIF)) == "[image: 3x2 GIF]"
    jpeg = encoded("JPEG", 33, 17)
    padded = jpeg[:2] + b"\xff\xe1" + (60_002).to_bytes(2, "big") + bytes(60_000) + jpeg[2:]
    assert image_size(padded) == (33, 17, "JPEG")


def test_what_is_not_an_image_it_says_is_named_by_its_type_and_size():
    assert describe_image("image/png", b64(b"not a png at all")) == "[image: PNG, 16 bytes]"
    assert describe_image("image/png", "%%% not base64 %%%") == "[image: PNG, 13 bytes]"
    assert describe_image("image/x-new", "") == "[image: image/x-new, 0 bytes]"
    # A JPEG whose segments run in a loop or past the end, cut headers: no size, no exception.
    for data in (b"\xff\xd8\xff\xe0\x00\x00", b"\xff\xd8\xff\xe0\xff\xff", b"\xff\xd8\xff\xc0\x00\x11",
                 b"\x89PNG\r\n\x1a\n\x00\x00", b"RIFF\x00\x00\x00\x00WEBPVP8X", b"GIF89a"):
        assert image_size(data) is None, data


def test_a_huge_image_is_read_no_further_than_its_header():
    # 40 MB of base64: only the first HEADER_BYTES are decoded, the size is read from the length.
    data = b64(encoded("PNG", 2, 3)) + "A" * (40 << 20)
    assert describe_image("image/png", data) == "[image: 2x3 PNG]"
    jpeg_late = b"\xff\xd8" + b"\xff\xe1" + (65_535).to_bytes(2, "big") + bytes(65_533)
    late = b64(jpeg_late * (HEADER_BYTES // len(jpeg_late) + 2))
    assert describe_image("image/jpeg", late).startswith("[image: JPEG, ")
