"""Audio projector files read without loading: the rate they hear, the tokens a clip becomes, what is refused.

The counts are checked against what libmtmd really makes of the same files in
tests/engine/gguf/test_audio_projector.py; here, the header alone.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from models.formats.errors import InvalidModelFile
from models.formats.projector_audio import audio_tokens, seconds_tokens, window_tokens
from models.formats.projector_header import read_projector_info
from tests.fixtures.tiny_audio_projector import TinyAudioSpec, write_tiny_audio_projector
from tests.fixtures.tiny_projector import write_tiny_projector


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("audio-projectors")


def _write(folder: Path, name: str, **changes) -> Path:
    return write_tiny_audio_projector(folder / name, dataclasses.replace(TinyAudioSpec(), **changes))


def test_a_tiny_qwen2a_projector_reads_as_clip_cpp_loads_it(folder: Path):
    info = read_projector_info(_write(folder, "mmproj-qwen2a.gguf"))
    assert (info.projector_type, info.has_vision, info.has_audio) == ("qwen2a", False, True)
    assert info.n_embd_out == 576  # mm.a.fc.weight's ne[1], as clip_n_mmproj_embd reads it
    assert info.audio is not None and info.audio_sample_rate == 16_000
    assert (info.audio.n_mel, info.audio.stack_factor, info.audio.window_seconds) == (80, 1, 30)
    # 3000 mel frames a window, halved by the second convolution and again by the average pooling
    assert info.audio.tokens_per_window == 750
    assert info.tokens_per_tile is None and info.image_size is None


def test_a_vision_projector_takes_no_audio(folder: Path):
    info = read_projector_info(write_tiny_projector(folder / "mmproj-vision.gguf"))
    assert info.audio is None and info.audio_sample_rate is None


@pytest.mark.parametrize(("n_samples", "windows"), [
    (1, 1), (160, 1), (16_000 * 5, 1),
    (479_839, 1),  # 5999 frames with the 30 s of padding: one whole window
    (479_840, 2),  # 6000: a second one, nearly all padding, which libmtmd encodes too
    (16_000 * 45, 2), (959_839, 2), (959_840, 3), (16_000 * 600, 21),
])
def test_a_clip_becomes_one_window_of_tokens_per_30_seconds_and_the_padding(folder: Path, n_samples: int,
                                                                            windows: int):
    info = read_projector_info(_write(folder, "mmproj-qwen2a.gguf"))
    tokens = audio_tokens(info.audio, n_samples)
    assert tokens is not None and tokens.chunks == (750,) * windows and tokens.total == 750 * windows


def test_seconds_and_samples_agree(folder: Path):
    audio = read_projector_info(_write(folder, "mmproj-qwen2a.gguf")).audio
    assert seconds_tokens(audio, 5.0) == audio_tokens(audio, 80_000)
    with pytest.raises(ValueError):
        audio_tokens(audio, 0)


def test_window_tokens_follow_clip_cpp_per_type():
    assert window_tokens("qwen2a", 3000, 1) == 750
    assert window_tokens("music_flamingo", 3000, 1) == 750
    assert window_tokens("ultravox", 3000, 3) == 500  # stacked by 3, then halved
    assert window_tokens("voxtral", 3000, 2) == 375  # stacked by 2, halved, pooled
    assert window_tokens("meralion", 3000, 15) == 100
    assert window_tokens("glma", 3000, 4) == 377  # halved, stacked, and its begin and end embeddings


def test_ultravox_and_voxtral_with_stacks_that_meet_are_read(folder: Path):
    ultravox = read_projector_info(_write(folder, "mmproj-ultravox3.gguf", projector_type="ultravox", stack_factor=3))
    assert (ultravox.audio.stack_factor, ultravox.audio.tokens_per_window) == (3, 500)
    voxtral = read_projector_info(_write(folder, "mmproj-voxtral2.gguf", projector_type="voxtral", stack_factor=2))
    assert (voxtral.audio.stack_factor, voxtral.audio.tokens_per_window) == (2, 375)


@pytest.mark.parametrize(("changes", "expected"), [
    ({"n_mel": 300}, "clip.audio.num_mel_bins is 300: llama.cpp takes 1 to 256"),
    ({"n_heads": 3}, "clip.audio.embedding_length 64 is not a multiple of clip.audio.attention.head_count 3"),
    # ggml asserts (aborts) at the first window when the position embedding is shorter than its 1500 frames
    ({"positions": 1000}, "a.position_embd.weight has 1000 positions; a 30-second window takes 1500"),
    ({"projector_type": "ultravox"}, "a ultravox projector without clip.audio.projector.stack_factor"),
    # clip.cpp asserts (aborts) on a stack factor of 0 when it counts a clip's tokens
    ({"projector_type": "ultravox", "stack_factor": 0}, "stack_factor is 0: it must be a whole number above 0"),
    # Ultravox's and Voxtral's real stack factors: the encoder pads 1500 (or 750) frames to 188 stacks
    # where clip.cpp counts 187, and aborts on the first clip (checked in a child process in
    # tests/engine/gguf/test_audio_projector.py)
    ({"projector_type": "ultravox", "stack_factor": 8}, "gives 188 tokens a window where llama.cpp counts 187"),
    ({"projector_type": "voxtral", "stack_factor": 4}, "gives 188 tokens a window where llama.cpp counts 187"),
])
def test_values_llama_cpp_would_refuse_or_abort_on_are_refused_by_name(folder: Path, changes: dict, expected: str):
    path = _write(folder, f"mmproj-bad-{abs(hash(str(changes)))}.gguf", **changes)
    with pytest.raises(InvalidModelFile) as caught:
        read_projector_info(path)
    assert expected in str(caught.value) and path.name in str(caught.value)
