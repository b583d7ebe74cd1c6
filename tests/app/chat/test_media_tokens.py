"""The context guard counts a message's images as the loaded projector will: never fewer tokens than libmtmd
makes of them (the tiny projectors of tests/fixtures/tiny_projector.py, loaded by the real libmtmd), its audio
clips likewise (a tiny Qwen2-Audio projector), and a conversation whose images or clips outgrow the context is
held back with them."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.chat.context_guard import conversation_tokens, shortfall
from app.chat.media_tokens import (
    MARKER_TOKENS,
    UNKNOWN_IMAGE_TOKENS,
    UNKNOWN_WINDOW_TOKENS,
    ClipTokens,
    ProjectorTokens,
)
from app.services.history.store import AudioRef, ImageRef, Message
from engine.gguf.llama_handle import LlamaHandle, LlamaSettings
from engine.gguf.llama_mtmd import Bitmap, Projector, media
from models.formats.projector_header import read_projector_info
from tests.fixtures.tiny_audio_projector import write_tiny_audio_projector
from tests.fixtures.tiny_projector import TinyProjectorSpec, write_tiny_projector

TEXT = "<|im_start|>user\nWhat is in this picture? {}\nSay it in one word.<|im_end|>\n<|im_start|>assistant\n"
SIZES = [(64, 64), (300, 100), (100, 300), (1000, 3000), (4000, 3000)]


@pytest.fixture(scope="module")
def llama(starter_model: Path):
    handle = LlamaHandle(starter_model, LlamaSettings(n_ctx=512, n_threads=2, n_seq=1), lambda: None)
    yield handle
    handle.close()


@pytest.mark.parametrize("kind", ["idefics3", "gemma3"])
def test_an_image_is_counted_at_least_as_libmtmd_makes_it(kind: str, llama: LlamaHandle, tmp_path: Path):
    spec = TinyProjectorSpec(projector_type=kind, longest_edge=128 if kind == "idefics3" else None)
    path = write_tiny_projector(tmp_path / "mmproj.gguf", spec)
    count = ProjectorTokens(read_projector_info(path))
    projector = Projector(path, llama, use_gpu=False, n_threads=2, warmup=False)
    try:
        text_only = projector.tokenize(TEXT.format(""), [], add_bos=False)
        base = text_only.n_pos
        text_only.close()
        for width, height in SIZES:
            rgb = np.full((height, width, 3), 200, dtype=np.uint8).tobytes()
            with media(Bitmap.image(width, height, rgb)) as (image,):
                prompt = projector.tokenize(TEXT.format(projector.marker), [image], add_bos=False)
            real = prompt.n_pos - base
            chunks = sum(1 for c in prompt.chunks if type(c).__name__ == "MediaChunk")
            prompt.close()
            assert real <= count(width, height) <= real + 2 * MARKER_TOKENS * chunks, (width, height)
    finally:
        projector.close()


def test_a_projector_whose_count_is_not_modelled_is_bounded_by_its_merged_patches(tmp_path: Path):
    info = read_projector_info(write_tiny_projector(tmp_path / "mmproj.gguf", TinyProjectorSpec()))
    dynamic = replace(info, projector_type="qwen2.5vl_merger", patch_size=14, merge=2)
    count = ProjectorTokens(dynamic)
    assert count(280, 560) == 10 * 20 + MARKER_TOKENS
    assert count(8000, 4000) == count(2048, 1024) == 74 * 37 + MARKER_TOKENS  # as the intake sends it
    assert ProjectorTokens(replace(dynamic, patch_size=None))(100, 100) == UNKNOWN_IMAGE_TOKENS + MARKER_TOKENS


def _message(i: int, role: str, content: str, stats=None, images=()) -> Message:
    return Message(i, 1, role, content, "done", stats, 0.0, images=images)


def test_the_guard_counts_the_images_after_the_last_counted_reply_and_the_new_ones():
    per_image = lambda w, h: 300  # noqa: E731 - a projector whose every image is 300 tokens
    photo = ImageRef("a" * 64, "PNG", "photo.png", 640, 480)
    counted = [_message(1, "user", "look", images=(photo,)),
               _message(2, "assistant", "a cat", {"prompt_tokens": 400, "gen_tokens": 10})]
    after = [*counted, _message(3, "user", "and this?", images=(photo, photo))]
    text_only = conversation_tokens(after, "", "and now?")
    assert conversation_tokens(after, "", "and now?", image_tokens=per_image) == text_only + 600  # not the first one
    assert conversation_tokens(after, "", "and now?", [(10, 10)], per_image) == text_only + 900
    # a model without a projector is sent no images: none counted
    assert conversation_tokens(after, "", "and now?", [(10, 10)], None) == text_only


def test_images_that_outgrow_the_context_hold_the_message_back_with_them():
    per_image = lambda w, h: 300  # noqa: E731
    sizes = [(640, 480)] * 3
    assert shortfall([], "", "what are these?", 200, 1024, 4096, images=sizes[:1], image_tokens=per_image) is None
    short = shortfall([], "", "what are these?", 200, 1024, 4096, images=sizes, image_tokens=per_image,
                      carried=("a", "b", "c"))
    assert short is not None and short.needed > 1024 and short.can_reload
    assert short.images == ("a", "b", "c")  # sent with the message after the reload


# ---------------------------------------------------------------- audio clips


@pytest.mark.parametrize(("seconds", "windows"), [(0.2, 1), (3.0, 1), (29.99, 2), (31.0, 2), (75.0, 3)])
def test_a_clip_is_counted_at_least_as_libmtmd_makes_it(seconds: float, windows: int, llama: LlamaHandle,
                                                         tmp_path: Path):
    path = write_tiny_audio_projector(tmp_path / "mmproj-qwen2a.gguf")
    info = read_projector_info(path)
    count = ClipTokens(info.audio)
    projector = Projector(path, llama, use_gpu=False, n_threads=2, warmup=False)
    try:
        text_only = projector.tokenize(TEXT.format(""), [], add_bos=False)
        base = text_only.n_pos
        text_only.close()
        pcm = np.zeros(round(seconds * info.audio.sample_rate), dtype="<f4").tobytes()
        with media(Bitmap.audio(pcm)) as (clip,):
            prompt = projector.tokenize(TEXT.format(projector.marker), [clip], add_bos=False)
        real = prompt.n_pos - base
        prompt.close()
        assert real <= count(seconds) <= real + 2 * MARKER_TOKENS
        assert count(seconds) - MARKER_TOKENS == 750 * windows  # 750 tokens a 30 s window, padded by 30 s
    finally:
        projector.close()


def test_an_encoder_whose_cutting_is_not_modelled_is_bounded_by_whole_windows(tmp_path: Path):
    encoder = read_projector_info(write_tiny_audio_projector(tmp_path / "mmproj.gguf")).audio
    unknown = ClipTokens(replace(encoder, window_seconds=None, tokens_per_window=None))
    assert unknown(10.0) == 2 * UNKNOWN_WINDOW_TOKENS + MARKER_TOKENS >= ClipTokens(encoder)(10.0)
    assert unknown(61.0) == 4 * UNKNOWN_WINDOW_TOKENS + MARKER_TOKENS


def test_the_guard_counts_the_clips_after_the_last_counted_reply_and_the_new_ones():
    per_clip = lambda seconds: 100 * math.ceil(seconds)  # noqa: E731 - 100 tokens a started second
    memo = AudioRef("b" * 64, "WAV", "memo.wav", 2.5)
    counted = [Message(1, 1, "user", "hear", "done", None, 0.0, clips=(memo,)),
               Message(2, 1, "assistant", "a bird", "done", {"prompt_tokens": 400, "gen_tokens": 10}, 0.0)]
    after = [*counted, Message(3, 1, "user", "and this?", "done", None, 0.0, clips=(memo, memo))]
    text_only = conversation_tokens(after, "", "and now?")
    assert conversation_tokens(after, "", "and now?", clip_tokens=per_clip) == text_only + 600
    assert conversation_tokens(after, "", "and now?", new_clips=[0.4], clip_tokens=per_clip) == text_only + 700
    assert conversation_tokens(after, "", "and now?", new_clips=[0.4]) == text_only  # a model that cannot hear
    short = shortfall([], "", "what is it?", 200, 1024, 4096, clips=[9.0, 9.0], clip_tokens=per_clip,
                      carried_clips=("a", "b"))
    assert short is not None and short.clips == ("a", "b") and short.images == () and short.can_reload
