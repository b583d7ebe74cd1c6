"""Images that are taken (issue 33): each format decodes to its size and pixels, upright, on white, the
first frame of an animation, scaled down to the longest side allowed."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from PIL import Image

from app.services.media.intake import image_from_bytes, read_image
from app.services.media.limits import MAX_SIDE, ImageLimits, scaled_size
from tests.app.services.media.images import BLUE, RED, WHITE, near, pixel, red_square, save

FORMATS = [
    ("PNG", "PNG", {}, 0),
    ("JPEG", "JPEG", {"quality": 95}, 40),
    ("WEBP", "WEBP", {"lossless": True}, 0),
    ("GIF", "GIF", {}, 0),
    ("BMP", "BMP", {}, 0),
]


@pytest.mark.parametrize(("fmt", "expected", "options", "tolerance"), FORMATS, ids=[f[0] for f in FORMATS])
def test_each_format_decodes_to_its_size_and_pixels(tmp_path: Path, fmt, expected, options, tolerance):
    path = save(red_square(64, 48), tmp_path / f"square.{fmt.lower()}", fmt, **options)
    image = read_image(path)
    assert (image.format, image.width, image.height) == (expected, 64, 48)
    assert (image.full_width, image.full_height) == (64, 48) and not image.scaled
    assert image.name == path.name
    assert image.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert image.original == path.read_bytes()
    assert len(image.rgb) == 64 * 48 * 3
    assert near(pixel(image, 32, 24), RED, tolerance)
    for corner in [(0, 0), (63, 0), (0, 47), (63, 47)]:
        assert near(pixel(image, *corner), WHITE, tolerance)


def test_the_format_comes_from_the_bytes_not_the_name(tmp_path: Path):
    path = save(red_square(), tmp_path / "really-a-jpeg.png", "JPEG")
    image = read_image(path)
    assert image.format == "JPEG" and image.suffix == ".jpg"


def test_bytes_are_taken_like_a_file(tmp_path: Path):
    path = save(red_square(), tmp_path / "square.png", "PNG")
    from_file = read_image(path)
    from_bytes = image_from_bytes(path.read_bytes(), name="pasted image")
    assert from_bytes.name == "pasted image"
    assert (from_bytes.sha256, from_bytes.rgb) == (from_file.sha256, from_file.rgb)


@pytest.mark.parametrize("fmt", ["GIF", "WEBP", "PNG"])
def test_an_animation_gives_its_first_frame(tmp_path: Path, fmt: str):
    frames = [Image.new("RGB", (20, 10), colour) for colour in (RED, BLUE, (0, 255, 0))]
    path = tmp_path / f"animated.{fmt.lower()}"
    frames[0].save(path, fmt, save_all=True, append_images=frames[1:], duration=100, loop=0,
                   **({"lossless": True} if fmt == "WEBP" else {}))
    with Image.open(path) as check:
        assert getattr(check, "n_frames", 1) == 3
    image = read_image(path)
    assert (image.width, image.height) == (20, 10)
    assert {pixel(image, x, y) for x in range(20) for y in range(10)} == {RED}


@pytest.mark.parametrize(("orientation", "top", "bottom"), [(6, RED, BLUE), (8, BLUE, RED)])
def test_a_jpeg_with_an_exif_orientation_comes_out_upright(tmp_path: Path, orientation, top, bottom):
    stored = Image.new("RGB", (60, 40), RED)  # left half red, right half blue, as stored
    stored.paste(BLUE, (30, 0, 60, 40))
    exif = Image.Exif()
    exif[0x0112] = orientation  # 6: turn 90° clockwise to show; 8: 90° anticlockwise
    path = save(stored, tmp_path / "phone.jpg", "JPEG", quality=95, exif=exif.tobytes())
    image = read_image(path)
    assert (image.width, image.height) == (40, 60)
    assert (image.full_width, image.full_height) == (40, 60)
    assert near(pixel(image, 20, 5), top, 40)
    assert near(pixel(image, 20, 54), bottom, 40)


def test_a_turned_photo_is_scaled_to_the_cap_on_its_upright_long_side(tmp_path: Path):
    exif = Image.Exif()
    exif[0x0112] = 6
    path = save(red_square(600, 200, 100), tmp_path / "wide.jpg", "JPEG", exif=exif.tobytes())
    image = read_image(path, limits=ImageLimits(max_side=150))
    assert (image.width, image.height) == (50, 150)
    assert (image.full_width, image.full_height) == (200, 600) and image.scaled
    assert near(pixel(image, 25, 75), RED, 40)


def test_transparency_is_composited_on_white(tmp_path: Path):
    drawing = Image.new("RGBA", (40, 40), (0, 0, 0, 0))  # transparent black
    drawing.paste((255, 0, 0, 255), (10, 10, 20, 20))  # opaque red
    drawing.paste((0, 0, 0, 128), (25, 25, 35, 35))  # half-transparent black
    for fmt in ("PNG", "WEBP"):
        image = read_image(save(drawing, tmp_path / f"alpha.{fmt.lower()}", fmt, lossless=True))
        assert pixel(image, 0, 0) == WHITE and pixel(image, 39, 0) == WHITE
        assert pixel(image, 15, 15) == RED
        assert near(pixel(image, 30, 30), (127, 127, 127), 2)


def test_a_gif_and_a_grey_png_with_a_transparent_colour_come_out_white_there(tmp_path: Path):
    palette = Image.new("P", (10, 10), 1)
    palette.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
    palette.paste(0, (0, 0, 5, 10))  # left half: colour 0, transparent
    gif = read_image(save(palette, tmp_path / "t.gif", "GIF", transparency=0))
    assert pixel(gif, 1, 5) == WHITE and pixel(gif, 8, 5) == RED
    grey = Image.new("L", (10, 10), 0)
    grey.paste(200, (5, 0, 10, 10))
    png = read_image(save(grey, tmp_path / "t.png", "PNG", transparency=0))
    assert pixel(png, 1, 5) == WHITE and pixel(png, 8, 5) == (200, 200, 200)


def test_grey_with_alpha_and_16_bit_grey_come_out_as_their_greys(tmp_path: Path):
    la = Image.new("LA", (4, 4), (100, 255))
    assert pixel(read_image(save(la, tmp_path / "la.png", "PNG")), 1, 1) == (100, 100, 100)
    deep = Image.new("I;16", (4, 4), 65535)
    deep.paste(32896, (0, 0, 2, 4))  # 128 × 257
    image = read_image(save(deep, tmp_path / "deep.png", "PNG"))
    assert pixel(image, 3, 1) == WHITE and pixel(image, 0, 1) == (128, 128, 128)


def test_a_large_image_is_scaled_down_to_the_cap_keeping_its_aspect(tmp_path: Path):
    path = save(red_square(5000, 1000, 400), tmp_path / "banner.png", "PNG")
    image = read_image(path)
    assert (image.width, image.height) == (MAX_SIDE, 410) == scaled_size(5000, 1000)
    assert (image.full_width, image.full_height) == (5000, 1000) and image.scaled
    assert len(image.rgb) == MAX_SIDE * 410 * 3
    assert pixel(image, MAX_SIDE // 2, 205) == RED and pixel(image, 5, 5) == WHITE


def test_a_large_jpeg_is_decoded_at_a_reduced_scale_then_scaled_to_the_cap(tmp_path: Path):
    path = save(red_square(800, 600, 200), tmp_path / "photo.jpg", "JPEG", quality=95)
    image = read_image(path, limits=ImageLimits(max_side=100))
    assert (image.width, image.height) == (100, 75)
    assert near(pixel(image, 50, 37), RED, 40) and near(pixel(image, 3, 3), WHITE, 40)


def test_scaled_size_keeps_the_aspect_and_never_enlarges():
    assert scaled_size(100, 50, 200) == (100, 50)
    assert scaled_size(4000, 3000, 2048) == (2048, 1536)
    assert scaled_size(3000, 4000, 2048) == (1536, 2048)
    assert scaled_size(100_000, 1, 2048) == (2048, 1)


def test_the_cache_key_names_the_bytes_and_the_pixels(tmp_path: Path):
    path = save(red_square(300, 100), tmp_path / "a.png", "PNG")
    full, small = read_image(path), read_image(path, limits=ImageLimits(max_side=150))
    assert full.cache_key.startswith(full.sha256) and full.sha256 == small.sha256
    assert full.cache_key != small.cache_key
    assert "rgb" not in repr(full) and "original" not in repr(full)


@pytest.mark.parametrize("fmt", ["PNG", "WEBP"])
def test_an_exif_orientation_is_applied_in_png_and_webp_too(tmp_path: Path, fmt: str):
    stored = Image.new("RGB", (30, 20), RED)
    stored.paste(BLUE, (15, 0, 30, 20))
    exif = Image.Exif()
    exif[0x0112] = 6
    image = read_image(save(stored, tmp_path / f"turned.{fmt.lower()}", fmt, exif=exif.tobytes(), lossless=True))
    assert (image.width, image.height) == (20, 30)
    assert pixel(image, 10, 2) == RED and pixel(image, 10, 27) == BLUE
