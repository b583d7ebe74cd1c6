"""Audio that is refused (issue 33's bad input): each in one line naming the file and the reason, at once, and
without reading (a 2 GB file), opening (a FIFO, a device) or converting (a header promising hours) what must
not be."""

from __future__ import annotations

import os
import struct
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from app.services.media import files, intake
from app.services.media.errors import AudioRefused
from app.services.media.intake import audio_from_bytes, checked_audio, is_audio, read_audio
from app.services.media.limits import MAX_AUDIO_FILE_BYTES, AudioLimits
from tests.app.services.media.sounds import EXTENSIBLE, float_wav, fmt_chunk, pcm_wav, riff, tone

RATE = 16_000


def _refusal(path: Path, **kwargs) -> str:
    with pytest.raises(AudioRefused) as caught:
        read_audio(path, sample_rate=RATE, **kwargs)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{caught.value.name} ")
    return message


def _refused_bytes(data: bytes, name: str = "clip.wav", **kwargs) -> str:
    with pytest.raises(AudioRefused) as caught:
        audio_from_bytes(data, sample_rate=RATE, name=name, **kwargs)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{name} ")
    return message


@pytest.fixture
def never_converted(monkeypatch: pytest.MonkeyPatch) -> None:
    def decode(*args, **kwargs):
        raise AssertionError("converted")
    monkeypatch.setattr(intake, "decode_mono", decode)


@pytest.fixture
def never_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    def open_file(*args, **kwargs):
        raise AssertionError("opened")
    monkeypatch.setattr(files, "open_regular_file", open_file)


def test_a_truncated_wav_says_how_much_it_promised_and_holds(tmp_path: Path, never_converted):
    whole = pcm_wav(tone(2.0, RATE), RATE, 16)
    path = tmp_path / "cut.wav"
    path.write_bytes(whole[: len(whole) // 2])
    assert _refusal(path) == ("cut.wav is truncated: its header says 32,000 frames (2.0 s), "
                              "the file holds 15,989 (1.00 s)")


def test_a_header_claiming_2_to_the_31_frames_is_refused_at_once(tmp_path: Path, never_converted):
    fmt = fmt_chunk(0x0001, 1, 8_000, 8)  # 8-bit mono: a byte a frame
    data = b"RIFF" + struct.pack("<I", 0xFFFFFFF0) + b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    data += b"data" + struct.pack("<I", 2**31) + bytes(100)
    path = tmp_path / "huge.wav"
    path.write_bytes(data)
    started = time.perf_counter()
    message = _refusal(path)
    assert time.perf_counter() - started < 0.1
    assert message == "huge.wav is truncated: its header says 2,147,483,648 frames (74 h 33 min), the file holds 100 (0.01 s)"


@pytest.mark.parametrize(("fmt", "expected"), [
    (fmt_chunk(0x0001, 0, RATE, 16), "is damaged: its header says 0 channels"),
    (fmt_chunk(0x0001, 40, RATE, 16), "has 40 channels; Tailor takes up to 32"),
    (fmt_chunk(0x0001, 1, 0, 16), "is damaged: its header says a sample rate of 0 Hz"),
    (fmt_chunk(0x0001, 1, 1_000_000, 16), "has a sample rate of 1,000,000 Hz; Tailor takes 4,000 to 192,000 Hz"),
    (fmt_chunk(0x0001, 1, 2_000, 16), "has a sample rate of 2,000 Hz"),
    (fmt_chunk(0x0001, 1, RATE, 12), "is a WAV file of 12-bit integer samples: Tailor reads WAV of 8 to 32-bit"),
    (fmt_chunk(0x0003, 1, RATE, 16), "is a WAV file of 16-bit float samples"),
    (fmt_chunk(0x0006, 1, RATE, 8), "is a WAV file of A-law samples"),
    (fmt_chunk(0x0055, 1, RATE, 0), "is a WAV file of MP3 samples"),
    (fmt_chunk(EXTENSIBLE, 1, RATE, 16, sub_tag=0x0011), "is a WAV file of IMA ADPCM samples"),
    (fmt_chunk(0x0001, 2, RATE, 16)[:12] + struct.pack("<HH", 3, 16), "its header says 3 bytes a frame for 2 channels"),
    (fmt_chunk(0x0001, 1, RATE, 16)[:10], "is damaged: its format chunk has 10 bytes, not at least 16"),
    (fmt_chunk(EXTENSIBLE, 1, RATE, 16)[:30], "is damaged: its extensible format chunk is cut short"),
])
def test_a_format_chunk_outside_what_is_read_is_named(fmt: bytes, expected: str, never_converted):
    message = _refused_bytes(riff((b"fmt ", fmt), (b"data", bytes(RATE * 2))))
    assert expected in message
    if "samples:" in expected:
        assert "ffmpeg -i clip.wav -c:a pcm_s16le clip-pcm.wav" in message  # the command that converts it


@pytest.mark.parametrize(("data", "expected"), [
    (b"", "is empty"),
    (b"RIFF\x00\x00", "is not a WAV file"),
    (b"RIFF\x04\x00\x00\x00WAVE", "is truncated: it ends before its format chunk"),
    (riff((b"fmt ", fmt_chunk(0x0001, 1, RATE, 16))), "is truncated: it ends before its samples (no data chunk)"),
    (riff((b"data", bytes(100)), (b"fmt ", fmt_chunk(0x0001, 1, RATE, 16))),
     "is damaged: its samples come before its format chunk"),
    (riff((b"fmt ", fmt_chunk(0x0001, 1, RATE, 16)), (b"data", b"")), "holds no samples"),
    (riff((b"fmt ", fmt_chunk(0x0001, 1, RATE, 16)), (b"data", bytes(1000))),
     "is 0.03 s long; Tailor takes clips of 0.1 s or more"),
    (riff(*[(b"JUNK", b"")] * 1100), "is damaged: more than 1024 chunks before its samples"),
    (riff((b"fmt ", fmt_chunk(0x0001, 1, RATE, 16)), riff_type=b"AVI "), "is not a WAV file"),
])
def test_a_damaged_or_empty_wav_is_one_line(data: bytes, expected: str):
    message = _refused_bytes(data)
    assert expected in message
    with pytest.raises(AudioRefused) as caught:  # checked by its header alone, it is refused alike
        checked_audio(data, name="clip.wav")
    assert str(caught.value) == message


def test_a_clip_longer_than_ten_minutes_is_refused_by_its_header(never_converted):
    data = riff((b"fmt ", fmt_chunk(0x0001, 1, 4_000, 8)), (b"data", bytes(4_000 * 601)))
    assert _refused_bytes(data) == "clip.wav is 10 min 1 s long; Tailor takes clips of up to 10 min"
    with pytest.raises(AudioRefused, match="10 min 1 s long"):
        checked_audio(data, name="clip.wav")
    limits = AudioLimits(max_seconds=30.0)
    assert "Tailor takes clips of up to 30.0 s" in _refused_bytes(pcm_wav(tone(31.0, RATE), RATE, 8), limits=limits)


@pytest.mark.parametrize(("head", "what"), [
    (b"ID3\x04\x00\x00\x00\x00\x00\x00", "an MP3 audio file"),
    (b"\xff\xfb\x90\x64" + bytes(8), "an MP3 audio file"),
    (b"\xff\xf1\x50\x80" + bytes(8), "an AAC audio file"),
    (b"fLaC\x00\x00\x00\x22" + bytes(8), "a FLAC audio file"),
    (b"OggS\x00\x02" + bytes(22) + b"\x01\x13OpusHead", "an Ogg Opus audio file"),
    (b"OggS\x00\x02" + bytes(22) + b"\x01\x1e\x01vorbis", "an Ogg (Vorbis) audio file"),
    (b"\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00", "an M4A audio file"),
    (b"FORM\x00\x00\x00\x00AIFF", "an AIFF audio file"),
    (b"RIFX\x00\x00\x00\x00WAVE", "a big-endian WAV (RIFX) file"),
    (b"\x1a\x45\xdf\xa3" + bytes(8), "a WebM or Matroska file"),
])
def test_compressed_audio_is_named_with_the_command_that_converts_it(head: str, what: str, tmp_path: Path):
    path = tmp_path / "my talk.mp3"
    path.write_bytes(head + bytes(64))
    assert _refusal(path) == (f"my talk.mp3 is {what}: Tailor reads WAV audio; convert it first "
                              "(ffmpeg -i 'my talk.mp3' 'my talk.wav')")
    assert is_audio(path.read_bytes())


def test_random_bytes_named_wav_and_an_image_given_as_audio_are_named(tmp_path: Path):
    noise = tmp_path / "noise.wav"
    noise.write_bytes(np.random.default_rng(7).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    assert _refusal(noise) == ("noise.wav is not a WAV file (it does not start with RIFF…WAVE), "
                               "nor any audio Tailor knows")
    assert not is_audio(noise.read_bytes())
    picture = tmp_path / "photo.wav"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    assert _refusal(picture) == "photo.wav is a PNG image, not audio"


def test_a_2_gb_file_is_refused_by_its_size_before_it_is_opened(tmp_path: Path, never_opened):
    path = tmp_path / "huge.wav"
    with path.open("wb") as out:  # sparse: 2 GB on paper, nothing on disk
        out.truncate(2 * 1024**3)
    started = time.perf_counter()
    message = _refusal(path)
    assert time.perf_counter() - started < 0.1
    assert message == "huge.wav is 2.1 GB; Tailor takes audio files of up to 250.0 MB"
    assert MAX_AUDIO_FILE_BYTES == 250_000_000
    with pytest.raises(AudioRefused, match="is 2.0 KB; Tailor takes audio files of up to 1.0 KB"):
        audio_from_bytes(bytes(2_000), sample_rate=RATE, limits=AudioLimits(max_bytes=1_000))


@pytest.mark.skipif(sys.platform == "win32", reason="no FIFOs or /dev/zero")
def test_a_fifo_a_device_and_a_folder_are_refused_by_their_stat_without_blocking(tmp_path: Path):
    fifo = tmp_path / "pipe.wav"
    os.mkfifo(fifo)
    outcome: list[str] = []
    reader = threading.Thread(target=lambda: outcome.append(_refusal(fifo)), daemon=True)
    reader.start()
    reader.join(5)
    assert outcome == ["pipe.wav is a FIFO (named pipe), not an audio file"]  # no writer ever came
    assert _refusal(Path("/dev/zero")) == "zero is a character device, not an audio file"
    assert _refusal(tmp_path) == f"{tmp_path.name} is a folder, not an audio file"
    assert _refusal(tmp_path / "gone.wav") == "gone.wav does not exist"


def test_float_samples_with_a_wrong_block_size_are_refused_not_misread():
    good = float_wav(tone(0.5, RATE), RATE)
    bad = bytearray(good)
    bad[32:34] = struct.pack("<H", 8)  # block_align of a 64-bit sample in a 32-bit file
    assert "is damaged: its header says 8 bytes a frame for 1 channel of 32 bits" in _refused_bytes(bytes(bad))


def test_a_wav_given_as_an_image_is_named_as_audio():
    from app.services.media.errors import ImageRefused
    from app.services.media.intake import image_from_bytes

    with pytest.raises(ImageRefused, match=r"^voice.png is a WAV audio file: Tailor reads PNG, JPEG"):
        image_from_bytes(pcm_wav(tone(0.5, RATE), RATE, 16), name="voice.png")
