"""The app's WAV decoding (app/services/media/wav.py, resample.py) against an independent one: llama.cpp's own
helper (miniaudio in libmtmd, mtmd_helper_bitmap_init_from_buf), which decodes a WAV to mono at the projector's
rate as llama-server does. Tailor does not use the helper (it would parse untrusted files in the engine, with no
limits: see app/services/media/intake.py); here it is the reference the samples must agree with.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from llama_cpp import mtmd_cpp as mtmd

from app.services.media.intake import audio_from_bytes
from engine.gguf.llama_handle import LlamaHandle, LlamaSettings
from engine.gguf.llama_mtmd import Projector
from tests.app.services.media.sounds import extensible_pcm_wav, float_wav, pcm_wav, tone
from tests.fixtures.tiny_audio_projector import write_tiny_audio_projector

RATE = 16_000


@pytest.fixture(scope="module")
def projector(starter_model: Path, tmp_path_factory: pytest.TempPathFactory):
    llama = LlamaHandle(starter_model, LlamaSettings(n_ctx=512, n_threads=2, n_seq=1), lambda: None)
    path = write_tiny_audio_projector(tmp_path_factory.mktemp("audio") / "mmproj-qwen2a.gguf")
    loaded = Projector(path, llama, use_gpu=False, n_threads=2, warmup=False)
    yield loaded
    loaded.close()
    llama.close()


def miniaudio_samples(projector: Projector, wav: bytes) -> np.ndarray:
    """What llama.cpp's helper makes of a WAV file: mono float32 at the projector's rate."""
    buffer = (ctypes.c_uint8 * len(wav)).from_buffer_copy(wav)
    bitmap = mtmd.mtmd_helper_bitmap_init_from_buf(projector.ptr, buffer, len(wav), False)
    assert bitmap, "llama.cpp's helper could not decode the file"
    try:
        assert mtmd.mtmd_bitmap_is_audio(bitmap)
        n_bytes = mtmd.mtmd_bitmap_get_n_bytes(bitmap)
        data = mtmd.mtmd_bitmap_get_data(bitmap)
        return np.frombuffer(ctypes.string_at(data, n_bytes), dtype="<f4").copy()
    finally:
        mtmd.mtmd_bitmap_free(bitmap)


def stereo(seconds: float, rate: int) -> np.ndarray:
    return np.stack([tone(seconds, rate, 440.0), tone(seconds, rate, 660.0, amplitude=0.25)], axis=1)


def test_8_bit_pcm_gives_llama_cpps_samples_but_for_its_offset_of_half_a_step(projector: Projector):
    """miniaudio maps unsigned 8-bit x to x / 127.5 - 1, which puts silence (128) at +1/255; WAV's silence is
    128, and (x - 128) / 128 keeps it at 0 (as libsndfile and Python's audioop do)."""
    wav = pcm_wav(tone(1.0, RATE), RATE, 8)
    ours = np.frombuffer(audio_from_bytes(wav, sample_rate=RATE).pcm, dtype="<f4")
    theirs = miniaudio_samples(projector, wav)
    assert ours.size == theirs.size == RATE
    assert np.abs(ours - theirs).max() < 1 / 128
    assert ours[0] == 0.0 and theirs[0] == pytest.approx(1 / 255, abs=1e-6)


@pytest.mark.parametrize(("name", "wav"), [
    ("16-bit PCM stereo", pcm_wav(stereo(1.0, RATE), RATE, 16)),
    ("24-bit PCM", pcm_wav(tone(1.0, RATE), RATE, 24)),
    ("32-bit PCM", pcm_wav(tone(1.0, RATE), RATE, 32)),
    ("32-bit float", float_wav(tone(1.0, RATE), RATE, 32)),
    ("extensible 24 in 32 stereo", extensible_pcm_wav(stereo(1.0, RATE), RATE, 32, 24)),
])
def test_a_wav_at_the_projectors_rate_gives_the_samples_llama_cpp_reads(projector: Projector, name: str, wav: bytes):
    ours = np.frombuffer(audio_from_bytes(wav, sample_rate=RATE, name=name).pcm, dtype="<f4")
    theirs = miniaudio_samples(projector, wav)
    assert ours.size == theirs.size == RATE
    assert np.abs(ours - theirs).max() < 1e-4, name


@pytest.mark.parametrize("source", [44_100, 48_000, 22_050, 8_000])
def test_a_wav_at_another_rate_is_resampled_as_llama_cpp_does_but_without_its_delay(projector: Projector,
                                                                                   source: int):
    wav = pcm_wav(stereo(1.0, source), source, 16)
    ours = np.frombuffer(audio_from_bytes(wav, sample_rate=RATE).pcm, dtype="<f4")
    theirs = miniaudio_samples(projector, wav)
    assert abs(ours.size - theirs.size) <= 1
    n = min(ours.size, theirs.size) - 8
    # miniaudio's resampler (linear, then a low-pass) lags by a sample or more; this one is centred (its
    # filter is symmetric: a tone comes out where it went in). Aligned, the two agree to a few thousandths.
    lag = min(range(5), key=lambda k: np.abs(ours[400 : n - 400] - theirs[400 + k : n - 400 + k]).max())
    aligned = ours[400 : n - 400], theirs[400 + lag : n - 400 + lag]
    assert 1 <= lag <= 4
    assert np.abs(aligned[0] - aligned[1]).max() < 0.03
    assert np.corrcoef(*aligned)[0, 1] > 0.998
