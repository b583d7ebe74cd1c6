"""What an image may be to be sent: its file's bytes, its pixels, the longest side a projector gets, and how
many go with one message. Each limit is one named constant here; a caller may pass other `ImageLimits`."""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass

from app.services.media.errors import TooManyImages

# The longest side of what is sent, in pixels: larger images are scaled down, keeping their aspect. The
# projectors resize to their own input anyway (Gemma 3: 896; SmolVLM: 512 tiles over up to 2048 on the
# long edge; Qwen2.5-VL: as many 28-pixel patches as its pixel budget allows), so 2048 keeps every detail
# the tiling ones use, while a 12 MP photo's 36 MB of RGB shrinks to at most 12 MB (2048 × 2048 × 3)
# for the engine and its bitmap cache.
MAX_SIDE = 2048

# The most pixels an image may have, read from its header before anything is decoded: decoding costs 3 to
# 4 bytes a pixel (RGB or RGBA) plus the decoder's own buffers, so this caps the memory one image takes at
# about half a gigabyte. It admits a 108 MP phone photo (12000 × 9000) and an A4 page scanned at 600 dpi
# (35 MP), and refuses a decompression bomb (a 30,000 × 30,000 PNG, 900 MP, would need 2.7 GB or more)
# at once.
MAX_PIXELS = 128_000_000

# The largest image file taken, in bytes: checked on the file's size before it is read, then on what
# was read. A 108 MP JPEG at high quality is about 40 MB; a screenshot PNG a few MB.
MAX_FILE_BYTES = 50_000_000

# The most images one message carries. Each costs the model hundreds to thousands of tokens (Gemma 3:
# 256; SmolVLM: 64 a tile, up to 17 tiles; Qwen2.5-VL: about 5,000 at 2048 × 2048), so 16 already fill
# most contexts (the context guard counts their tokens before sending); more is nearly always a folder
# dropped by mistake. Sixteen 12 MB bitmaps are also about what the engine should hold for one turn.
MAX_IMAGES_PER_MESSAGE = 16


@dataclass(frozen=True, slots=True)
class ImageLimits:
    """The limits one intake call applies (the module's constants unless a caller passes others)."""

    max_bytes: int = MAX_FILE_BYTES
    max_pixels: int = MAX_PIXELS
    max_side: int = MAX_SIDE


DEFAULT_LIMITS = ImageLimits()


def check_image_count(images: Sized, limit: int = MAX_IMAGES_PER_MESSAGE) -> None:
    """Refuse a message that carries more than `limit` images (a list of paths, bytes or PreparedImage).

    Raises:
        TooManyImages: one line naming the count and the limit.
    """
    if len(images) > limit:
        raise TooManyImages(len(images), limit)


def scaled_size(width: int, height: int, max_side: int = MAX_SIDE) -> tuple[int, int]:
    """(width, height) scaled down, keeping the aspect, so the longer side is at most `max_side`; never up.

    The longer side becomes `max_side` exactly; the shorter is rounded, and at least 1.
    """
    longest = max(width, height)
    if longest <= max_side:
        return width, height
    if width >= height:
        return max_side, max(1, round(height * max_side / width))
    return max(1, round(width * max_side / height)), max_side
