"""A finished chat's next turn, prefilled while the engine is idle (engine/gguf/next_turn.py), on real
llama.cpp: in-process for the exact token counts, through the engine process for the host's part."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from engine.backend import BackendError
from engine.client import EngineClient
from engine.gguf import next_turn
from engine.gguf.backend import GgufBackend
from engine.gguf.next_turn import FinishedTurn, next_turn_tokens
from engine.protocol import (
    ChatMessage,
    Done,
    GenerateRequest,
    GenerationStats,
    Loaded,
    LoadRequest,
    MemoryReport,
    ReplyShape,
    SamplingParams,
)
from tests.engine.helpers import collect, wait_for

GREEDY = SamplingParams(temperature=0.0, max_tokens=40, seed=1)
THINKING = ReplyShape(think_budget=16)
FIRST = (
    ChatMessage("system", "You are a geography tutor. " * 12),
    ChatMessage("user", "What is the capital of France?"),
)
NEW = ChatMessage("user", "And of Italy?")


def _ask(backend: GgufBackend, messages, shape: ReplyShape = THINKING, sampling: SamplingParams = GREEDY) -> Done:
    request = GenerateRequest(1, tuple(messages), sampling, shape=shape)
    return backend.generate(request, lambda _t, reasoning=False: None, lambda: False)


def _prompt_len(backend: GgufBackend, messages, shape: ReplyShape = THINKING) -> int:
    """The tokens of `messages`' prompt, rendered for `shape` as the engine renders it."""
    shaped = backend._shaped(GenerateRequest(1, tuple(messages), GREEDY, shape=shape))  # noqa: SLF001
    return len(backend._tokenize(shaped.text))  # noqa: SLF001


@pytest.fixture(scope="module")
def qwq(backend: GgufBackend, format_models: Callable[[str], Path]) -> GgufBackend:
    """The starter's weights under QwQ's template, whose prompt opens the think block."""
    backend.load(LoadRequest(str(format_models("qwq")), n_ctx=2048))
    return backend


def test_after_a_reply_that_thought_the_next_turn_prefills_only_the_new_message(qwq: GgufBackend):
    first = _ask(qwq, FIRST)
    assert first.reasoning and first.stats.reasoning_tokens > 0, "the reply did not think"
    history = (*FIRST, ChatMessage("assistant", first.text))
    warmed = qwq.idle()
    assert warmed > 0
    assert qwq.idle() == 0  # done once: nothing waits any more
    second = _ask(qwq, (*history, NEW))
    # Everything but the new message's turn came from the cache: the history with the answer alone,
    # rendered as the template renders an earlier turn (its reasoning dropped).
    new_part = _prompt_len(qwq, (*history, NEW)) - len(_next_turn(qwq, FIRST, first))
    assert 0 < new_part < 20
    assert second.stats.prompt_tokens - second.stats.cached_tokens == new_part


def test_without_the_idle_work_the_answer_is_prefilled_again(qwq: GgufBackend):
    """The control: what the warm-up saves is the last answer's prefill (its slot held it after the thinking)."""
    first = _ask(qwq, FIRST[:1] + (ChatMessage("user", "What is the capital of Spain?"),))
    history = (FIRST[0], ChatMessage("user", "What is the capital of Spain?"), ChatMessage("assistant", first.text))
    second = _ask(qwq, (*history, NEW))
    assert second.stats.prompt_tokens - second.stats.cached_tokens > len(qwq._tokenize(first.text))  # noqa: SLF001


def test_a_warmed_next_turn_answers_exactly_as_a_cold_one(backend: GgufBackend, starter_model: Path):
    """The cells prefilled while idle are the very ones a cold prompt computes: greedy replies are equal."""
    backend.load(LoadRequest(str(starter_model), n_ctx=2048))
    plain = ReplyShape()
    long = SamplingParams(temperature=0.0, max_tokens=64, seed=1)
    first = _ask(backend, FIRST, plain, long)
    history = (*FIRST, ChatMessage("assistant", first.text), NEW)
    assert backend.idle() > 0  # the turn's closing tokens (ChatML's <|im_end|>\n) and the next header
    warm = _ask(backend, history, plain, long)
    assert warm.stats.prompt_tokens - warm.stats.cached_tokens < 12
    _forget(backend)
    cold = _ask(backend, history, plain, long)
    assert cold.stats.cached_tokens == 0
    assert warm.text == cold.text and len(warm.text) > 20


def test_a_slot_emptied_since_the_reply_is_not_filled_again(backend: GgufBackend, starter_model: Path):
    """A slot whose cells went after its reply ended (a failed batch, set aside for another chat) is
    not warmed: what it would be warmed from is gone."""
    backend.load(LoadRequest(str(starter_model), n_ctx=2048))
    _ask(backend, FIRST, ReplyShape())
    backend._prefixes.seqs.clear()  # noqa: SLF001
    assert backend.idle() == 0
    assert backend._prefixes.seqs.tokens_of(0) == ()  # noqa: SLF001


def test_a_history_the_template_refuses_warms_nothing():
    def refuse(_messages):
        raise BackendError("template", "The template refused the history.")

    turn = FinishedTurn(0, (1, 2, 3), GenerateRequest(1, FIRST, GREEDY), Done(1, "Paris.", "stop", _stats()))
    assert next_turn_tokens(refuse, lambda text: [ord(c) for c in text], turn) == []


def test_the_history_is_cut_where_the_next_message_begins():
    turn = FinishedTurn(0, (), GenerateRequest(1, FIRST[1:], GREEDY), Done(1, "Paris.", "stop", _stats()))

    def render(messages):
        return "".join(f"<{m.role}>{m.content}</{m.role}>" for m in messages) + "<assistant>"

    tokens = next_turn_tokens(render, lambda text: [ord(c) for c in text], turn)
    assert "".join(map(chr, tokens)) == "<user>What is the capital of France?</user><assistant>Paris.</assistant><user>"


def test_the_engine_process_warms_the_next_turn_once_idle(format_models: Callable[[str], Path], tmp_path: Path):
    client = EngineClient(log_path=tmp_path / "engine.log")
    client.start()
    try:
        client.load(LoadRequest(str(format_models("qwq")), n_ctx=2048))
        assert isinstance(wait_for(client, (Loaded,)), Loaded)
        first = collect(client, client.generate(list(FIRST), GREEDY, shape=THINKING))
        assert isinstance(first.end, Done) and first.end.reasoning
        # Once idle (no request came within the grace), the host reports the reply's end, warms the next
        # turn, and reports what that holds: the second report comes after the warm-up.
        assert isinstance(wait_for(client, (MemoryReport,)), MemoryReport)
        assert isinstance(wait_for(client, (MemoryReport,)), MemoryReport)
        second = collect(client, client.generate([*FIRST, ChatMessage("assistant", first.end.text), NEW], GREEDY,
                                                 shape=THINKING))
        assert isinstance(second.end, Done)
        stats = second.end.stats
        assert stats.prompt_tokens - stats.cached_tokens < 20
    finally:
        client.shutdown()


def test_a_warm_up_cut_short_goes_on_where_it_stopped(backend: GgufBackend, starter_model: Path,
                                                     monkeypatch: pytest.MonkeyPatch):
    """Interrupted between chunks (a request came), the warm-up leaves the slot part way and the next idle
    moment goes on from there: the cells are the very ones a cold prompt computes."""
    monkeypatch.setattr(next_turn, "WARM_CHUNK", 2)
    backend.load(LoadRequest(str(starter_model), n_ctx=2048))
    plain = ReplyShape()
    long = SamplingParams(temperature=0.0, max_tokens=64, seed=1)
    # Not FIRST: the RAM tier may hold that history from another test of the module.
    opening = (ChatMessage("system", "You are a history tutor. " * 12), ChatMessage("user", "Who built Rome?"))
    first = _ask(backend, opening, plain, long)
    history = (*opening, ChatMessage("assistant", first.text), ChatMessage("user", "And Carthage?"))
    assert backend.idle(lambda: True) == 0  # a request already waits: nothing starts
    pieces = []
    while warmed := backend.idle(_after_one_chunk()):
        pieces.append(warmed)
    assert len(pieces) >= 3 and set(pieces[:-1]) == {2}
    warm = _ask(backend, history, plain, long)
    assert warm.stats.prompt_tokens - warm.stats.cached_tokens < 12
    _forget(backend)
    cold = _ask(backend, history, plain, long)
    assert cold.stats.cached_tokens == 0
    assert warm.text == cold.text and len(warm.text) > 20


def _forget(backend: GgufBackend) -> None:
    """Cold: nothing cached, in the cells or in RAM (where a few tokens of a system prompt are taken too)."""
    backend._prefixes.seqs.clear()  # noqa: SLF001
    backend._prefixes._cache.clear()  # noqa: SLF001


def _after_one_chunk() -> Callable[[], bool]:
    """An `interrupted` that a request makes true once the warm-up has started: one chunk is prefilled."""
    answers = iter([False])
    return lambda: next(answers, True)


def _next_turn(backend: GgufBackend, messages, done: Done) -> list[int]:
    request = GenerateRequest(1, tuple(messages), GREEDY, shape=THINKING)
    return next_turn_tokens(lambda m: backend._shaped(GenerateRequest(1, tuple(m), GREEDY, shape=THINKING)).text,  # noqa: SLF001
                            backend._tokenize, FinishedTurn(0, (), request, done))  # noqa: SLF001


def _stats() -> GenerationStats:
    return GenerationStats(0.1, 10, 0, 2, 100.0, 10.0)
