"""An image's format by its magic bytes (never its name) and its size by its header, read by hand; and
whether bytes are audio, the WAV Tailor reads or a compressed format it names and refuses.

Nothing here decodes: the size is known, and a decompression bomb refused, before Pillow sees the bytes
(Pillow's WebP reader, for one, allocates the whole canvas when it opens a file). A format Tailor does not
read is named when it is a common one ("an SVG image", "a HEIC image", "an MP3 audio file"), so the refusal
says what it was; an audio file given as an image (or an image as audio) is named so too.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from app.services.media.errors import ImageRefused

PNG = "PNG"
JPEG = "JPEG"
WEBP = "WEBP"
GIF = "GIF"
BMP = "BMP"

WAV = "WAV"

READABLE = "PNG, JPEG, WebP, GIF and BMP"

# The suffix a stored file of each format gets (the store's names; never used to detect the format).
SUFFIXES = {PNG: ".png", JPEG: ".jpg", WEBP: ".webp", GIF: ".gif", BMP: ".bmp"}
AUDIO_SUFFIXES = {WAV: ".wav"}
# Documents' originals, kept as they were attached (issue 36): by the kind they were read as, code and plain text
# alike as text (DOCUMENT_FORMATS: the extractor's kind → the stored format).
DOCUMENT_SUFFIXES = {"PDF": ".pdf", "DOCX": ".docx", "MD": ".md", "HTML": ".html", "CSV": ".csv", "TXT": ".txt"}
DOCUMENT_FORMATS = {"pdf": "PDF", "docx": "DOCX", "markdown": "MD", "html": "HTML", "csv": "CSV", "text": "TXT",
                    "code": "TXT"}
# The suffixes of audio files, WAV or a compressed format: where a window sends a dropped or chosen file (to the
# audio intake, which reads WAV and names the others with the command that converts them). Only a hint of
# where to look: the bytes decide what a file is.
AUDIO_FILE_SUFFIXES = frozenset({".wav", ".wave", ".mp3", ".flac", ".ogg", ".oga", ".opus", ".m4a", ".aac",
                                 ".aif", ".aiff", ".amr", ".wma", ".weba", ".mka"})

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers, which carry the size: C0-CF but DHT (C4), JPG (C8) and DAC (CC).
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Markers that stand alone, without a length: TEM, RST0-7, SOI.
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD9)})

# ISO media ("ftyp" box) brands, for naming what is refused.
_HEIC_BRANDS = {b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis", b"hevm", b"hevs"}
_HEIF_BRANDS = {b"mif1", b"msf1"}
_AVIF_BRANDS = {b"avif", b"avis"}
_M4A_BRANDS = {b"M4A ", b"M4B ", b"M4P ", b"F4A ", b"F4B "}


class _Truncated(Exception):
    """The bytes end inside the header."""


@dataclass(frozen=True, slots=True)
class ImageHeader:
    """What an image's header says: its format (PNG, JPEG, WEBP, GIF or BMP) and size, before orientation."""

    format: str
    width: int
    height: int

    @property
    def pixels(self) -> int:
        return self.width * self.height


def detect_format(data: bytes) -> str | None:
    """PNG, JPEG, WEBP, GIF or BMP by the magic bytes at the start of `data`; None for anything else."""
    if data.startswith(_PNG_SIGNATURE):
        return PNG
    if data.startswith(b"\xff\xd8\xff"):
        return JPEG
    if data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return WEBP
    if data.startswith((b"GIF87a", b"GIF89a")):
        return GIF
    if data.startswith(b"BM"):
        return BMP
    return None


def foreign_format(data: bytes) -> str | None:
    """What `data` is, in words ("an SVG image"), when it is a known format Tailor does not read as an image;
    else None."""
    if (audio := audio_name(data)) is not None:
        return audio
    if data.startswith((b"II*\x00", b"MM\x00*")):
        return "a TIFF image"
    if data.startswith(b"%PDF-"):
        return "a PDF document"
    if data[4:8] == b"ftyp":
        brand = data[8:12]
        if brand in _HEIC_BRANDS:
            return "a HEIC image"
        if brand in _HEIF_BRANDS:
            return "a HEIF image"
        if brand in _AVIF_BRANDS:
            return "an AVIF image"
        return "a video (MP4 or QuickTime)"
    if data.startswith((b"\xff\x0a", b"\x00\x00\x00\x0cJXL \r\n\x87\n")):
        return "a JPEG XL image"
    if data.startswith((b"\x00\x00\x00\x0cjP  \r\n\x87\n", b"\xff\x4f\xff\x51")):
        return "a JPEG 2000 image"
    if data.startswith(b"8BPS"):
        return "a Photoshop document"
    if data.startswith(b"qoif"):
        return "a QOI image"
    if _is_svg(data[:4096]):
        return "an SVG image"
    return None


def detect_audio_format(data: bytes) -> str | None:
    """WAV by its magic bytes (RIFF, then WAVE); None for anything else."""
    return WAV if data.startswith(b"RIFF") and data[8:12] == b"WAVE" else None


def audio_name(data: bytes) -> str | None:
    """What `data` is, in words ("an MP3 audio file"), when it is a known audio format; else None.

    The compressed formats are told apart as llama.cpp's own helper tells audio from images (mtmd-helper.cpp:
    "ID3" or an MPEG frame sync, "fLaC"), with the containers most recorders and phones write besides.
    """
    if detect_audio_format(data):
        return "a WAV audio file"
    if data.startswith(b"RIFX") and data[8:12] == b"WAVE":
        return "a big-endian WAV (RIFX) file"
    if data.startswith((b"RF64", b"BW64")) and data[8:12] == b"WAVE":
        return "an RF64 WAV file"
    if data.startswith(b"fLaC"):
        return "a FLAC audio file"
    if data.startswith(b"OggS"):
        return "an Ogg Opus audio file" if b"OpusHead" in data[:64] else "an Ogg (Vorbis) audio file"
    if data.startswith(b"FORM") and data[8:12] in (b"AIFF", b"AIFC"):
        return "an AIFF audio file"
    if data.startswith(b"#!AMR"):
        return "an AMR audio file"
    if data[4:8] == b"ftyp" and data[8:12] in _M4A_BRANDS:
        return "an M4A audio file"
    if data.startswith(b"\x1a\x45\xdf\xa3"):
        return "a WebM or Matroska file"
    if data.startswith(b"ID3"):
        return "an MP3 audio file"
    if len(data) >= 2 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0:
        # An MPEG audio frame sync: layer bits 00 are AAC's ADTS header, the others MPEG audio (MP3, MP2).
        return "an AAC audio file" if data[1] & 0x06 == 0 else "an MP3 audio file"
    return None


def _is_svg(head: bytes) -> bool:
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip().lower()
    if text.startswith(b"<svg"):
        return True
    return text.startswith((b"<?xml", b"<!--", b"<!doctype")) and b"<svg" in text


def read_header(data: bytes, name: str) -> ImageHeader:
    """The format and size of the image in `data`, from its header alone.

    Raises:
        ImageRefused: empty, a format Tailor does not read (named when known), or a header that is cut
            short or makes no sense.
    """
    if not data:
        raise ImageRefused(name, "is empty")
    fmt = detect_format(data)
    if fmt is None:
        what = foreign_format(data) or "not an image Tailor knows"
        raise ImageRefused(name, f"is {what}: Tailor reads {READABLE}")
    try:
        width, height = _SIZE_READERS[fmt](data)
    except _Truncated:
        raise ImageRefused(name, f"is truncated: its {_label(fmt)} header is cut short") from None
    except (ValueError, struct.error) as exc:
        raise ImageRefused(name, f"is damaged: its {_label(fmt)} header {exc}") from None
    if width <= 0 or height <= 0:
        raise ImageRefused(name, f"is damaged: its {_label(fmt)} header says {width} × {height} pixels")
    return ImageHeader(fmt, width, height)


def _label(fmt: str) -> str:
    return "WebP" if fmt == WEBP else fmt


def _unpack(fmt: str, data: bytes, offset: int) -> tuple[int, ...]:
    if offset + struct.calcsize(fmt) > len(data):
        raise _Truncated
    return struct.unpack_from(fmt, data, offset)


def _png_size(data: bytes) -> tuple[int, int]:
    length, kind, width, height = _unpack(">I4sII", data, 8)
    if kind != b"IHDR" or length != 13:
        raise ValueError("does not start with IHDR")
    return width, height


def _gif_size(data: bytes) -> tuple[int, int]:
    """The logical screen, widened to the first frame where that frame reaches past it (as Pillow does)."""
    width, height, packed = _unpack("<HHB", data, 6)
    pos = 13
    if packed & 0x80:  # a global colour table follows
        pos += 3 << ((packed & 7) + 1)
    while True:
        (block,) = _unpack("B", data, pos)
        if block == 0x21:  # an extension: its label, then sub-blocks up to an empty one
            pos += 2
            while True:
                (size,) = _unpack("B", data, pos)
                pos += 1 + size
                if size == 0:
                    break
        elif block == 0x2C:  # the first image descriptor
            left, top, frame_width, frame_height = _unpack("<HHHH", data, pos + 1)
            return max(width, left + frame_width), max(height, top + frame_height)
        elif block == 0x3B:
            raise ValueError("ends before its first frame")
        else:
            raise ValueError(f"has an unknown block 0x{block:02x} before its first frame")


def _bmp_size(data: bytes) -> tuple[int, int]:
    (header_size,) = _unpack("<I", data, 14)
    if header_size == 12:  # OS/2 1.x: 16-bit sizes
        return _unpack("<HH", data, 18)  # type: ignore[return-value]
    if header_size < 16:
        raise ValueError(f"has an unknown info header of {header_size} bytes")
    width, height = _unpack("<ii", data, 18)
    return width, abs(height)  # a negative height means top-down rows


def _jpeg_size(data: bytes) -> tuple[int, int]:
    pos = 2
    while True:
        if pos >= len(data):
            raise _Truncated
        if data[pos] != 0xFF:  # stray bytes between segments: skipped, as libjpeg and Pillow do
            pos += 1
            continue
        while pos < len(data) and data[pos] == 0xFF:  # fill bytes
            pos += 1
        if pos >= len(data):
            raise _Truncated
        marker = data[pos]
        if marker in _STANDALONE:
            pos += 1
            continue
        if marker in (0xD9, 0xDA):
            raise ValueError("has no frame header before its image data")
        (length,) = _unpack(">H", data, pos + 1)
        if length < 2:
            raise ValueError(f"has a segment of length {length}")
        if marker in _SOF_MARKERS:
            height, width = _unpack(">HH", data, pos + 4)
            if height == 0:
                raise ValueError("leaves the height to a DNL marker, which Tailor does not read")
            return width, height
        pos += 1 + length


def _webp_size(data: bytes) -> tuple[int, int]:
    chunk, _size = _unpack("<4sI", data, 12)
    body = 20
    if chunk == b"VP8 ":  # lossy: a key frame's start code, then 14-bit sizes
        (start,) = _unpack("3s", data, body + 3)
        if start != b"\x9d\x01\x2a":
            raise ValueError("has no VP8 start code")
        width, height = _unpack("<HH", data, body + 6)
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L":  # lossless: a signature byte, then 14-bit sizes less one
        signature, bits = _unpack("<BI", data, body)
        if signature != 0x2F:
            raise ValueError("has no VP8L signature")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":  # extended: the canvas, 24-bit sizes less one
        low_w, high_w, low_h, high_h = _unpack("<HBHB", data, body + 4)
        return (low_w | high_w << 16) + 1, (low_h | high_h << 16) + 1
    raise ValueError(f"starts with an unknown chunk {chunk!r}")


_SIZE_READERS = {PNG: _png_size, JPEG: _jpeg_size, WEBP: _webp_size, GIF: _gif_size, BMP: _bmp_size}
