"""engine/gguf/llama_mtmd.py with audio: the starter model (SmolLM2-135M, 576 wide) and a tiny Qwen2-Audio
projector (tests/fixtures/tiny_audio_projector.py) that llama.cpp's libmtmd really loads and runs.

A clip becomes the chunks the header predicts (models/formats/projector_audio.py), at every window
boundary; its embeddings enter the sequence asked; what libmtmd would abort on is refused first.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from engine.gguf.llama_handle import LlamaHandle, LlamaSettings
from engine.gguf.llama_mtmd import Bitmap, MediaChunk, Projector, ProjectorError, TextChunk, media
from models.formats.errors import InvalidModelFile
from models.formats.projector_audio import audio_tokens
from tests.fixtures.tiny_audio_projector import TinyAudioSpec, write_tiny_audio_projector

CHAT = "<|im_start|>user\nWhat is said here? <__media__>\nAnswer briefly.<|im_end|>\n<|im_start|>assistant\n"
RATE = 16_000


@pytest.fixture(scope="module")
def llama(starter_model: Path):
    handle = LlamaHandle(starter_model, LlamaSettings(n_ctx=2048, n_threads=2, n_seq=2), lambda: None)
    yield handle
    handle.close()


@pytest.fixture(scope="module")
def qwen2a_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_audio_projector(tmp_path_factory.mktemp("audio") / "mmproj-qwen2a.gguf")


@pytest.fixture(scope="module")
def qwen2a(qwen2a_path: Path, llama: LlamaHandle):
    projector = Projector(qwen2a_path, llama, use_gpu=False, n_threads=2)
    yield projector
    projector.close()


def tone(seconds: float, hz: float = 440.0) -> bytes:
    """A sine at `hz`, mono float32 at 16 kHz: what the app's intake sends."""
    t = np.arange(round(seconds * RATE)) / RATE
    return (0.3 * np.sin(2 * np.pi * hz * t)).astype("<f4").tobytes()


def test_llama_cpp_loads_the_tiny_audio_projector_and_says_it_hears_16_khz(qwen2a: Projector):
    assert (qwen2a.supports_audio, qwen2a.supports_vision) == (True, False)
    assert qwen2a.audio_sample_rate == qwen2a.info.audio_sample_rate == RATE  # libmtmd's, and the header's
    assert (qwen2a.n_embd_inp, qwen2a.info.n_embd_out) == (576, 576)


@pytest.mark.parametrize("seconds", [0.1, 5.0, 29.98, 29.99, 45.0, 60.0])
def test_a_clip_becomes_the_chunks_the_header_predicts(qwen2a: Projector, seconds: float):
    pcm = tone(seconds)
    with media(Bitmap.audio(pcm)) as (clip,):
        prompt = qwen2a.tokenize(CHAT, [clip], add_bos=False)
    try:
        clips = [c for c in prompt.chunks if isinstance(c, MediaChunk)]
        predicted = audio_tokens(qwen2a.info.audio, len(pcm) // 4)
        assert [c.n_tokens for c in clips] == list(predicted.chunks)
        assert [c.n_pos for c in clips] == list(predicted.chunks)  # no M-RoPE: a token a position
        assert {c.kind for c in clips} == {"audio"} and {c.id for c in clips} == {clip.id}
        # Qwen2-Audio's "<|audio_bos|>" and "<|audio_eos|>" are text this vocabulary spells out in pieces
        assert prompt.unknown_tokens == 0
        assert isinstance(prompt.chunks[0], TextChunk) and isinstance(prompt.chunks[-1], TextChunk)
    finally:
        prompt.close()


def test_a_clip_enters_the_sequence_asked_and_the_text_after_it_decodes(qwen2a: Projector, llama: LlamaHandle):
    llama.clear()
    with media(Bitmap.audio(tone(5.0))) as (clip,):
        prompt = qwen2a.tokenize(CHAT, [clip], add_bos=False)
    try:
        before, sound, after = (prompt.chunks[0], prompt.chunks[1], prompt.chunks[2])
        assert isinstance(sound, MediaChunk) and sound.n_pos == 750
        started = time.perf_counter()
        n_past = qwen2a.evaluate(prompt, n_past=0, seq_id=1, end=2)
        encoded_s = time.perf_counter() - started
        assert n_past == before.n_pos + 750
        assert llama.seq_pos_max(1) == n_past - 1 and llama.seq_pos_min(1) == 0
        assert llama.seq_pos_max(0) == -1  # the other sequence is untouched
        assert qwen2a.evaluate(prompt, n_past, seq_id=1, first=2) == prompt.n_pos == n_past + after.n_pos
        print(f"a 5 s clip: encoded and decoded in {encoded_s:.2f} s on this machine")
    finally:
        prompt.close()


def test_clips_libmtmd_would_abort_on_are_refused_before_it_sees_them(qwen2a: Projector):
    for samples in (b"", np.zeros(1, dtype="<f4").tobytes()):  # mtmd.cpp asserts more than one sample
        with pytest.raises(ValueError, match="2 samples or more"):
            Bitmap.audio(samples)
    with pytest.raises(ValueError, match="4 bytes each"):
        Bitmap.audio(b"\x00" * 10)
    with (media(Bitmap.image(64, 64, b"\xff" * 64 * 64 * 3)) as (image,),
          pytest.raises(ProjectorError, match="takes no images$")):  # libmtmd would abort
        qwen2a.tokenize("<__media__>", [image], add_bos=False)


def test_an_ultravox_projector_llama_cpp_would_abort_on_is_refused_by_name(tmp_path: Path, llama: LlamaHandle):
    path = write_tiny_audio_projector(tmp_path / "mmproj-ultravox.gguf",
                                      TinyAudioSpec(projector_type="ultravox", stack_factor=8))
    with pytest.raises(InvalidModelFile, match="188 tokens a window where llama.cpp counts 187"):
        Projector(path, llama, use_gpu=False, n_threads=2)


_ABORTS = r"""
import ctypes, sys
import numpy as np
from pathlib import Path
from llama_cpp import mtmd_cpp as mtmd
from engine.gguf.llama_handle import LlamaHandle, LlamaSettings
llama = LlamaHandle(Path(sys.argv[1]), LlamaSettings(n_ctx=2048, n_threads=2, n_seq=1), lambda: None)
params = mtmd.mtmd_context_params_default()
params.use_gpu, params.n_threads, params.warmup = False, 2, True
ctx = mtmd.mtmd_init_from_file(sys.argv[2].encode(), llama.model_pointer, params)  # past the header checks
print("loaded", bool(ctx), flush=True)
pcm = np.zeros(16000, dtype=np.float32)
bitmap = mtmd.mtmd_bitmap_init_from_audio(pcm.size, pcm.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
text = b"<__media__>"
chunks = mtmd.mtmd_input_chunks_init()
mtmd.mtmd_tokenize(ctx, chunks, ctypes.byref(mtmd.mtmd_input_text(text, len(text), True, True)),
                   (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap), 1)
for i in range(mtmd.mtmd_input_chunks_size(chunks)):
    chunk = mtmd.mtmd_input_chunks_get(chunks, i)
    if mtmd.mtmd_input_chunk_get_type(chunk) == mtmd.MTMD_INPUT_CHUNK_TYPE_AUDIO:
        print("encoded", mtmd.mtmd_encode_chunk(ctx, chunk), flush=True)
"""


def test_that_ultravox_projector_really_aborts_llama_cpp_at_its_first_clip(tmp_path: Path, starter_model: Path):
    """Why the header refuses it: in a child process, past the checks, libmtmd loads it and then aborts."""
    path = write_tiny_audio_projector(tmp_path / "mmproj-ultravox.gguf",
                                      TinyAudioSpec(projector_type="ultravox", stack_factor=8))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.run([sys.executable, "-c", _ABORTS, str(starter_model), str(path)], capture_output=True,
                           text=True, timeout=120, env=env)
    assert "loaded True" in child.stdout and "encoded" not in child.stdout
    assert child.returncode != 0 and "expected output 187 tokens, got 188" in child.stderr
