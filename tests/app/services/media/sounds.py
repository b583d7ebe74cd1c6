"""Test audio: WAV files written by the stdlib's `wave` (integer PCM) and by hand where it writes none (IEEE
float, WAVE_FORMAT_EXTENSIBLE), and RIFF files of any chunks, for hostile headers."""

from __future__ import annotations

import io
import struct
import wave

import numpy as np

PCM, FLOAT, EXTENSIBLE = 0x0001, 0x0003, 0xFFFE
# KSDATAFORMAT_SUBTYPE_PCM / _IEEE_FLOAT: the format tag, then a fixed tail.
_GUID_TAIL = b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
# The metadata a recorder puts before the samples: LIST INFO, the software's name.
LIST_CHUNK = (b"LIST", b"INFOISFT" + struct.pack("<I", 6) + b"tailor")


def tone(seconds: float, rate: int, hz: float = 440.0, amplitude: float = 0.5) -> np.ndarray:
    """A sine, as float64 in [-amplitude, amplitude]."""
    t = np.arange(round(seconds * rate)) / rate
    return amplitude * np.sin(2 * np.pi * hz * t)


def pcm_wav(channels: np.ndarray, rate: int, bits: int) -> bytes:
    """Integer PCM through the stdlib's writer; `channels` is (frames, n) or (frames,) float in [-1, 1)."""
    frames = np.atleast_2d(channels.T).T
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(frames.shape[1])
        out.setsampwidth(bits // 8)
        out.setframerate(rate)
        out.writeframes(integer_samples(frames, bits))
    return buffer.getvalue()


def integer_samples(frames: np.ndarray, bits: int) -> bytes:
    """Interleaved little-endian integers of `bits` (8-bit unsigned, as WAV stores it)."""
    full = 2 ** (bits - 1)
    values = np.clip(np.round(frames * full), -full, full - 1).astype(np.int64).reshape(-1)
    if bits == 8:
        return (values + 128).astype(np.uint8).tobytes()
    if bits == 24:
        return b"".join(int(v).to_bytes(3, "little", signed=True) for v in values)
    return values.astype(f"<i{bits // 8}").tobytes()


def fmt_chunk(tag: int, channels: int, rate: int, bits: int, *, sub_tag: int | None = None,
              valid_bits: int | None = None) -> bytes:
    block = channels * bits // 8
    body = struct.pack("<HHIIHH", tag, channels, rate, rate * block, block, bits)
    if tag == EXTENSIBLE:
        body += struct.pack("<HHI", 22, valid_bits or bits, 0) + struct.pack("<H", sub_tag or PCM) + _GUID_TAIL
    return body


def riff(*chunks: tuple[bytes, bytes], riff_type: bytes = b"WAVE") -> bytes:
    """A RIFF file of `chunks` (id, body), each padded to an even length as the format asks."""
    body = b"".join(cid + struct.pack("<I", len(data)) + data + b"\x00" * (len(data) & 1) for cid, data in chunks)
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + riff_type + body


def float_wav(channels: np.ndarray, rate: int, bits: int = 32, *, extensible: bool = False) -> bytes:
    frames = np.atleast_2d(channels.T).T
    data = frames.astype(f"<f{bits // 8}").tobytes()
    tag = EXTENSIBLE if extensible else FLOAT
    return riff((b"fmt ", fmt_chunk(tag, frames.shape[1], rate, bits, sub_tag=FLOAT)), (b"data", data))


def extensible_pcm_wav(channels: np.ndarray, rate: int, bits: int, valid_bits: int) -> bytes:
    """WAVE_FORMAT_EXTENSIBLE integer PCM; `valid_bits` of each `bits` container (24 in 32: left-justified)."""
    frames = np.atleast_2d(channels.T).T
    shifted = np.round(frames * 2 ** (valid_bits - 1)).astype(np.int64) << (bits - valid_bits)
    data = shifted.astype(f"<i{bits // 8}").tobytes()
    fmt = fmt_chunk(EXTENSIBLE, frames.shape[1], rate, bits, sub_tag=PCM, valid_bits=valid_bits)
    return riff((b"fmt ", fmt), (b"data", data))
