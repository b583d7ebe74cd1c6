"""Taking a clip in (issue 33's audio): every WAV sample format decoded, mixed to one channel and resampled to
the projector's rate, ready for the engine as a Media; and kept in the store like an image."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from app.services.media.errors import TooManyClips
from app.services.media.intake import (
    AUDIO_DECODE_VERSION,
    audio_from_bytes,
    checked_audio,
    read_audio,
    read_checked_audio,
    stored_audio,
)
from app.services.media.limits import MAX_CLIPS_PER_MESSAGE, check_clip_count
from app.services.media.resample import resample, resampled_length
from app.services.media.store import MediaStore
from tests.app.services.media.sounds import (
    LIST_CHUNK,
    extensible_pcm_wav,
    float_wav,
    fmt_chunk,
    integer_samples,
    pcm_wav,
    riff,
    tone,
)

RATE = 16_000


def heard(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, dtype="<f4")


@pytest.mark.parametrize(("bits", "tolerance"), [(8, 1 / 64), (16, 1e-4), (24, 1e-6), (32, 1e-6)])
def test_integer_pcm_of_every_width_decodes_to_the_same_samples(bits: int, tolerance: float):
    wave = tone(1.0, RATE)
    clip = audio_from_bytes(pcm_wav(wave, RATE, bits), sample_rate=RATE, name="a.wav")
    assert (clip.format, clip.channels, clip.source_rate, clip.sample_rate) == ("WAV", 1, RATE, RATE)
    assert clip.n_samples == RATE and clip.seconds == 1.0
    assert np.abs(heard(clip.pcm) - wave).max() < tolerance


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("extensible", [False, True])
def test_ieee_float_plain_and_extensible_decodes_as_it_is(bits: int, extensible: bool):
    wave = tone(0.5, RATE)
    clip = audio_from_bytes(float_wav(wave, RATE, bits, extensible=extensible), sample_rate=RATE)
    assert np.abs(heard(clip.pcm) - wave).max() < 1e-7


def test_extensible_pcm_with_24_valid_bits_in_32_decodes_at_full_scale():
    wave = tone(0.5, RATE)
    clip = audio_from_bytes(extensible_pcm_wav(wave, RATE, bits=32, valid_bits=24), sample_rate=RATE)
    assert np.abs(heard(clip.pcm) - wave).max() < 1e-6


def test_channels_are_mixed_into_one():
    left, right = tone(0.5, RATE, 440.0), tone(0.5, RATE, 440.0, amplitude=0.25)
    clip = audio_from_bytes(pcm_wav(np.stack([left, right], axis=1), RATE, 16), sample_rate=RATE)
    assert clip.channels == 2
    assert np.abs(heard(clip.pcm) - (left + right) / 2).max() < 1e-4
    six = np.stack([left] * 3 + [-left] * 3, axis=1)  # a 5.1 file whose channels cancel out
    assert np.abs(heard(audio_from_bytes(pcm_wav(six, RATE, 16), sample_rate=RATE).pcm)).max() < 1e-4


@pytest.mark.parametrize("source", [8_000, 22_050, 44_100, 48_000])
def test_a_file_at_another_rate_is_resampled_to_the_projectors(source: int):
    clip = audio_from_bytes(pcm_wav(tone(2.0, source, 440.0), source, 16), sample_rate=RATE)
    assert (clip.source_rate, clip.sample_rate) == (source, RATE)
    assert clip.n_samples == resampled_length(2 * source, source, RATE) == 2 * RATE
    wanted = tone(2.0, RATE, 440.0)
    assert np.abs(heard(clip.pcm)[400:-400] - wanted[400:-400]).max() < 2e-3  # the edges see the padding


def test_what_lies_above_the_projectors_nyquist_is_filtered_out_not_folded_in():
    high = tone(1.0, 48_000, 12_000.0)  # above 8 kHz: a 16 kHz clip cannot hold it
    clip = audio_from_bytes(float_wav(high, 48_000), sample_rate=RATE)
    assert np.abs(heard(clip.pcm)[400:-400]).max() < 1e-3  # else it would come back as 4 kHz


def test_resampling_keeps_length_in_time_and_a_constant_unchanged():
    ones = np.ones(44_100, dtype=np.float32)
    out = resample(ones, 44_100, RATE)
    assert out.size == RATE and np.abs(out[100:-100] - 1).max() < 1e-5
    assert resample(ones[:10], RATE, RATE).tolist() == ones[:10].tolist()


def test_chunks_before_the_samples_are_skipped_and_a_streamed_wav_runs_to_its_end():
    wave = tone(0.5, RATE)
    data = integer_samples(wave[:, None], 16)
    listed = riff((b"fmt ", fmt_chunk(0x0001, 1, RATE, 16)), LIST_CHUNK, (b"odd ", b"x"), (b"data", data))
    assert np.abs(heard(audio_from_bytes(listed, sample_rate=RATE).pcm) - wave).max() < 1e-4
    # ffmpeg writing to a pipe cannot go back to fill the sizes in: 0xFFFFFFFF, the data to the end
    streamed = bytearray(pcm_wav(wave, RATE, 16))
    streamed[40:44] = b"\xff\xff\xff\xff"
    assert audio_from_bytes(bytes(streamed), sample_rate=RATE).n_samples == wave.size


def test_samples_that_are_not_finite_or_over_full_scale_are_tamed():
    wave = np.array([np.nan, np.inf, -np.inf, 3.0, -3.0, 0.25] * 400)
    clip = audio_from_bytes(float_wav(wave, RATE), sample_rate=RATE)
    assert heard(clip.pcm)[:6].tolist() == [0.0, 0.0, 0.0, 1.0, -1.0, 0.25]


def test_a_prepared_clip_is_what_the_engine_takes(tmp_path: Path):
    data = pcm_wav(tone(1.0, 44_100), 44_100, 16)
    path = tmp_path / "note.wav"
    path.write_bytes(data)
    clip = read_audio(path, sample_rate=RATE)
    assert (clip.name, clip.suffix, clip.sha256) == ("note.wav", ".wav", hashlib.sha256(data).hexdigest())
    assert clip.original == data and clip.cache_key == f"{clip.sha256}:16000Hz:v{AUDIO_DECODE_VERSION}"
    media = clip.as_media()
    assert (media.kind, media.sample_rate, media.data) == ("audio", RATE, clip.pcm)
    assert media.id == hashlib.sha256(clip.cache_key.encode()).hexdigest()
    # the same file for a projector of another rate is other samples, so another id
    assert read_audio(path, sample_rate=24_000).as_media().id != media.id
    assert "pcm=" not in repr(clip) and "original=" not in repr(clip)  # the bytes stay out of logs


def test_a_clip_is_stored_content_addressed_and_decoded_again(tmp_path: Path):
    store = MediaStore(tmp_path / "chats-media")
    clip = audio_from_bytes(pcm_wav(tone(0.5, 22_050), 22_050, 16), sample_rate=RATE, name="voice.wav")
    stored = store.put(clip.original, clip.suffix)
    assert stored.path.name == f"{clip.sha256}.wav" and stored.path.parent.name == clip.sha256[:2]
    again = stored_audio(store, clip.sha256, sample_rate=RATE)
    assert again.pcm == clip.pcm and again.sha256 == clip.sha256
    assert store.hashes() == {clip.sha256}


def test_a_message_carries_a_bounded_number_of_clips():
    check_clip_count([object()] * MAX_CLIPS_PER_MESSAGE)
    with pytest.raises(TooManyClips, match=f"^{MAX_CLIPS_PER_MESSAGE + 1} audio clips in one message"):
        check_clip_count([object()] * (MAX_CLIPS_PER_MESSAGE + 1))


def test_the_projectors_rate_must_be_given():
    with pytest.raises(ValueError, match="above 0"):
        audio_from_bytes(pcm_wav(tone(0.5, RATE), RATE, 16), sample_rate=0)


def test_a_checked_clip_is_read_by_its_header_alone_and_decodes_as_a_prepared_one(tmp_path: Path):
    wave = np.stack([tone(2.5, 44_100), tone(2.5, 44_100, 660.0)], axis=1)
    path = tmp_path / "talk.wav"
    path.write_bytes(pcm_wav(wave, 44_100, 16))
    checked = read_checked_audio(path)
    assert (checked.name, checked.format, checked.source_rate, checked.channels, checked.suffix) == (
        "talk.wav", "WAV", 44_100, 2, ".wav")
    assert checked.seconds == 2.5 and checked.original == path.read_bytes()
    assert checked.sha256 == hashlib.sha256(checked.original).hexdigest()
    prepared = read_audio(path, sample_rate=RATE)
    assert checked.decoded(RATE) == prepared  # the same clip, decoded when it is sent
    assert checked_audio(checked.original, name="pasted").name == "pasted"
