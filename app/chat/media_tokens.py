"""How many context tokens the images and audio clips of a message take, counted before it is sent (the
context guard's).

libmtmd turns each image into a run of embedding tokens whose count depends on the projector and, for
most, on the image's size: `image_tokens` (models/formats/projector_header.py) follows libmtmd's own
preprocessing for the projectors whose count it models (SmolVLM's tiles, Gemma 3's fixed 256...). For the
others (dynamic resolutions such as Qwen2.5-VL's) the count is bounded from above: one token for every
merged patch of the image as the intake sends it (longest side at most MAX_SIDE), which is what such
projectors take before their own pixel budget shrinks it. The guard errs high: it warns early rather than
let a prompt be refused.

A clip becomes one chunk of tokens per 30-second window of the Whisper family's spectrogram (Qwen2-Audio:
750 a window; `audio_tokens`, models/formats/projector_audio.py, follows libmtmd's padding and cutting). For
an encoder whose cutting is not modelled, the count is bounded from above: a window per 30 s and one more,
each at the most tokens a Whisper window gives before any pooling or stacking (1,500). No Qt.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from app.services.media.limits import scaled_size
from models.formats.projector_audio import WINDOW_FRAMES, WINDOW_SECONDS, AudioEncoder, seconds_tokens
from models.formats.projector_header import ProjectorInfo, image_tokens

# The text tokens libmtmd puts around an image chunk (its begin/end markers, an idefics3 tile's
# "<fake_token_around_image><row_1_col_1>"), counted high: a vocabulary without them as special tokens
# (the starter's, under a tiny SmolVLM projector) spells them out in 15 tokens; SmolVLM's own in 2.
MARKER_TOKENS = 16
# An image for a projector whose header gives no patch size (none seen; a file from a future converter).
UNKNOWN_IMAGE_TOKENS = 1024

# A window of a Whisper-family spectrogram, halved by its second convolution and neither pooled nor stacked:
# the most tokens any encoder of that family makes of 30 s (for one whose count is not modelled).
UNKNOWN_WINDOW_TOKENS = WINDOW_FRAMES // 2

ImageTokenCount = Callable[[int, int], int]  # (width, height) of an image → tokens it takes
ClipTokenCount = Callable[[float], int]  # seconds of a clip → tokens it takes


@dataclass(slots=True, frozen=True)
class ProjectorTokens:
    """The image-token count of one projector (see the module docstring)."""

    info: ProjectorInfo

    def __call__(self, width: int, height: int) -> int:
        exact = image_tokens(self.info, width, height)
        if exact is not None:
            return exact.total + MARKER_TOKENS * len(exact.chunks)
        if not self.info.patch_size:
            return UNKNOWN_IMAGE_TOKENS + MARKER_TOKENS
        w, h = scaled_size(width, height)
        side = self.info.patch_size * max(1, self.info.merge)
        return math.ceil(w / side) * math.ceil(h / side) + MARKER_TOKENS


@dataclass(slots=True, frozen=True)
class ClipTokens:
    """The audio-token count of one projector's audio encoder (see the module docstring): a clip's windows and
    the markers around it."""

    encoder: AudioEncoder

    def __call__(self, seconds: float) -> int:
        exact = seconds_tokens(self.encoder, seconds)
        if exact is not None:
            return exact.total + MARKER_TOKENS
        windows = math.ceil(max(seconds, 0.0) / WINDOW_SECONDS) + 1
        return windows * UNKNOWN_WINDOW_TOKENS + MARKER_TOKENS
