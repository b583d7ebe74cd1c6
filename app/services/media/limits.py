"""What an image may be to be sent: its file's bytes, its pixels, the longest side a projector gets, and how
many go with one message; and what an audio clip may be: its file's bytes, its length, its channels and
sample rate, and how many go with one message. Each limit is one named constant here; a caller may pass
other `ImageLimits` or `AudioLimits`."""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass

from app.services.media.errors import TooManyClips, TooManyImages

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


# The longest clip taken, in seconds. A Whisper-style projector turns every 30 s into a window of tokens
# (Qwen2-Audio: 750), so ten minutes is already some 15,000 tokens, more than most contexts hold beside a
# conversation; and ten minutes at 16 kHz is 38 MB of float samples sent to the engine with every turn.
MAX_AUDIO_SECONDS = 600.0

# The shortest clip taken: less than a tenth of a second holds no word, and libmtmd aborts on a clip of
# one sample (mtmd.cpp asserts more than one), so nothing that short is sent.
MIN_AUDIO_SECONDS = 0.1

# The largest audio file taken, in bytes, checked on the file's size before it is read: ten minutes of
# 48 kHz stereo in 32-bit float is 230 MB (24-bit: 173 MB); a 16 kHz mono 16-bit recording of ten minutes
# is 19 MB. Decoding holds the file, its samples as mono float32 at the file's rate and the resampled clip.
MAX_AUDIO_FILE_BYTES = 250_000_000

# Channels and sample rates a WAV may have. 32 channels covers every speaker layout WAVE_FORMAT_EXTENSIBLE
# names and third-order ambisonics; 4 kHz to 192 kHz every rate a recorder writes. Outside them a header
# is far more likely damaged than real.
MAX_AUDIO_CHANNELS = 32
MIN_SAMPLE_RATE = 4_000
MAX_SAMPLE_RATE = 192_000

# The most audio clips one message carries: four clips of ten minutes are already 150 MB of samples a turn.
MAX_CLIPS_PER_MESSAGE = 4

# What a stored file may be: the largest an image or a clip may be (the store reads nothing larger back).
MAX_STORED_BYTES = max(MAX_FILE_BYTES, MAX_AUDIO_FILE_BYTES)


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


@dataclass(frozen=True, slots=True)
class AudioLimits:
    """The limits one audio intake call applies (the module's constants unless a caller passes others)."""

    max_bytes: int = MAX_AUDIO_FILE_BYTES
    max_seconds: float = MAX_AUDIO_SECONDS
    min_seconds: float = MIN_AUDIO_SECONDS
    max_channels: int = MAX_AUDIO_CHANNELS
    min_rate: int = MIN_SAMPLE_RATE
    max_rate: int = MAX_SAMPLE_RATE


DEFAULT_AUDIO_LIMITS = AudioLimits()


def check_clip_count(clips: Sized, limit: int = MAX_CLIPS_PER_MESSAGE) -> None:
    """Refuse a message that carries more than `limit` audio clips (paths, bytes or PreparedAudio).

    Raises:
        TooManyClips: one line naming the count and the limit.
    """
    if len(clips) > limit:
        raise TooManyClips(len(clips), limit)
