"""Taking media in: a path (the CLI's --image and --audio, the window's attach, drop and paste) or bytes (the
server's `data:` URLs and `input_audio`, a pasted image, the store) become a PreparedImage or a PreparedAudio
(or a CheckedAudio: a clip checked by its header, decoded later), or one line saying why not.

A path is read through files.py: anything but a regular file is refused by its stat before any open, and its
size is checked before it is read. The bytes' format is found by their magic bytes, never their name. An
image's size comes from its header, and one with too many pixels is refused before anything decodes it; an
audio clip's layout and length come from its WAV header, and one too long (or whose header promises more
than the file holds) is refused before any sample is converted.

Audio is sent at the rate the model's projector hears (`sample_rate`: ProjectorInfo.audio_sample_rate of its
file before a load, ModelInfo.audio_sample_rate after), so the engine never resamples and the PCM it gets is
what libmtmd takes; the file's own rate and channels are converted here (wav.py, resample.py).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from app.services.media.decode import DECODE_VERSION, decode_pixels, too_many_pixels
from app.services.media.errors import AudioRefused, ImageRefused
from app.services.media.files import FileProblem, read_media_file, too_large
from app.services.media.limits import DEFAULT_AUDIO_LIMITS, DEFAULT_LIMITS, AudioLimits, ImageLimits
from app.services.media.resample import resample
from app.services.media.sniff import (
    AUDIO_SUFFIXES,
    SUFFIXES,
    audio_name,
    detect_audio_format,
    detect_format,
    read_header,
)
from app.services.media.store import MediaStore
from app.services.media.wav import WavHeader, convert_hint, decode_mono, read_wav_header
from engine.protocol import Media

# Bump when a change to wav.py or resample.py changes the samples a file gives (PreparedAudio.cache_key
# carries it, so a KV cache kept on disk is never reused for the samples of an older decoding).
AUDIO_DECODE_VERSION = 1


@dataclass(frozen=True, slots=True)
class PreparedImage:
    """An image ready for a projector, with the file it came from.

    Attributes:
        name: the file's name (or the name given with the bytes), for messages and the transcript.
        sha256: hex digest of the original bytes: the store's key, and the image's identity in caches.
        format: PNG, JPEG, WEBP, GIF or BMP, as the magic bytes say.
        width, height: the size of `rgb`: upright, scaled down to the longest side allowed.
        full_width, full_height: the image's own size, upright (what a viewer shows at 100 %).
        rgb: width × height × 3 bytes, rows top to bottom, on white: what mtmd_bitmap_init takes.
        original: the file's bytes as they came (what the store keeps and an export writes).
    """

    name: str
    sha256: str
    format: str
    width: int
    height: int
    full_width: int
    full_height: int
    rgb: bytes = field(repr=False)
    original: bytes = field(repr=False)

    @property
    def suffix(self) -> str:
        """The suffix of its stored file (".png", ".jpg", ".webp", ".gif", ".bmp")."""
        return SUFFIXES[self.format]

    @property
    def scaled(self) -> bool:
        """Whether `rgb` is smaller than the image (its longest side was over the limit)."""
        return (self.width, self.height) != (self.full_width, self.full_height)

    @property
    def cache_key(self) -> str:
        """What identifies these pixels in a KV cache (an mtmd bitmap's id): the same file, decoded the
        same way to the same size, gives the same key."""
        return f"{self.sha256}:{self.width}x{self.height}:v{DECODE_VERSION}"

    def as_media(self) -> Media:
        """What the engine takes: the pixels, and an id (hex, as libmtmd's bitmap ids are) of `cache_key`."""
        return Media("image", hashlib.sha256(self.cache_key.encode()).hexdigest(), self.rgb, self.width, self.height)


def read_image(path: str | os.PathLike[str], *, name: str | None = None,
               limits: ImageLimits = DEFAULT_LIMITS) -> PreparedImage:
    """Read, check and decode the image file at `path`.

    Args:
        name: what messages call it; the file's name by default.

    Raises:
        ImageRefused: one line naming the file and the reason.
    """
    path = Path(path)
    name = name or path.name or str(path)
    return image_from_bytes(read_image_file(path, name=name, max_bytes=limits.max_bytes),
                            name=name, limits=limits)


def image_from_bytes(data: bytes, *, name: str = "image", limits: ImageLimits = DEFAULT_LIMITS) -> PreparedImage:
    """Check and decode an image given as bytes (`name` is what messages call it).

    Raises:
        ImageRefused: one line naming it and the reason.
    """
    if len(data) > limits.max_bytes:
        raise ImageRefused(name, too_large(len(data), limits.max_bytes, "image"))
    header = read_header(data, name)
    if header.pixels > limits.max_pixels:
        raise ImageRefused(name, too_many_pixels(header.width, header.height, limits.max_pixels))
    pixels = decode_pixels(data, header, name, limits)
    return PreparedImage(
        name=name,
        sha256=hashlib.sha256(data).hexdigest(),
        format=header.format,
        width=pixels.width,
        height=pixels.height,
        full_width=pixels.full_width,
        full_height=pixels.full_height,
        rgb=pixels.rgb,
        original=data,
    )


def stored_image(store: MediaStore, sha256: str, *, name: str | None = None,
                 limits: ImageLimits = DEFAULT_LIMITS) -> PreparedImage:
    """The image the store keeps under `sha256`, its hash verified, decoded again.

    Raises:
        MediaMissing, MediaDamaged: as MediaStore.read.
        ImageRefused: the stored bytes are no image this intake takes (stored by an older Tailor with
            other limits, say).
    """
    data = store.read(sha256)
    return image_from_bytes(data, name=name or f"image {sha256[:12]}", limits=limits)


def read_image_file(path: Path, *, name: str, max_bytes: int) -> bytes:
    """The bytes of the regular file at `path`, at most `max_bytes` of them; never blocks on a FIFO.

    Raises:
        ImageRefused: missing, unreadable, not a regular file (told by its stat, before any open), or
            larger than `max_bytes`.
    """
    try:
        return read_media_file(path, max_bytes=max_bytes, kind="image")
    except FileProblem as exc:
        raise ImageRefused(name, exc.problem) from None


# ---------------------------------------------------------------- audio


@dataclass(frozen=True, slots=True)
class PreparedAudio:
    """A clip of audio ready for a projector, with the file it came from.

    Attributes:
        name: the file's name (or the name given with the bytes), for messages and the transcript.
        sha256: hex digest of the original bytes: the store's key.
        format: "WAV", as the magic bytes say.
        sample_rate: samples a second of `pcm`: the rate the projector hears.
        source_rate: the file's own rate.
        channels: the file's channels (mixed into one in `pcm`).
        pcm: little-endian float32 samples, one channel, in [-1, 1]: what mtmd_bitmap_init_from_audio takes.
        original: the file's bytes as they came (what the store keeps and an export writes).
    """

    name: str
    sha256: str
    format: str
    sample_rate: int
    source_rate: int
    channels: int
    pcm: bytes = field(repr=False)
    original: bytes = field(repr=False)

    @property
    def n_samples(self) -> int:
        return len(self.pcm) // 4

    @property
    def seconds(self) -> float:
        return self.n_samples / self.sample_rate

    @property
    def suffix(self) -> str:
        """The suffix of its stored file (".wav")."""
        return AUDIO_SUFFIXES[self.format]

    @property
    def cache_key(self) -> str:
        """What identifies these samples in a KV cache: the same file, decoded the same way at the same rate,
        gives the same key."""
        return f"{self.sha256}:{self.sample_rate}Hz:v{AUDIO_DECODE_VERSION}"

    def as_media(self) -> Media:
        """What the engine takes: the samples, their rate, and an id (hex, as libmtmd's bitmap ids are) of
        `cache_key`."""
        return Media("audio", hashlib.sha256(self.cache_key.encode()).hexdigest(), self.pcm,
                     sample_rate=self.sample_rate)


def read_audio(path: str | os.PathLike[str], *, sample_rate: int, name: str | None = None,
               limits: AudioLimits = DEFAULT_AUDIO_LIMITS) -> PreparedAudio:
    """Read, check and decode the audio file at `path` to mono float32 at `sample_rate` Hz.

    Args:
        sample_rate: the rate the model's projector hears (ProjectorInfo / ModelInfo .audio_sample_rate).
        name: what messages call it; the file's name by default.

    Raises:
        AudioRefused: one line naming the file and the reason (a compressed format is named, with the
            command that converts it to WAV).
    """
    path = Path(path)
    name = name or path.name or str(path)
    try:
        data = read_media_file(path, max_bytes=limits.max_bytes, kind="audio")
    except FileProblem as exc:
        raise AudioRefused(name, exc.problem) from None
    return audio_from_bytes(data, sample_rate=sample_rate, name=name, limits=limits)


def audio_from_bytes(data: bytes, *, sample_rate: int, name: str = "audio",
                     limits: AudioLimits = DEFAULT_AUDIO_LIMITS) -> PreparedAudio:
    """Check and decode audio given as bytes (a WAV file's) to mono float32 at `sample_rate` Hz.

    Raises:
        AudioRefused: one line naming it and the reason.
        ValueError: `sample_rate` is not above 0 (a caller's mistake, not the file's).
    """
    if sample_rate <= 0:
        raise ValueError(f"a projector's sample rate is above 0, not {sample_rate}")
    fmt, header = _checked_header(data, name, limits)
    try:
        mono = decode_mono(data, header)
        pcm = resample(mono, header.sample_rate, sample_rate)
    except MemoryError:
        raise AudioRefused(name, "is longer than the memory free now can decode") from None
    return PreparedAudio(
        name=name,
        sha256=hashlib.sha256(data).hexdigest(),
        format=fmt,
        sample_rate=sample_rate,
        source_rate=header.sample_rate,
        channels=header.channels,
        pcm=pcm.astype("<f4", copy=False).tobytes(),
        original=data,
    )


@dataclass(frozen=True, slots=True)
class CheckedAudio:
    """A clip whose WAV header was read and checked against the limits (its layout, length and that the file
    holds what the header promises), its samples not decoded: what the window attaches and an import stores.
    A clip is decoded when it is sent, at the rate of the model that hears it (`decoded`, or `stored_audio`
    from the history): decoding and resampling ten minutes of 48 kHz stereo takes seconds.

    Attributes:
        name, sha256, format, original: as PreparedAudio's.
        source_rate: the file's rate.
        channels: the file's channels.
        seconds: its length.
    """

    name: str
    sha256: str
    format: str
    source_rate: int
    channels: int
    seconds: float
    original: bytes = field(repr=False)

    @property
    def suffix(self) -> str:
        """The suffix of its stored file (".wav")."""
        return AUDIO_SUFFIXES[self.format]

    def decoded(self, sample_rate: int, limits: AudioLimits = DEFAULT_AUDIO_LIMITS) -> PreparedAudio:
        """The clip decoded to mono float32 at `sample_rate` Hz (AudioRefused only where it runs out of memory)."""
        return audio_from_bytes(self.original, sample_rate=sample_rate, name=self.name, limits=limits)


def checked_audio(data: bytes, *, name: str = "audio", limits: AudioLimits = DEFAULT_AUDIO_LIMITS) -> CheckedAudio:
    """Check audio given as bytes (a WAV file's) by its header, without decoding its samples.

    Raises:
        AudioRefused: one line naming it and the reason, as audio_from_bytes says it.
    """
    fmt, header = _checked_header(data, name, limits)
    return CheckedAudio(name=name, sha256=hashlib.sha256(data).hexdigest(), format=fmt, source_rate=header.sample_rate,
                        channels=header.channels, seconds=header.seconds, original=data)


def read_checked_audio(path: str | os.PathLike[str], *, name: str | None = None,
                       limits: AudioLimits = DEFAULT_AUDIO_LIMITS) -> CheckedAudio:
    """Read the audio file at `path` and check it by its header (see `checked_audio`).

    Raises:
        AudioRefused: one line naming the file and the reason.
    """
    path = Path(path)
    name = name or path.name or str(path)
    try:
        data = read_media_file(path, max_bytes=limits.max_bytes, kind="audio")
    except FileProblem as exc:
        raise AudioRefused(name, exc.problem) from None
    return checked_audio(data, name=name, limits=limits)


def _checked_header(data: bytes, name: str, limits: AudioLimits) -> tuple[str, WavHeader]:
    """The format and WAV header of `data`, checked (size, magic bytes, layout, length)."""
    if len(data) > limits.max_bytes:
        raise AudioRefused(name, too_large(len(data), limits.max_bytes, "audio"))
    if not data:
        raise AudioRefused(name, "is empty")
    fmt = detect_audio_format(data)
    if fmt is None:
        raise AudioRefused(name, _not_wav(data, name))
    return fmt, read_wav_header(data, name, limits)


def stored_audio(store: MediaStore, sha256: str, *, sample_rate: int, name: str | None = None,
                 limits: AudioLimits = DEFAULT_AUDIO_LIMITS) -> PreparedAudio:
    """The clip the store keeps under `sha256`, its hash verified, decoded again at `sample_rate` Hz.

    Raises:
        MediaMissing, MediaDamaged: as MediaStore.read.
        AudioRefused: the stored bytes are no clip this intake takes (stored with other limits, say).
    """
    data = store.read(sha256)
    return audio_from_bytes(data, sample_rate=sample_rate, name=name or f"audio {sha256[:12]}", limits=limits)


def is_audio(data: bytes) -> bool:
    """Whether `data` starts as an audio file does (WAV, or a compressed format Tailor names): where a drop
    or a paste of unknown bytes should go."""
    return audio_name(data[:64]) is not None


def _not_wav(data: bytes, name: str) -> str:
    """The problem of bytes that are not WAV, naming what they are where known."""
    what = audio_name(data[:64])
    if what is not None:
        return f"is {what}: Tailor reads WAV audio; {convert_hint(name)}"
    image = detect_format(data[:16])
    if image is not None:
        return f"is {'an' if image[0] in 'AEIOU' else 'a'} {image} image, not audio"
    return "is not a WAV file (it does not start with RIFF…WAVE), nor any audio Tailor knows"
