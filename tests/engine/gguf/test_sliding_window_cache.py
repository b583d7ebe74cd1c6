"""A sliding-window model (Gemma 3's layout) in the engine: the full-size cache, and the windowed one.

With llama.cpp's full-size SWA cache (the default) every earlier prefix stays reusable, as for
any model. With the windowed cache (`swa_full=False`, which the plan picks only when the
full-size one does not fit) the window layers drop cells older than their window: a prompt that
continues the chat still reuses it, one that goes back further than the window is prefilled
again, and the reply is the same as from a cold start either way.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.gguf.backend import GgufBackend
from engine.protocol import ChatMessage, LoadRequest, SamplingParams
from tests.engine.helpers import reply

GREEDY = SamplingParams(temperature=0.0, max_tokens=16, seed=1)
# The tiny gemma3 has a 512-token window; this chat is well past it.
LONG = " ".join(f"fact {i} is that the sky was {i % 7} shades of blue" for i in range(80))
FIRST = [ChatMessage("user", LONG)]


def gemma(family_corpus: dict[str, Path]) -> str:
    return str(family_corpus["gemma3-q4_k_m"])


def chat(backend: GgufBackend, *messages: ChatMessage):
    return reply(backend, list(messages), GREEDY)


@pytest.mark.parametrize("swa_full", [True, False])
def test_the_next_turn_reuses_the_chat(backend: GgufBackend, family_corpus, swa_full: bool):
    backend.load(LoadRequest(gemma(family_corpus), n_ctx=2048, swa_full=swa_full, prefix_cache_bytes=0))
    first = chat(backend, *FIRST)
    assert first.stats.prompt_tokens > 2 * 512  # more than the windowed cache holds (512 + one ubatch)
    second = chat(backend, *FIRST, ChatMessage("assistant", first.text), ChatMessage("user", "And then?"))
    assert second.stats.cached_tokens >= first.stats.prompt_tokens


@pytest.mark.parametrize("swa_full", [True, False])
def test_going_back_past_the_window(backend: GgufBackend, family_corpus, swa_full: bool):
    backend.load(LoadRequest(gemma(family_corpus), n_ctx=2048, swa_full=swa_full, prefix_cache_bytes=0))
    chat(backend, *FIRST)
    # The same long message with its end changed: the common prefix ends far behind the window.
    edited = [ChatMessage("user", LONG[: len(LONG) // 3] + " -- no, forget the rest.")]
    warm = chat(backend, *edited)
    if swa_full:
        assert warm.stats.cached_tokens >= warm.stats.prompt_tokens - 20  # all but the edited end: every cell is there
    else:
        assert warm.stats.cached_tokens == 0  # the window layers no longer hold it: prefilled again
    backend.load(LoadRequest(gemma(family_corpus), n_ctx=2048, swa_full=swa_full, prefix_cache_bytes=0))
    cold = chat(backend, *edited)
    assert cold.stats.cached_tokens == 0
    assert warm.text == cold.text
