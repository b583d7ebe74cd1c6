"""The pixels a projector takes, from bytes whose header `sniff` has read and the limits have passed.

One format's reader is used, the one the magic bytes named (Pillow's plugin class, not `Image.open`, which
would try every format it knows and apply its own process-wide bomb limit): a JPEG is never read as
anything else. Then: the first frame only (GIF, animated WebP, APNG); transparency composited on white (a
projector has no alpha, and a transparent background would come out black); the EXIF orientation applied
(a phone photo comes out the way up it was shot); scaled down, keeping the aspect, to the longest side
allowed; packed as RGB, 3 bytes a pixel, rows top to bottom: what mtmd's bitmaps take.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from PIL import (
    BmpImagePlugin,
    GifImagePlugin,
    Image,
    ImageFile,
    JpegImagePlugin,
    PngImagePlugin,
    WebPImagePlugin,
)

from app.services.media.errors import ImageRefused
from app.services.media.limits import ImageLimits, scaled_size
from app.services.media.sniff import BMP, GIF, JPEG, PNG, WEBP, ImageHeader

# Bump when a change here changes the pixels an image gives (PreparedImage.cache_key carries it, so a KV
# cache kept on disk is never reused for the pixels of an older decoding).
DECODE_VERSION = 1

_READERS: dict[str, type[ImageFile.ImageFile]] = {
    PNG: PngImagePlugin.PngImageFile,
    JPEG: JpegImagePlugin.JpegImageFile,
    WEBP: WebPImagePlugin.WebPImageFile,
    GIF: GifImagePlugin.GifImageFile,
    BMP: BmpImagePlugin.BmpImageFile,
}

_WHITE = (255, 255, 255)
_ORIENTATION_TAG = 0x0112
# EXIF orientation (2-8) to the transpose that shows the image the right way up (as ImageOps.exif_transpose).
_UPRIGHT = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
_SIXTEEN_BIT = ("I", "I;16", "I;16L", "I;16B", "I;16N")


@dataclass(frozen=True, slots=True)
class Pixels:
    """An image as RGB bytes (width × height × 3), upright, and its full size upright before scaling."""

    width: int
    height: int
    rgb: bytes
    full_width: int
    full_height: int


def decode_pixels(data: bytes, header: ImageHeader, name: str, limits: ImageLimits) -> Pixels:
    """Decode `data` (whose header passed the limits) to upright RGB on white, scaled to `limits.max_side`.

    Raises:
        ImageRefused: the bytes do not decode (damaged or truncated), or the reader finds more pixels
            than the header said and the limit allows.
    """
    if header.format == WEBP and not getattr(WebPImagePlugin, "SUPPORTED", True):
        raise ImageRefused(name, "is a WebP image, and this Pillow was built without WebP (install Pillow's wheel)")
    try:
        with _READERS[header.format](io.BytesIO(data)) as image:
            width, height = image.size
            if width * height > limits.max_pixels:  # the reader's own reading of the header (a GIF's frame)
                raise ImageRefused(name, too_many_pixels(width, height, limits.max_pixels))
            return _to_rgb(image, limits.max_side)
    except ImageRefused:
        raise
    except MemoryError:
        raise ImageRefused(name, f"is {header.width} × {header.height} pixels, more than the memory free "
                                 "now can decode") from None
    except Exception as exc:  # noqa: BLE001 (hostile bytes: Pillow raises OSError, SyntaxError, ValueError,
        # EOFError, struct.error, zlib.error, IndexError...; each is one refusal)
        raise ImageRefused(name, f"is damaged or truncated ({_detail(exc)})") from None


def too_many_pixels(width: int, height: int, max_pixels: int) -> str:
    """The problem of an image over the pixel limit, in words."""
    return (f"is {width} × {height} pixels ({width * height / 1e6:,.0f} megapixels); "
            f"Tailor takes images of up to {max_pixels / 1e6:,.0f} megapixels")


def _to_rgb(image: ImageFile.ImageFile, max_side: int) -> Pixels:
    width, height = image.size
    target = scaled_size(width, height, max_side)
    if target != (width, height) and isinstance(image, JpegImagePlugin.JpegImageFile):
        image.draft(None, target)  # libjpeg decodes at 1/2, 1/4 or 1/8 where that still covers the target
    image.load()
    orientation = _orientation(image)
    flat = _on_white(image)
    if flat.size != target:  # bicubic, as the projectors' own resizing (clip.cpp, SigLIP's processors);
        # Lanczos took twice as long (a 4000 × 3000 photo: 0.26 s against 0.12) for nothing a projector sees
        flat = flat.resize(target, Image.Resampling.BICUBIC, reducing_gap=3.0)
    if orientation in _UPRIGHT:
        flat = flat.transpose(_UPRIGHT[orientation])
    turned = orientation in (5, 6, 7, 8)
    full_width, full_height = (height, width) if turned else (width, height)
    return Pixels(flat.width, flat.height, flat.tobytes(), full_width, full_height)


def _orientation(image: Image.Image) -> int:
    """The EXIF orientation (1-8), 1 where there is none or it cannot be read (it never refuses an image)."""
    try:
        value = image.getexif().get(_ORIENTATION_TAG, 1)
    except Exception:  # noqa: BLE001 (a damaged EXIF block leaves the image as stored)
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def _on_white(image: Image.Image) -> Image.Image:
    """The image as RGB, any transparency composited on white."""
    if image.mode in _SIXTEEN_BIT:  # 16-bit grey: scaled to 8 bits (a plain convert would clip at 255)
        image = image.convert("I").point(lambda v: v * (1 / 257)).convert("L")
    if image.mode in ("LA", "La", "PA", "RGBa") or (
            "transparency" in image.info and image.mode in ("1", "L", "P", "RGB")):
        image = image.convert("RGBA")
    if image.mode == "RGBA":
        white = Image.new("RGB", image.size, _WHITE)
        white.paste(image, mask=image.getchannel("A"))
        return white
    return image if image.mode == "RGB" else image.convert("RGB")


def _detail(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return text or type(exc).__name__
