"""Replies to messages with audio, through the GGUF backend: the starter model with a tiny Qwen2-Audio projector
(tests/fixtures/tiny_audio_projector.py) that llama.cpp's libmtmd really loads and runs.

The projector's weights are random, so what the model says of a clip means nothing; these tests check the
mechanics: the clip's positions in the sequence, the reply streaming after it, the next turn finding the clip
in the cache (not encoded again), and the refusals of audio the projector cannot take.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from engine.backend import BackendError
from engine.gguf.backend import GgufBackend
from engine.gguf.media_prompt import MediaPrompt, media_token
from engine.protocol import ChatMessage, Done, GenerateRequest, LoadRequest, Media, SamplingParams
from models.formats.projector_audio import audio_tokens
from models.formats.projector_header import read_projector_info
from tests.engine.helpers import reply
from tests.fixtures.tiny_audio_projector import write_tiny_audio_projector

GREEDY = SamplingParams(temperature=0.0, max_tokens=8, seed=1)
SYSTEM = "You are a careful listener. Say what you hear in one short sentence."
RATE = 16_000


@pytest.fixture(scope="module")
def qwen2a(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_audio_projector(tmp_path_factory.mktemp("audio") / "mmproj-qwen2a.gguf")


def clip(seconds: float = 3.0, hz: float = 440.0, rate: int = RATE) -> Media:
    """A sine as the app's intake sends a clip: mono float32 at the projector's rate, its id a hash."""
    t = np.arange(round(seconds * rate)) / rate
    pcm = (0.3 * np.sin(2 * np.pi * hz * t)).astype("<f4").tobytes()
    return Media("audio", hashlib.sha256(pcm).hexdigest(), pcm, sample_rate=rate)


def ask(question: str, *media: Media) -> list[ChatMessage]:
    return [ChatMessage("system", SYSTEM), ChatMessage("user", question, media=tuple(media))]


def load(backend: GgufBackend, starter_model: Path, mmproj: Path) -> None:
    backend.load(LoadRequest(str(starter_model), n_ctx=2048, n_threads=2, mmproj=str(mmproj)))


def window(qwen2a: Path, seconds: float = 3.0) -> int:
    return audio_tokens(read_projector_info(qwen2a).audio, round(seconds * RATE)).total


@pytest.fixture
def evaluated(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kinds of the media spans evaluated through the projector (the engine's own method, still run)."""
    kinds: list[str] = []
    original = MediaPrompt.evaluate

    def counting(self: MediaPrompt, span, seq_id: int) -> None:
        kinds.append(span.kind)
        original(self, span, seq_id)

    monkeypatch.setattr(MediaPrompt, "evaluate", counting)
    return kinds


def test_a_message_with_a_clip_is_answered_and_the_clip_takes_its_positions(
        backend: GgufBackend, starter_model: Path, qwen2a: Path, evaluated: list[str]):
    load(backend, starter_model, qwen2a)
    info = backend._info
    assert (info.audio, info.vision, info.audio_sample_rate, info.projector) == (True, False, RATE, str(qwen2a))
    text_only = reply(backend, ask("What is this?"), GREEDY)
    streamed: list[str] = []
    heard = backend.generate(GenerateRequest(1, tuple(ask("What is this?", clip())), GREEDY), streamed.append,
                             lambda: False)
    assert isinstance(heard, Done) and heard.finish_reason in ("stop", "length") and heard.stats.gen_tokens > 0
    assert streamed and "".join(streamed) == heard.text  # the reply streamed after the clip
    assert evaluated == ["audio"]
    # the clip's 750 positions (one 30 s window), and the text Qwen2-Audio puts around it
    # ("<|audio_bos|>" / "<|audio_eos|>", spelt out in pieces by this vocabulary)
    n_clip = window(qwen2a)
    extra = heard.stats.prompt_tokens - text_only.stats.prompt_tokens
    assert n_clip == 750 and n_clip < extra <= n_clip + 30
    held = backend._prefixes.seqs.tokens_of(0)
    media_tokens = [t for t in held if t < 0]
    assert len(media_tokens) == n_clip  # the slot holds the clip, as media tokens
    assert media_tokens[0] == media_token(backend._projector_id, clip().id, 0)
    assert backend._llama.seq_pos_max(0) == len(held) - 1  # llama.cpp's count of the sequence agrees


def test_the_next_turn_keeps_the_clip_and_does_not_encode_it_again(
        backend: GgufBackend, starter_model: Path, qwen2a: Path, evaluated: list[str]):
    load(backend, starter_model, qwen2a)
    first_turn = ask("Describe the sound.", clip(hz=220.0))
    first = reply(backend, first_turn, GREEDY)
    assert first.stats.cached_tokens < first.stats.prompt_tokens - window(qwen2a)  # a new clip
    assert evaluated == ["audio"]
    second = reply(backend, [*first_turn, ChatMessage("assistant", first.text), ChatMessage("user", "And then?")],
                   GREEDY)
    assert second.stats.gen_tokens > 0
    assert second.stats.cached_tokens >= first.stats.prompt_tokens  # everything up to the first reply is kept
    assert second.stats.prompt_tokens - second.stats.cached_tokens < 30
    assert evaluated == ["audio"]  # the clip was not encoded again


def test_another_clip_in_the_same_place_is_encoded_not_taken_from_the_cache(
        backend: GgufBackend, starter_model: Path, qwen2a: Path, evaluated: list[str]):
    load(backend, starter_model, qwen2a)
    reply(backend, ask("Which note?", clip(hz=330.0)), GREEDY)  # a clip no other test sends
    held = backend._prefixes.seqs.tokens_of(0)
    before_clip = next(i for i, t in enumerate(held) if t < 0)
    other = reply(backend, ask("Which note?", clip(hz=550.0)), GREEDY)
    assert before_clip - 30 < other.stats.cached_tokens <= before_clip  # shared up to the clip, not into it
    assert evaluated == ["audio", "audio"]


@pytest.mark.parametrize(("rate", "expected"), [
    (44_100, "a clip of audio at 44,100 Hz; mmproj-qwen2a.gguf hears 16,000 Hz"),
    (0, "a clip of audio without its sample rate; mmproj-qwen2a.gguf hears 16,000 Hz"),
])
def test_a_clip_at_another_rate_is_refused_by_name(backend: GgufBackend, starter_model: Path, qwen2a: Path,
                                                   rate: int, expected: str):
    load(backend, starter_model, qwen2a)
    wrong = Media("audio", "ab" * 32, clip().data, sample_rate=rate)
    with pytest.raises(BackendError) as caught:
        reply(backend, ask("Listen.", wrong), GREEDY)
    assert caught.value.kind == "bad_request" and expected in str(caught.value)
    assert reply(backend, ask("Still here?"), GREEDY).stats.gen_tokens > 0  # the model is still loaded


def test_an_image_to_an_audio_projector_and_a_malformed_clip_are_refused_by_name(
        backend: GgufBackend, starter_model: Path, qwen2a: Path):
    load(backend, starter_model, qwen2a)
    pixels = bytes(64 * 64 * 3)
    image = Media("image", hashlib.sha256(pixels).hexdigest(), pixels, 64, 64)
    with pytest.raises(BackendError, match=r"mmproj-qwen2a.gguf takes no images\.") as caught:
        reply(backend, ask("Look.", image), GREEDY)
    assert caught.value.kind == "bad_request"
    one_sample = Media("audio", "cd" * 32, np.zeros(1, dtype="<f4").tobytes(), sample_rate=RATE)
    with pytest.raises(BackendError, match="malformed audio: a clip of audio has 2 samples or more, not 1"):
        reply(backend, ask("Listen.", one_sample), GREEDY)
    assert reply(backend, ask("Listen.", clip()), GREEDY).stats.gen_tokens > 0  # nothing was lost
