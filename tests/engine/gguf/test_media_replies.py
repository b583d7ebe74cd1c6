"""Replies to messages with images, through the GGUF backend: the starter model with a tiny gemma3 projector
(tests/fixtures/tiny_projector.py) that llama.cpp's libmtmd really loads and runs.

The projector's weights are random, so what the model says of a picture means nothing; these tests check
the mechanics: the image's positions in the sequence, the prefix cache keeping a picture warm (RAM, disk,
another slot), the reply loop after it, and the errors of everything that can be wrong.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from engine.backend import BackendError
from engine.gguf.backend import MEDIA_MARKER, GgufBackend
from engine.gguf.log_bridge import LlamaLogBridge
from engine.gguf.media_prompt import MEDIA_TOKEN_RANGE, media_token
from engine.gguf.prompt_lookup import PromptLookup
from engine.protocol import ChatMessage, Done, GenerateRequest, LoadRequest, Media, SamplingParams
from models.formats.projector_header import image_tokens, read_projector_info
from tests.engine.helpers import reply
from tests.fixtures.tiny_projector import TinyProjectorSpec, write_tiny_projector

GREEDY = SamplingParams(temperature=0.0, max_tokens=8, seed=1)
FACTS = " ".join(f"Fact {i}: the archive keeps every picture it was shown, and each one is filed." for i in range(10))


@pytest.fixture(scope="module")
def projectors(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("projectors")
    return {
        "gemma3": write_tiny_projector(folder / "mmproj-gemma3.gguf", TinyProjectorSpec(projector_type="gemma3")),
        "wide": write_tiny_projector(folder / "mmproj-wide.gguf", TinyProjectorSpec(n_embd_out=1152)),
    }


def image(red: int, green: int = 0, blue: int = 0, side: int = 64) -> Media:
    """A square of one colour in a white frame, as the app's intake sends it (RGB, its id a hash)."""
    pixels = np.full((side, side, 3), 255, dtype=np.uint8)
    pixels[side // 4 : 3 * side // 4, side // 4 : 3 * side // 4] = (red, green, blue)
    data = pixels.tobytes()
    return Media("image", hashlib.sha256(data).hexdigest(), data, side, side)


def ask(question: str, *media: Media) -> list[ChatMessage]:
    return [ChatMessage("system", FACTS), ChatMessage("user", question, media=tuple(media))]


def load(backend: GgufBackend, starter_model: Path, mmproj: Path | None, **kw) -> None:
    backend.load(LoadRequest(str(starter_model), n_ctx=2048, n_threads=2, mmproj=str(mmproj) if mmproj else None, **kw))


def gemma3_tokens(projectors: dict[str, Path]) -> int:
    return image_tokens(read_projector_info(projectors["gemma3"]), 64, 64).total


def test_a_message_with_an_image_is_answered_and_the_image_takes_its_positions(
        backend: GgufBackend, starter_model: Path, projectors: dict[str, Path]):
    load(backend, starter_model, projectors["gemma3"])
    assert backend._info.vision and not backend._info.audio
    assert backend._info.projector == str(projectors["gemma3"])
    text_only = reply(backend, ask("What is this?"), GREEDY)
    with_image = reply(backend, ask("What is this?", image(255)), GREEDY)
    assert with_image.finish_reason in ("stop", "length") and with_image.stats.gen_tokens > 0
    # the image's 16 positions, and the text gemma3 puts around it ("\n\n<start_of_image>", split by this vocabulary)
    extra = with_image.stats.prompt_tokens - text_only.stats.prompt_tokens
    n_image = gemma3_tokens(projectors)
    assert n_image == 16 and n_image < extra <= n_image + 20
    seqs = backend._prefixes.seqs
    held = seqs.tokens_of(0)
    assert sum(1 for t in held if t < 0) == n_image  # the slot holds the picture, as media tokens
    # llama.cpp's own count of the sequence agrees with the ledger's
    assert backend._llama.seq_pos_max(0) == len(held) - 1
    parts = backend.memory().device("cpu")
    assert parts.projector_bytes > 200_000  # the tiny projector's weights (0.2 MiB) and its compute buffer


def test_the_next_turn_keeps_the_picture_and_prefills_only_what_is_new(
        backend: GgufBackend, starter_model: Path, projectors: dict[str, Path]):
    load(backend, starter_model, projectors["gemma3"])
    first_turn = ask("Describe the picture.", image(0, 0, 255))
    first = reply(backend, first_turn, GREEDY)
    assert first.stats.cached_tokens < first.stats.prompt_tokens - gemma3_tokens(projectors)  # a new picture
    second = reply(backend, [*first_turn, ChatMessage("assistant", first.text), ChatMessage("user", "And then?")],
                   GREEDY)
    # everything up to the first reply is kept: the image is not encoded again
    assert second.stats.cached_tokens >= first.stats.prompt_tokens
    assert second.stats.prompt_tokens - second.stats.cached_tokens < 30


def test_another_picture_in_the_same_place_is_encoded_not_taken_from_the_cache(
        backend: GgufBackend, starter_model: Path, projectors: dict[str, Path]):
    load(backend, starter_model, projectors["gemma3"])
    reply(backend, ask("Which colour?", image(255)), GREEDY)
    before_image = backend._prefixes.seqs.tokens_of(0).index(next(t for t in backend._prefixes.seqs.tokens_of(0)
                                                                  if t < 0))
    other = reply(backend, ask("Which colour?", image(0, 255)), GREEDY)
    assert other.stats.cached_tokens <= before_image  # shared up to the picture, not into it
    assert other.stats.cached_tokens > len(FACTS) // 10  # the system prompt before it is kept
    held = backend._prefixes.seqs.tokens_of(0)
    green = [t for t in held if t < 0]
    assert len(green) == gemma3_tokens(projectors)
    assert green[0] == media_token(backend._projector_id, image(0, 255).id, 0)


def test_a_chat_with_a_picture_comes_back_warm_from_ram_and_from_disk(
        backend: GgufBackend, starter_model: Path, projectors: dict[str, Path], tmp_path: Path):
    cache_dir = tmp_path / "prefixes"
    load(backend, starter_model, projectors["gemma3"], prefix_cache_dir=str(cache_dir))
    chat = ask("Tell me about the picture in detail.", image(10, 200, 30))
    first = reply(backend, chat, GREEDY)
    reply(backend, ask("Something else entirely: count to three."), GREEDY)  # the chat leaves the slot
    back = reply(backend, [*chat, ChatMessage("assistant", first.text), ChatMessage("user", "More.")], GREEDY)
    assert back.stats.cached_tokens >= first.stats.prompt_tokens  # restored from RAM, the picture with it
    backend.close()  # what the slot holds goes to disk
    fresh = GgufBackend(LlamaLogBridge())
    try:
        load(fresh, starter_model, projectors["gemma3"], prefix_cache_dir=str(cache_dir))
        again = reply(fresh, [*chat, ChatMessage("assistant", first.text), ChatMessage("user", "More.")], GREEDY)
        assert again.stats.cached_tokens >= first.stats.prompt_tokens  # a new engine: from the disk tier
    finally:
        fresh.close()


def test_two_chats_with_different_pictures_run_at_once(
        backend: GgufBackend, starter_model: Path, projectors: dict[str, Path]):
    load(backend, starter_model, projectors["gemma3"], n_parallel=2)
    ended: dict[int, Done | BackendError] = {}
    backend.submit(GenerateRequest(1, tuple(ask("First?", image(255))), GREEDY), lambda _t: None, lambda: False)
    backend.submit(GenerateRequest(2, tuple(ask("Second?", image(0, 0, 255), image(0, 255))), GREEDY),
                   lambda _t: None, lambda: False)
    while len(ended) < 2:
        ended.update(backend.step())
    assert all(isinstance(o, Done) and o.stats.gen_tokens > 0 for o in ended.values()), ended
    n_image = gemma3_tokens(projectors)
    assert ended[2].stats.prompt_tokens - ended[1].stats.prompt_tokens >= n_image


def test_a_cancelled_reply_with_a_picture_frees_its_chunks_and_the_next_one_runs(
        backend: GgufBackend, starter_model: Path, projectors: dict[str, Path]):
    load(backend, starter_model, projectors["gemma3"])
    stop = [False]
    backend.submit(GenerateRequest(1, tuple(ask("Cancel me.", image(255))), GREEDY), lambda _t: None,
                   lambda: stop[0])
    backend.step()  # the text before the picture
    stop[0] = True
    outcomes = dict(backend.step())
    assert outcomes[1].finish_reason == "cancelled"
    assert backend.running == 0
    done = reply(backend, ask("Cancel me.", image(255)), GREEDY)
    assert done.stats.gen_tokens > 0


def test_drafting_from_the_conversation_never_drafts_a_media_token(
        backend: GgufBackend, starter_model: Path, projectors: dict[str, Path]):
    from models.plan.load_options import SpeculativeOptions

    load(backend, starter_model, projectors["gemma3"], speculation=SpeculativeOptions(mode="lookup"))
    repeated = "Copy this line: the red square sits in the white frame. " * 4
    done = reply(backend, ask(repeated, image(255), image(255)), SamplingParams(temperature=0.0, max_tokens=24))
    assert done.stats.gen_tokens > 0
    lookup = PromptLookup([5, 6, -3, 7, 8, 5, 6])  # "5 6" was followed by a media token
    assert lookup.follow([5, 6, -3, 7, 8, 5, 6], lambda _match: 4) == []
    assert lookup.follow([5, 6, -3, 7, 8, 5, 6, -3, 7], lambda _match: 4) == [8, 5, 6]


def test_a_model_loaded_without_a_projector_says_it_cannot_see(backend: GgufBackend, starter_model: Path):
    load(backend, starter_model, None)
    assert not backend._info.vision and backend._info.projector is None
    with pytest.raises(BackendError) as caught:
        reply(backend, ask("What is this?", image(255)), GREEDY)
    assert caught.value.kind == "bad_request"
    assert "cannot take images" in str(caught.value) and "projector" in str(caught.value)
    assert reply(backend, ask("Still here?"), GREEDY).stats.gen_tokens > 0  # the model is still loaded


def test_audio_to_a_vision_projector_and_a_malformed_image_are_refused_by_name(
        backend: GgufBackend, starter_model: Path, projectors: dict[str, Path]):
    load(backend, starter_model, projectors["gemma3"])
    audio = Media("audio", "ab" * 32, np.zeros(1600, dtype=np.float32).tobytes())
    with pytest.raises(BackendError, match="takes no audio\\.") as caught:
        reply(backend, ask("Listen.", audio), GREEDY)
    assert caught.value.kind == "bad_request"
    short = Media("image", "cd" * 32, b"\x00" * 100, 64, 64)  # 100 bytes for 64 × 64 pixels
    with pytest.raises(BackendError, match="malformed image") as caught:
        reply(backend, ask("Look.", short), GREEDY)
    assert caught.value.kind == "bad_request"
    assert reply(backend, ask("Look.", image(255)), GREEDY).stats.gen_tokens > 0  # nothing was lost


def test_a_typed_media_marker_is_text_not_a_picture(
        backend: GgufBackend, starter_model: Path, projectors: dict[str, Path]):
    load(backend, starter_model, projectors["gemma3"])
    typed = "llama.cpp writes <__media__> where a picture goes."
    assert reply(backend, ask(typed), GREEDY).stats.gen_tokens > 0
    done = reply(backend, ask(typed, image(255)), GREEDY)
    assert done.stats.gen_tokens > 0
    assert MEDIA_MARKER not in typed


@pytest.mark.parametrize("which", ["text model", "wider model", "fifo", "missing"])
def test_a_projector_that_cannot_be_used_fails_the_load_by_name(
        backend: GgufBackend, starter_model: Path, projectors: dict[str, Path], tmp_path: Path, which: str):
    if which == "text model":
        path, expected = starter_model, "not a vision projector"
    elif which == "wider model":
        path, expected = projectors["wide"], "1152"
    elif which == "fifo":
        path, expected = tmp_path / "mmproj-fifo.gguf", "FIFO"
        os.mkfifo(path)
    else:
        path, expected = tmp_path / "mmproj-missing.gguf", "no such file"
    with pytest.raises(BackendError) as caught:
        load(backend, starter_model, path)
    assert caught.value.kind == "invalid_model"
    assert path.name in str(caught.value) and expected.lower() in str(caught.value).lower()
    assert backend._llama is None  # no model without the projector asked for


def test_media_tokens_are_negative_int32_and_differ_by_projector_image_and_position():
    tokens = {media_token(p, m, i) for p in ("a", "b") for m in ("x", "y") for i in range(64)}
    assert len(tokens) == 2 * 2 * 64
    assert all(-MEDIA_TOKEN_RANGE <= t <= -1 for t in tokens)
    assert media_token("a", "x", 3) == media_token("a", "x", 3)
