"""engine/gguf/llama_mtmd.py: the starter model (SmolLM2-135M, 576 wide) with tiny random projectors
(tests/fixtures/tiny_projector.py) that llama.cpp's libmtmd really loads.

Random weights describe nothing, so these assert the mechanics: an image becomes the tokens the header
predicts, it enters the KV cache of the sequence asked, text after it decodes and can be sampled, the
same image gives chunks of the same id, and files llama.cpp must not see are refused before it does.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest

from engine.gguf import llama_mtmd
from engine.gguf.llama_handle import LlamaHandle, LlamaSettings
from engine.gguf.llama_mtmd import Bitmap, MediaChunk, Projector, ProjectorError, TextChunk, media
from engine.gguf.llama_sampler import Sampler
from models.formats.errors import InvalidModelFile
from models.formats.projector_header import (
    NotAProjector,
    ProjectorMismatch,
    image_tokens,
    read_projector_info,
)
from tests.fixtures.model_files import truncated_copy
from tests.fixtures.tiny_projector import TinyProjectorSpec, write_tiny_projector

CHAT = "<|im_start|>user\nWhat is in this picture? <__media__>\nSay it in one word.<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def projectors(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("projectors")
    specs = {
        "idefics3": TinyProjectorSpec(longest_edge=128),  # a wide image is 2 × 1 tiles and the overview
        "gemma3": TinyProjectorSpec(projector_type="gemma3"),
        "wide": TinyProjectorSpec(n_embd_out=1152),
    }
    paths = {name: write_tiny_projector(folder / f"mmproj-{name}.gguf", spec) for name, spec in specs.items()}
    paths["truncated"] = truncated_copy(paths["idefics3"], folder / "mmproj-truncated.gguf", fraction=0.7)
    return paths


@pytest.fixture(scope="module")
def llama(starter_model: Path):
    handle = LlamaHandle(starter_model, LlamaSettings(n_ctx=1024, n_threads=2, n_seq=2), lambda: None)
    yield handle
    handle.close()


@pytest.fixture
def fresh(llama: LlamaHandle) -> LlamaHandle:
    llama.clear()
    return llama


@pytest.fixture(scope="module")
def gemma3(projectors: dict[str, Path], llama: LlamaHandle):
    projector = Projector(projectors["gemma3"], llama, use_gpu=False, n_threads=2)
    yield projector
    projector.close()


@pytest.fixture(scope="module")
def idefics3(projectors: dict[str, Path], llama: LlamaHandle):
    projector = Projector(projectors["idefics3"], llama, use_gpu=False, n_threads=2)
    yield projector
    projector.close()


def red_square(width: int = 64, height: int = 64) -> bytes:
    """A red square on white, RGB row by row."""
    pixels = np.full((height, width, 3), 255, dtype=np.uint8)
    pixels[height // 4 : 3 * height // 4, width // 4 : 3 * width // 4] = (255, 0, 0)
    return pixels.tobytes()


def test_llama_cpp_loads_the_tiny_projectors_and_says_what_they_take(idefics3: Projector, gemma3: Projector):
    assert idefics3.ptr and gemma3.ptr  # mtmd_init_from_file gave a context
    assert (idefics3.supports_vision, idefics3.supports_audio, idefics3.audio_sample_rate) == (True, False, None)
    assert (idefics3.marker, idefics3.n_embd_inp, idefics3.info.n_embd_out) == ("<__media__>", 576, 576)
    assert (idefics3.non_causal, gemma3.non_causal) == (False, True)  # Gemma 3's images attend both ways
    assert not idefics3.uses_mrope


def test_an_image_becomes_the_tokens_the_header_predicts(idefics3: Projector):
    with media(Bitmap.image(300, 100, red_square(300, 100))) as (image,):
        prompt = idefics3.tokenize(CHAT, [image], add_bos=False)
    try:
        images = [c for c in prompt.chunks if isinstance(c, MediaChunk)]
        predicted = image_tokens(idefics3.info, 300, 100)
        assert [c.n_tokens for c in images] == list(predicted.chunks) == [16, 16, 16]  # 2 × 1 tiles, overview
        assert [c.n_pos for c in images] == [16, 16, 16]
        assert {c.kind for c in images} == {"image"} and {c.id for c in images} == {image.id}
        assert isinstance(prompt.chunks[0], TextChunk) and isinstance(prompt.chunks[-1], TextChunk)
        # idefics3 puts "<fake_token_around_image>" around its tiles; SmolLM2's vocabulary has no such token
        assert prompt.unknown_tokens > 0
    finally:
        prompt.close()


def test_idefics3_markers_unknown_to_the_model_are_refused_before_anything_is_evaluated(
        idefics3: Projector, fresh: LlamaHandle):
    with media(Bitmap.image(64, 64, red_square())) as (image,):
        prompt = idefics3.tokenize(CHAT, [image], add_bos=False)
    try:
        with pytest.raises(ProjectorError, match="not in the model's vocabulary.*made for another model"):
            idefics3.evaluate(prompt, n_past=0)
        assert fresh.seq_pos_max(0) == -1
        # its image chunks alone do go in: each advances the sequence by its positions
        n_past = 0
        for i, chunk in enumerate(prompt.chunks):
            if isinstance(chunk, MediaChunk):
                n_past = idefics3.evaluate(prompt, n_past, first=i, end=i + 1)
                assert fresh.seq_pos_max(0) == n_past - 1
        assert n_past == image_tokens(idefics3.info, 64, 64).total == 80  # 128 × 128: 2 × 2 tiles, the overview
    finally:
        prompt.close()


def test_an_image_enters_the_sequence_asked_and_the_text_after_it_is_sampled(gemma3: Projector, fresh: LlamaHandle):
    with media(Bitmap.image(64, 64, red_square())) as (image,):
        prompt = gemma3.tokenize(CHAT, [image], add_bos=False)
    try:
        kinds = [type(c).__name__ for c in prompt.chunks]
        assert kinds == ["TextChunk", "MediaChunk", "TextChunk"]
        before, picture, after = prompt.chunks
        assert (picture.n_tokens, picture.n_pos) == (16, 16) == (image_tokens(gemma3.info, 64, 64).total,) * 2
        n_past = gemma3.evaluate(prompt, n_past=0, seq_id=1, end=2)
        assert n_past == before.n_pos + 16
        assert fresh.seq_pos_max(1) == n_past - 1 and fresh.seq_pos_min(1) == 0
        assert fresh.seq_pos_max(0) == -1  # the other sequence is untouched
        n_past = gemma3.evaluate(prompt, n_past, seq_id=1, first=2)
        assert n_past == prompt.n_pos == before.n_pos + 16 + after.n_pos
        assert fresh.seq_pos_max(1) == n_past - 1
        sampler = Sampler([("greedy",)])
        try:
            token = sampler.sample(fresh)
        finally:
            sampler.close()
        assert 0 <= token < fresh.n_vocab
        assert fresh.decode([token], n_past, seq_id=1) == 0  # and the reply goes on after the image
        assert fresh.seq_pos_max(1) == n_past
    finally:
        prompt.close()


def test_the_same_image_twice_gives_chunks_of_the_same_id(gemma3: Projector):
    pixels = red_square()
    text = "First <__media__>, second <__media__>, third <__media__>."
    with media(Bitmap.image(64, 64, pixels), Bitmap.image(64, 64, pixels),
               Bitmap.image(64, 64, red_square(32, 128)[: 64 * 64 * 3])) as images:
        prompt = gemma3.tokenize(text, images, add_bos=False)
    try:
        ids = [c.id for c in prompt.chunks if isinstance(c, MediaChunk)]
        expected = hashlib.sha256(b"64x64\n" + pixels).hexdigest()
        assert ids[0] == ids[1] == expected != ids[2]
    finally:
        prompt.close()
    with media(Bitmap.image(64, 64, pixels, media_id="abc123")) as (named,):
        prompt = gemma3.tokenize("<__media__>", [named], add_bos=False)
    try:
        assert [c.id for c in prompt.chunks if isinstance(c, MediaChunk)] == ["abc123"]
    finally:
        prompt.close()


def test_markers_and_media_must_agree(gemma3: Projector):
    with (media(Bitmap.image(64, 64, red_square())) as (image,),
          pytest.raises(ProjectorError, match="2 media markers for 1 media")):
        gemma3.tokenize("<__media__> and <__media__>", [image], add_bos=False)
    with (media(Bitmap.audio(np.zeros(1600, dtype=np.float32).tobytes())) as (clip,),
          pytest.raises(ProjectorError, match="takes no audio$")):  # libmtmd would abort
        gemma3.tokenize("<__media__>", [clip], add_bos=False)
    with pytest.raises(ValueError, match="64 × 64 pixels has 12288 bytes, not 5"):
        Bitmap.image(64, 64, b"12345")


def _never_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args):
        raise AssertionError("llama.cpp was handed a file the checks should have refused")

    monkeypatch.setattr(llama_mtmd.mtmd, "mtmd_init_from_file", refuse)


def test_a_projector_for_a_wider_model_is_refused_before_llama_cpp_sees_it(
        projectors: dict[str, Path], llama: LlamaHandle, monkeypatch: pytest.MonkeyPatch):
    _never_loaded(monkeypatch)
    with pytest.raises(ProjectorMismatch) as refused:
        Projector(projectors["wide"], llama, use_gpu=False, n_threads=2)
    assert str(refused.value) == "projector gives 1152-wide embeddings, the model takes 576"


def test_a_text_model_given_as_projector_is_refused_by_name(
        starter_model: Path, llama: LlamaHandle, monkeypatch: pytest.MonkeyPatch):
    _never_loaded(monkeypatch)
    with pytest.raises(NotAProjector, match=r"is not a vision projector \(general.architecture is llama\)"):
        Projector(starter_model, llama, use_gpu=False, n_threads=2)


def test_a_truncated_projector_is_refused(projectors: dict[str, Path], llama: LlamaHandle,
                                          monkeypatch: pytest.MonkeyPatch):
    _never_loaded(monkeypatch)
    with pytest.raises(InvalidModelFile, match="truncated"):
        Projector(projectors["truncated"], llama, use_gpu=False, n_threads=2)


def test_a_projector_llama_cpp_refuses_raises_and_the_process_lives(
        projectors: dict[str, Path], llama: LlamaHandle, tmp_path: Path):
    # A projector type llama.cpp does not know passes the Python checks (its width comes from projection_dim)
    # and is refused by llama.cpp itself, with an error rather than an abort.
    info = read_projector_info(projectors["gemma3"])
    assert info.n_embd_out == 576
    path = tmp_path / "mmproj-unknown.gguf"
    data = projectors["gemma3"].read_bytes()
    assert data.count(b"gemma3") == 2  # general.name's and clip.projector_type's, both after a length
    path.write_bytes(data.replace(b"\x06\x00\x00\x00\x00\x00\x00\x00gemma3", b"\x06\x00\x00\x00\x00\x00\x00\x00gemmaX"))
    with pytest.raises(ProjectorError, match="could not load the projector mmproj-unknown.gguf"):
        Projector(path, llama, use_gpu=False, n_threads=2)


def test_a_closed_projector_refuses_and_closes_once(projectors: dict[str, Path], llama: LlamaHandle):
    projector = Projector(projectors["gemma3"], llama, use_gpu=False, n_threads=2, warmup=False)
    projector.close()
    projector.close()
    with media(Bitmap.image(64, 64, red_square())) as (image,), pytest.raises(ProjectorError, match="closed"):
        projector.tokenize("<__media__>", [image], add_bos=False)



def test_libmtmd_s_log_goes_where_it_is_sent_with_the_projector_s_buffers(projectors: dict[str, Path],
                                                                         llama: LlamaHandle):
    lines: list[str] = []
    callback = llama_mtmd.install_log_callback(lambda _level, text, _data: lines.append(text.decode()))
    try:
        projector = Projector(projectors["gemma3"], llama, use_gpu=False, n_threads=2)
        projector.close()
    finally:
        llama_mtmd.reset_log_callback()  # stderr again before the callback is freed
    del callback
    logged = "".join(lines)
    # what a forecast of the projector is checked against: its weights and its compute buffer at load
    assert re.search(r"model size:\s+0\.2\d MiB", logged)
    assert re.search(r"CPU compute buffer size =\s+[\d.]+ MiB", logged)
