"""What a projector's audio encoder takes and gives: its sample rate, and the tokens a clip becomes.

libmtmd does not read an audio encoder's preprocessing from the file: llama.cpp's clip loader sets it per
projector type (tools/mtmd/clip.cpp, `load_hparams`: 16 kHz for every type but MiMo-Audio's 24 kHz; for the
Whisper family a 400-sample FFT, a hop of 160 samples, 30-second windows). Its whisper preprocessor
(mtmd-audio.cpp) pads a clip with 30 s of silence, computes the log-mel spectrogram of it all, and cuts it into
windows of 3000 frames, keeping only whole ones: each is one audio chunk of the prompt. A window becomes as
many tokens as clip.cpp's `clip_n_output_tokens` says for the type: 3000 frames, halved by the second
convolution, then halved again by average pooling (Qwen2-Audio, Voxtral), and/or divided by the frames
stacked into one token (Ultravox, Voxtral).

A file whose values would make llama.cpp abort the process rather than refuse it (a position embedding
shorter than a window, a stack factor of 0, an encoder whose stacking gives another count than the one
libmtmd expects) is refused here by name, before llama.cpp sees it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from models.formats.errors import InvalidModelFile
from models.formats.gguf_header import GgufHeader

# clip.cpp's sample rates; every audio type not named here runs at 16 kHz.
_SAMPLE_RATE = {"mimo_audio": 24_000}
DEFAULT_SAMPLE_RATE = 16_000

# The Whisper family: one encoder graph (models/whisper-enc.cpp), the whisper preprocessor, 30 s windows.
WHISPER_TYPES = frozenset({"ultravox", "qwen2a", "voxtral", "glma", "meralion", "music_flamingo"})
_AVGPOOL = frozenset({"qwen2a", "voxtral", "music_flamingo"})  # frames pooled in pairs after the blocks
_STACKED = frozenset({"ultravox", "voxtral", "meralion"})  # frames stacked by stack_factor
_NEEDS_STACK_FACTOR = frozenset({"ultravox", "voxtral", "meralion", "glma"})  # clip.cpp requires the key

# The whisper preprocessor's constants (clip.cpp sets them for every Whisper type).
WHISPER_N_FFT = 400
WHISPER_HOP = 160
WINDOW_SECONDS = 30
WINDOW_FRAMES = 3000  # mel frames of one window: the encoder graph takes exactly this many
MAX_MEL_BINS = 256  # clip.cpp refuses more


@dataclass(slots=True, frozen=True)
class AudioEncoder:
    """A projector's audio encoder, as libmtmd will run it.

    Attributes:
        projector_type: clip.cpp's name of the audio projector (`qwen2a`, `ultravox`, `voxtral`, ...).
        sample_rate: Samples a second the encoder takes (mtmd_get_audio_sample_rate): mono float PCM at
            this rate is what a clip must be resampled to.
        n_mel: Mel bins of its spectrogram (`clip.audio.num_mel_bins`).
        stack_factor: Frames stacked into one token (`clip.audio.projector.stack_factor`); 1: none.
        window_seconds: Length of one window (one chunk of the prompt) for the Whisper family; None for
            types whose cutting is not modelled here.
        tokens_per_window: Tokens one whole window becomes; None where not modelled.
    """

    projector_type: str
    sample_rate: int
    n_mel: int
    stack_factor: int
    window_seconds: int | None
    tokens_per_window: int | None


@dataclass(slots=True, frozen=True)
class AudioTokens:
    """The tokens a clip becomes: one audio chunk per window, in order.

    The text libmtmd puts around the clip (Qwen2-Audio's "<|audio_bos|>" ... "<|audio_eos|>") comes from the
    text model's vocabulary and is not counted.
    """

    chunks: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.chunks)


def read_audio_encoder(header: GgufHeader, audio_type: str, fail: Callable[[str], InvalidModelFile]) -> AudioEncoder:
    """The audio encoder of a projector whose audio type is `audio_type`; `fail(problem)` makes the error.

    Raises:
        InvalidModelFile: keys llama.cpp requires are missing or out of range, or values it would abort on.
    """
    md = header.metadata
    n_mel = md.get("clip.audio.num_mel_bins")
    if not _is_int(n_mel):
        raise fail("clip.audio.num_mel_bins is missing" if n_mel is None
                   else f"clip.audio.num_mel_bins is {n_mel!r}: it must be a whole number")
    if audio_type in WHISPER_TYPES and not 1 <= n_mel <= MAX_MEL_BINS:
        raise fail(f"clip.audio.num_mel_bins is {n_mel}: llama.cpp takes 1 to {MAX_MEL_BINS}")
    stack = md.get("clip.audio.projector.stack_factor")
    if stack is None and audio_type in _NEEDS_STACK_FACTOR:
        raise fail(f"a {audio_type} projector without clip.audio.projector.stack_factor")
    if stack is not None and (not _is_int(stack) or stack <= 0):
        # 0 makes clip.cpp assert (abort) when it counts the first clip's tokens.
        raise fail(f"clip.audio.projector.stack_factor is {stack!r}: it must be a whole number above 0")
    stack = stack or 1
    window, per_window = None, None
    if audio_type in WHISPER_TYPES:  # other encoders (some without attention at all) are left to clip.cpp
        _check_heads(md, fail)
        _check_whisper_shapes(header, audio_type, stack, fail)
        window, per_window = WINDOW_SECONDS, window_tokens(audio_type, WINDOW_FRAMES, stack)
    return AudioEncoder(audio_type, _SAMPLE_RATE.get(audio_type, DEFAULT_SAMPLE_RATE), n_mel, stack, window,
                        per_window)


def window_tokens(audio_type: str, frames: int, stack_factor: int) -> int:
    """Tokens a window of `frames` mel frames becomes: clip.cpp's clip_n_output_tokens for the Whisper family."""
    n = frames
    if audio_type == "glma":
        return n // 2 // stack_factor + 2  # and its begin and end embeddings
    if audio_type in _STACKED:
        n = -(-n // stack_factor) * stack_factor // stack_factor  # CLIP_ALIGN, then divided
    n //= 2  # the second convolution's stride
    if audio_type in _AVGPOOL:
        n //= 2
    return n


def audio_tokens(encoder: AudioEncoder, n_samples: int) -> AudioTokens | None:
    """The tokens a clip of `n_samples` mono samples at `encoder.sample_rate` becomes, as libmtmd cuts it.

    For a Whisper-family encoder: the 30 s of silence the preprocessor pads it with, then the whole
    3000-frame windows of the spectrogram; a clip of up to 30 s is one window, and every 30 s after it one
    more. None for types whose cutting is not modelled here.
    """
    if n_samples <= 0:
        raise ValueError(f"a clip of {n_samples} samples")
    if encoder.window_seconds is None or encoder.tokens_per_window is None:
        return None
    # mtmd-audio.cpp: at least n_fft/2 + 1 samples (zeros added), 30 s of zeros after, n_fft/2 reflected at
    # each end; frames = (padded - n_fft) // hop + 1, which the reflections cancel to this.
    padded = max(n_samples, WHISPER_N_FFT // 2 + 1) + encoder.sample_rate * encoder.window_seconds
    frames = padded // WHISPER_HOP + 1
    return AudioTokens((encoder.tokens_per_window,) * (frames // WINDOW_FRAMES))


def seconds_tokens(encoder: AudioEncoder, seconds: float) -> AudioTokens | None:
    """audio_tokens for a clip of `seconds` (rounded to whole samples at the encoder's rate)."""
    return audio_tokens(encoder, max(1, round(seconds * encoder.sample_rate)))


# ---------------------------------------------------------------- checks


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_heads(md: dict[str, Any], fail: Callable[[str], InvalidModelFile]) -> None:
    n_embd, heads = md.get("clip.audio.embedding_length"), md.get("clip.audio.attention.head_count")
    for key, value in (("clip.audio.embedding_length", n_embd), ("clip.audio.attention.head_count", heads)):
        if value is None:
            raise fail(f"{key} is missing")
        if not _is_int(value) or value <= 0:
            raise fail(f"{key} is {value!r}: it must be a whole number above 0")
    if "clip.audio.attention.head_dim" not in md and n_embd % heads:
        raise fail(f"clip.audio.embedding_length {n_embd} is not a multiple of "
                   f"clip.audio.attention.head_count {heads}")


def _check_whisper_shapes(header: GgufHeader, audio_type: str, stack: int,
                          fail: Callable[[str], InvalidModelFile]) -> None:
    """Shapes that must meet, where llama.cpp would abort at load (its warm-up encodes one window) instead
    of refusing the file."""
    positions = WINDOW_FRAMES // 2
    pos = next((t for t in header.tensors if t.name == "a.position_embd.weight"), None)
    if pos is None:
        raise fail(f"a {audio_type} projector without its position embedding a.position_embd.weight")
    if len(pos.shape) < 2 or pos.shape[1] < positions:
        rows = pos.shape[1] if len(pos.shape) > 1 else 1
        raise fail(f"a.position_embd.weight has {rows} positions; a {WINDOW_SECONDS}-second window takes {positions}")
    if audio_type in _STACKED:
        # The encoder pads its frames to whole stacks (clip.cpp build_stack), while the count libmtmd checks
        # the output against stacks the mel frames first: where the two differ, clip.cpp aborts on it.
        after_encoder = positions // 2 if audio_type in _AVGPOOL else positions
        built = -(-after_encoder // stack)
        if built != window_tokens(audio_type, WINDOW_FRAMES, stack):
            raise fail(f"a {audio_type} projector stacking {stack} frames gives {built} tokens a window where "
                       f"llama.cpp counts {window_tokens(audio_type, WINDOW_FRAMES, stack)}: this llama.cpp "
                       "would abort on it")
