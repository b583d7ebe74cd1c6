"""Images that are refused (issue 33's bad input): each in one line naming the file and the reason, at once,
and without decoding (a bomb) or opening (a FIFO) what must not be."""

from __future__ import annotations

import io
import os
import sys
import threading
import time
from pathlib import Path

import pytest
from PIL import Image

from app.services.media import files, intake
from app.services.media.errors import ImageRefused, TooManyImages
from app.services.media.intake import image_from_bytes, read_image
from app.services.media.limits import MAX_FILE_BYTES, MAX_IMAGES_PER_MESSAGE, ImageLimits, check_image_count
from tests.app.services.media.images import (
    bmp_bomb,
    gif_bomb,
    jpeg_bomb,
    png_bomb,
    red_square,
    save,
    webp_bomb,
)

READS = "Tailor reads PNG, JPEG, WebP, GIF and BMP"


def _refusal(path: Path, **kwargs) -> str:
    with pytest.raises(ImageRefused) as caught:
        read_image(path, **kwargs)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(caught.value.name)
    return message


@pytest.fixture
def never_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    def decode(*args, **kwargs):
        raise AssertionError("decoded")
    monkeypatch.setattr(intake, "decode_pixels", decode)


@pytest.fixture
def never_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    def open_file(*args, **kwargs):
        raise AssertionError("opened")
    monkeypatch.setattr(files, "open_regular_file", open_file)


def test_a_30000_square_png_bomb_is_refused_by_its_header_at_once(tmp_path: Path, never_decoded):
    path = tmp_path / "bomb.png"
    path.write_bytes(png_bomb())
    started = time.perf_counter()
    message = _refusal(path)
    assert time.perf_counter() - started < 0.1
    assert message == ("bomb.png is 30000 × 30000 pixels (900 megapixels); "
                       "Tailor takes images of up to 128 megapixels")


@pytest.mark.parametrize("bomb", [jpeg_bomb(), gif_bomb(), gif_bomb(screen=16), bmp_bomb(), webp_bomb()],
                         ids=["jpeg", "gif", "gif-frame-past-its-screen", "bmp", "webp-canvas"])
def test_every_format_s_bomb_is_refused_by_its_header(bomb: bytes, never_decoded):
    started = time.perf_counter()
    with pytest.raises(ImageRefused, match=r"megapixels\); Tailor takes images of up to 128 megapixels$"):
        image_from_bytes(bomb, name="bomb")
    assert time.perf_counter() - started < 0.1


def test_the_pixel_limit_is_per_call(tmp_path: Path):
    path = save(Image.new("RGB", (10, 10)), tmp_path / "ten.png", "PNG")
    assert read_image(path, limits=ImageLimits(max_pixels=100)).width == 10
    tall = save(Image.new("RGB", (10, 11)), tmp_path / "tall.png", "PNG")
    assert _refusal(tall, limits=ImageLimits(max_pixels=100)).startswith("tall.png is 10 × 11 pixels")


def test_a_truncated_or_corrupt_png_is_refused(tmp_path: Path):
    whole = io.BytesIO()
    red_square(200, 200).save(whole, "PNG", compress_level=0)
    data = whole.getvalue()
    cut = tmp_path / "cut.png"
    cut.write_bytes(data[: len(data) // 2])
    assert _refusal(cut).startswith("cut.png is damaged or truncated (")
    header_only = tmp_path / "header.png"
    header_only.write_bytes(data[:20])
    assert _refusal(header_only) == "header.png is truncated: its PNG header is cut short"
    garbled = tmp_path / "garbled.png"
    stream = data.index(b"IDAT") + 4  # the zlib header and the first block's: garbled
    garbled.write_bytes(data[:stream] + bytes(b ^ 0x5A for b in data[stream:stream + 16]) + data[stream + 16:])
    assert _refusal(garbled).startswith("garbled.png is damaged or truncated (")


@pytest.mark.parametrize("fmt", ["JPEG", "GIF", "WEBP", "BMP"])
def test_a_truncated_image_of_each_format_is_refused(tmp_path: Path, fmt: str):
    whole = io.BytesIO()
    red_square(100, 100).save(whole, fmt)
    data = whole.getvalue()
    path = tmp_path / f"cut.{fmt.lower()}"
    path.write_bytes(data[: len(data) * 2 // 3])
    assert " is damaged or truncated (" in _refusal(path)


def test_an_svg_is_named(tmp_path: Path):
    path = tmp_path / "photo.svg"
    path.write_text('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>')
    assert _refusal(path) == f"photo.svg is an SVG image: {READS}"


@pytest.mark.parametrize(("head", "what"), [
    (b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic", "a HEIC image"),
    (b"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00avifmif1", "an AVIF image"),
    (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "a PDF document"),
    (b"\xef\xbb\xbf  <svg width='1'/>", "an SVG image"),
    (b"hello, this is text", "not an image Tailor knows"),
])
def test_other_formats_are_named(tmp_path: Path, head: bytes, what: str):
    path = tmp_path / "picture.png"  # the name says PNG; the bytes decide
    path.write_bytes(head)
    assert _refusal(path) == f"picture.png is {what}: {READS}"


def test_a_tiff_written_by_pillow_is_named(tmp_path: Path):
    path = save(red_square(), tmp_path / "scan.tif", "TIFF")
    assert _refusal(path) == f"scan.tif is a TIFF image: {READS}"


def test_an_empty_file_is_refused(tmp_path: Path):
    path = tmp_path / "empty.png"
    path.touch()
    assert _refusal(path) == "empty.png is empty"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_is_refused_by_its_stat_without_opening_or_blocking(tmp_path: Path, never_opened):
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    link = tmp_path / "link.png"
    link.symlink_to(fifo)
    outcome: list[str] = []

    def attempt() -> None:
        for path in (fifo, link):
            try:
                read_image(path)
            except ImageRefused as exc:
                outcome.append(str(exc))

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "reading a FIFO blocked"
    assert outcome == ["pipe.png is a FIFO (named pipe), not an image file",
                       "link.png is a FIFO (named pipe), not an image file"]


def test_a_folder_and_a_missing_file_are_refused(tmp_path: Path, never_opened):
    folder = tmp_path / "album.png"
    folder.mkdir()
    assert _refusal(folder) == "album.png is a folder, not an image file"
    assert _refusal(tmp_path / "gone.png") == "gone.png does not exist"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/dev/zero")
def test_a_device_is_refused(never_opened):
    assert _refusal(Path("/dev/zero")) == "zero is a character device, not an image file"


def test_a_file_over_the_byte_cap_is_refused_before_it_is_read(tmp_path: Path, never_opened):
    path = tmp_path / "huge.png"
    with open(path, "wb") as f:
        f.truncate(MAX_FILE_BYTES + 10_000_000)  # sparse: nothing written
    assert _refusal(path) == "huge.png is 60.0 MB; Tailor takes image files of up to 50.0 MB"


def test_bytes_over_the_byte_cap_are_refused(never_decoded):
    with pytest.raises(ImageRefused, match="^pasted is 1.5 KB; Tailor takes image files of up to 1.0 KB$"):
        image_from_bytes(b"\x89PNG" + b"\0" * 1496, name="pasted", limits=ImageLimits(max_bytes=1000))


def test_a_message_may_carry_a_limited_number_of_images():
    check_image_count([b""] * MAX_IMAGES_PER_MESSAGE)
    check_image_count([])
    with pytest.raises(TooManyImages) as caught:
        check_image_count(["a.png"] * 100)
    assert (caught.value.count, caught.value.limit) == (100, MAX_IMAGES_PER_MESSAGE)
    assert str(caught.value).startswith(f"100 images in one message; Tailor sends at most {MAX_IMAGES_PER_MESSAGE}")


def test_pillow_s_process_wide_bomb_limit_plays_no_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = save(red_square(), tmp_path / "square.png", "PNG")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 10)  # Image.open would refuse this 64 × 48 image
    assert read_image(path).width == 64
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)  # ... and would take any bomb
    with pytest.raises(ImageRefused, match="900 megapixels"):
        image_from_bytes(png_bomb(), name="bomb.png")


def test_running_out_of_memory_while_decoding_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = save(red_square(), tmp_path / "square.png", "PNG")

    def no_memory(self, *args, **kwargs):
        raise MemoryError

    monkeypatch.setattr("PIL.ImageFile.ImageFile.load", no_memory)
    assert _refusal(path) == "square.png is 64 × 48 pixels, more than the memory free now can decode"
