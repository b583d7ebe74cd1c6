"""A WAV file's header read by hand, and its samples as one channel of float32, with the stdlib and numpy.

WAV is what Tailor reads of audio: every recorder and converter writes it, and its samples are plain numbers
after a header of a few dozen bytes, so a hostile file can be checked whole before anything is allocated
for it. Taken: PCM of 8 (unsigned), 16, 24 and 32 bits, IEEE float of 32 and 64 bits, each also inside
WAVE_FORMAT_EXTENSIBLE (whose sub-format GUID names which). The chunks are walked from the RIFF header to
`data`; those between (LIST, fact, bext, JUNK...) are skipped by their sizes. A data chunk whose size says
more than the file holds is a truncated file, refused; one whose size is 0xFFFFFFFF is a WAV written to a
pipe (ffmpeg's, when it cannot seek back), whose data runs to the end of the file.

The channels are averaged into one (a projector takes mono), block by block, so a long file never exists
as float64 or as all its channels at once.
"""

from __future__ import annotations

import shlex
import struct
from dataclasses import dataclass
from pathlib import PurePath
from typing import Literal

import numpy as np

from app.services.media.errors import AudioRefused
from app.services.media.limits import AudioLimits

WAVE_FORMAT_PCM = 0x0001
WAVE_FORMAT_IEEE_FLOAT = 0x0003
WAVE_FORMAT_EXTENSIBLE = 0xFFFE
# The GUID of an extensible sub-format is its format tag, then this fixed tail (KSDATAFORMAT_SUBTYPE_*).
_SUBFORMAT_TAIL = b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
# Format tags that are common in WAV files and not read here, for the refusal to name.
_OTHER_FORMATS = {0x0002: "Microsoft ADPCM", 0x0006: "A-law", 0x0007: "µ-law", 0x0011: "IMA ADPCM",
                  0x0031: "GSM 6.10", 0x0050: "MPEG", 0x0055: "MP3", 0x00FF: "AAC", 0x0161: "WMA"}
_BITS = {"pcm": (8, 16, 24, 32), "float": (32, 64)}
_STREAMED = 0xFFFFFFFF  # a data size never filled in: the data runs to the end of the file
_MAX_CHUNKS = 1024  # chunks walked before `data`; more is a damaged (or hostile) file
_BLOCK_FRAMES = 1 << 18  # frames converted at once: a few MB of float32 whatever the channels


@dataclass(frozen=True, slots=True)
class WavHeader:
    """What a WAV file's header says about its samples.

    Attributes:
        encoding: "pcm" (integers) or "float" (IEEE).
        channels: interleaved channels of each frame.
        sample_rate: frames a second.
        bits: bits of one sample as stored (8, 16, 24, 32 or 64).
        data_offset: where the samples start in the file.
        frames: frames in the data chunk (whole ones).
    """

    encoding: Literal["pcm", "float"]
    channels: int
    sample_rate: int
    bits: int
    data_offset: int
    frames: int

    @property
    def block_align(self) -> int:
        return self.channels * self.bits // 8

    @property
    def seconds(self) -> float:
        return self.frames / self.sample_rate


def read_wav_header(data: bytes, name: str, limits: AudioLimits) -> WavHeader:
    """The samples' layout of the WAV file in `data`, checked against `limits` (channels, rate, length).

    Raises:
        AudioRefused: not a WAV file, cut short, damaged, a sample format not read here, or a clip outside
            the limits; one line each.
    """
    if len(data) < 12:
        raise AudioRefused(name, "is truncated: its WAV header is cut short")
    if not (data.startswith(b"RIFF") and data[8:12] == b"WAVE"):
        raise AudioRefused(name, "is not a WAV file")
    pos, fmt = 12, None
    for _ in range(_MAX_CHUNKS):
        if pos + 8 > len(data):
            raise AudioRefused(name, "is truncated: it ends before its samples (no data chunk)" if fmt
                               else "is truncated: it ends before its format chunk")
        chunk, size = struct.unpack_from("<4sI", data, pos)
        body = pos + 8
        if chunk == b"fmt ":
            if body + size > len(data):
                raise AudioRefused(name, "is truncated: its format chunk is cut short")
            fmt = _read_format(data[body : body + size], name)
        elif chunk == b"data":
            if fmt is None:
                raise AudioRefused(name, "is damaged: its samples come before its format chunk")
            return _header(fmt, body, size, len(data), name, limits)
        pos = body + size + (size & 1)  # chunks are padded to an even length
    raise AudioRefused(name, f"is damaged: more than {_MAX_CHUNKS} chunks before its samples")


@dataclass(frozen=True, slots=True)
class _Format:
    encoding: Literal["pcm", "float"]
    channels: int
    sample_rate: int
    bits: int
    block_align: int


def _read_format(chunk: bytes, name: str) -> _Format:
    if len(chunk) < 16:
        raise AudioRefused(name, f"is damaged: its format chunk has {len(chunk)} bytes, not at least 16")
    tag, channels, rate, _byte_rate, block_align, bits = struct.unpack_from("<HHIIHH", chunk, 0)
    if tag == WAVE_FORMAT_EXTENSIBLE:
        if len(chunk) < 40:
            raise AudioRefused(name, "is damaged: its extensible format chunk is cut short")
        guid = chunk[24:40]
        if guid[2:] != _SUBFORMAT_TAIL:
            raise AudioRefused(name, f"is a WAV file of an unknown sub-format: {_reads(name)}")
        tag = int.from_bytes(guid[:2], "little")
    encoding: Literal["pcm", "float"] | None = {WAVE_FORMAT_PCM: "pcm", WAVE_FORMAT_IEEE_FLOAT: "float"}.get(tag)
    if encoding is None:
        what = _OTHER_FORMATS.get(tag, f"format 0x{tag:04x}")
        raise AudioRefused(name, f"is a WAV file of {what} samples: {_reads(name)}")
    if channels == 0:
        raise AudioRefused(name, "is damaged: its header says 0 channels")
    if rate == 0:
        raise AudioRefused(name, "is damaged: its header says a sample rate of 0 Hz")
    if bits not in _BITS[encoding]:
        raise AudioRefused(name, f"is a WAV file of {bits}-bit {'integer' if encoding == 'pcm' else 'float'} "
                                 f"samples: {_reads(name)}")
    if block_align != channels * bits // 8:
        raise AudioRefused(name, f"is damaged: its header says {block_align} bytes a frame for {channels} "
                                 f"channel{'s' * (channels != 1)} of {bits} bits")
    return _Format(encoding, channels, rate, bits, block_align)


def _header(fmt: _Format, offset: int, size: int, file_size: int, name: str, limits: AudioLimits) -> WavHeader:
    if not 1 <= fmt.channels <= limits.max_channels:
        raise AudioRefused(name, f"has {fmt.channels} channels; Tailor takes up to {limits.max_channels}")
    if not limits.min_rate <= fmt.sample_rate <= limits.max_rate:
        raise AudioRefused(name, f"has a sample rate of {fmt.sample_rate:,} Hz; Tailor takes "
                                 f"{limits.min_rate:,} to {limits.max_rate:,} Hz")
    available = file_size - offset
    if size == _STREAMED:
        size = available
    elif size > available:
        said, held = size // fmt.block_align, available // fmt.block_align
        raise AudioRefused(name, f"is truncated: its header says {said:,} frames "
                                 f"({duration(said / fmt.sample_rate)}), the file holds {held:,} "
                                 f"({duration(held / fmt.sample_rate)})")
    header = WavHeader(fmt.encoding, fmt.channels, fmt.sample_rate, fmt.bits, offset, size // fmt.block_align)
    if header.frames == 0:
        raise AudioRefused(name, "holds no samples")
    if header.seconds > limits.max_seconds:
        raise AudioRefused(name, f"is {duration(header.seconds)} long; Tailor takes clips of up to "
                                 f"{duration(limits.max_seconds)}")
    if header.seconds < limits.min_seconds:
        raise AudioRefused(name, f"is {duration(header.seconds)} long; Tailor takes clips of "
                                 f"{limits.min_seconds:g} s or more")
    return header


def decode_mono(data: bytes, header: WavHeader) -> np.ndarray:
    """The samples of `data` (whose header is `header`) as one channel of float32 in [-1, 1]: the channels'
    mean. Integers are scaled by their full range (16-bit: / 32768); floats that are not finite become 0 and
    the rest are clipped to [-1, 1], so nothing a file holds can overflow the projector's spectrogram."""
    out = np.empty(header.frames, dtype=np.float32)
    for start in range(0, header.frames, _BLOCK_FRAMES):
        count = min(_BLOCK_FRAMES, header.frames - start)
        offset = header.data_offset + start * header.block_align
        block = _samples(data, offset, count * header.channels, header)  # (count × channels) float32
        out[start : start + count] = block.reshape(count, header.channels).mean(axis=1, dtype=np.float32)
    return out


def _samples(data: bytes, offset: int, n: int, header: WavHeader) -> np.ndarray:
    if header.encoding == "float":
        raw = np.frombuffer(data, dtype="<f4" if header.bits == 32 else "<f8", count=n, offset=offset)
        values = np.nan_to_num(raw.astype(np.float32), nan=0.0, posinf=0.0, neginf=0.0)
        return np.clip(values, -1.0, 1.0, out=values)
    if header.bits == 8:  # unsigned, silence at 128
        raw = np.frombuffer(data, dtype=np.uint8, count=n, offset=offset)
        return (raw.astype(np.float32) - 128.0) / 128.0
    if header.bits == 24:  # three bytes, little-endian: shifted into the top of an int32
        raw = np.frombuffer(data, dtype=np.uint8, count=n * 3, offset=offset).reshape(n, 3).astype(np.int32)
        joined = (raw[:, 0] << 8) | (raw[:, 1] << 16) | (raw[:, 2] << 24)
        return joined.astype(np.float32) / 2.0**31
    dtype = "<i2" if header.bits == 16 else "<i4"
    raw = np.frombuffer(data, dtype=dtype, count=n, offset=offset)
    return raw.astype(np.float32) / float(2 ** (header.bits - 1))


def duration(seconds: float) -> str:
    """A length in words: "0.05 s", "4.2 s", "12 min 30 s", "37 h 17 min"."""
    if seconds < 1:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours:,} h {minutes} min" if minutes else f"{hours:,} h"


def clock(seconds: float) -> str:
    """A clip's length as a player shows it: "0:12", "10:00", "1:02:03" (whole seconds, rounded)."""
    minutes, rest = divmod(max(0, round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{rest:02d}" if hours else f"{minutes}:{rest:02d}"


def convert_hint(name: str, *, to_pcm: bool = False) -> str:
    """How to make a WAV Tailor reads of the file `name`, as a command to copy: ffmpeg's defaults write
    16-bit PCM WAV (and keep the rate and channels, which Tailor converts itself)."""
    stem = PurePath(name).stem or "audio"
    target = f"{stem}-pcm.wav" if to_pcm else f"{stem}.wav"
    codec = " -c:a pcm_s16le" if to_pcm else ""
    return f"convert it first (ffmpeg -i {shlex.quote(name)}{codec} {shlex.quote(target)})"


def _reads(name: str) -> str:
    return f"Tailor reads WAV of 8 to 32-bit integer or 32 or 64-bit float samples; {convert_hint(name, to_pcm=True)}"
