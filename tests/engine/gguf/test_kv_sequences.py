"""Sequences in one llama.cpp KV cache: the live chat, pinned prompts sharing cells, the RAM tier."""

from __future__ import annotations

from pathlib import Path

import llama_cpp
import numpy as np

from engine.gguf.backend import GgufBackend
from engine.protocol import ChatMessage, Done, LoadRequest, SamplingParams
from tests.engine.helpers import reply

GREEDY = SamplingParams(temperature=0.0, max_tokens=16, seed=1)
SYSTEM = "You are the help desk of a public library. " + " ".join(
    f"Rule {i}: be brief, name shelf {i} when it helps, and never invent a book." for i in range(12)
)
LONG_QUESTION = "I am looking for " + ", ".join(f"the book number {i} of the blue series" for i in range(8)) + "."


def topic(name: str, sentences: int = 12) -> list[ChatMessage]:
    text = " ".join(f"Fact {i} about {name}: it matters and should be remembered." for i in range(sentences))
    return [ChatMessage("system", text), ChatMessage("user", f"Tell me about {name}.")]


def generate(backend: GgufBackend, messages: list[ChatMessage]) -> Done:
    return reply(backend, messages, GREEDY)


def tokens_of(backend: GgufBackend, messages: list[ChatMessage], **kw) -> tuple[int, ...]:
    return tuple(backend._tokenize(backend._template.render(messages, **kw)))


def seq_span(backend: GgufBackend, seq_id: int) -> tuple[int, int]:
    """What llama.cpp itself says sequence `seq_id` holds: (first position, last position)."""
    mem = llama_cpp.llama_get_memory(backend._llama.context_pointer)
    return llama_cpp.llama_memory_seq_pos_min(mem, seq_id), llama_cpp.llama_memory_seq_pos_max(mem, seq_id)


def test_a_conversation_switched_away_from_is_saved_and_leaves_the_kv_cache(backend, starter_model: Path):
    """Not parked: a parked chat would widen the live chat's attention over the unified cache."""
    backend.load(LoadRequest(str(starter_model), n_ctx=2048))
    assert llama_cpp.llama_n_seq_max(backend._llama.context_pointer) > 1  # for pinned prompts
    a, b = topic("apples"), topic("boats")
    a1 = generate(backend, a)
    generate(backend, b)
    seqs = backend._prefixes.seqs
    assert seqs.parked == () and seqs.used_cells() == len(seqs.live_tokens)
    (saved,) = list(backend._cache)
    assert saved.tokens[: a1.stats.prompt_tokens] == tokens_of(backend, a)
    a2 = generate(backend, [*a, ChatMessage("assistant", a1.text), ChatMessage("user", "And pears?")])
    assert a2.stats.cached_tokens >= a1.stats.prompt_tokens
    assert a2.stats.prompt_tokens - a2.stats.cached_tokens < 30
    assert seq_span(backend, 0) == (0, len(seqs.live_tokens) - 1)


def test_a_chat_with_a_pinned_system_prompt_shares_its_cells(backend, starter_model: Path):
    backend.load(LoadRequest(str(starter_model), n_ctx=2048, pinned_prompts=(SYSTEM,)))
    seqs = backend._prefixes.seqs
    (pinned,) = seqs.parked
    first = generate(backend, [ChatMessage("system", SYSTEM), ChatMessage("user", LONG_QUESTION)])
    second = generate(backend, [ChatMessage("system", SYSTEM), ChatMessage("user", "When do you open?")])
    system_tokens = len(pinned.tokens)
    assert first.stats.cached_tokens >= system_tokens > 150
    assert second.stats.cached_tokens >= system_tokens
    live = seqs.live_tokens
    # Both sequences start at position 0 in llama.cpp; the pinned prompt's cells are the live
    # chat's first cells, counted once.
    assert seq_span(backend, pinned.seq_id) == (0, system_tokens - 1) and seq_span(backend, 0)[0] == 0
    assert live[:system_tokens] == pinned.tokens
    assert seqs.used_cells() == len(live)
    assert backend._prefixes.sequence_tokens() == {0: live, pinned.seq_id: pinned.tokens}


def test_a_full_cache_keeps_conversations_in_ram_and_keeps_answering(backend, starter_model: Path):
    backend.load(LoadRequest(str(starter_model), n_ctx=1024))
    conversations = [topic(name, sentences=20) for name in ("ants", "bees", "cats", "dogs", "eels", "fish")]
    firsts = [generate(backend, c) for c in conversations]
    n_ctx = backend._llama.n_ctx
    seqs = backend._prefixes.seqs
    assert all(d.finish_reason in ("stop", "length") for d in firsts)
    assert firsts[0].stats.prompt_tokens * len(conversations) > n_ctx  # they cannot all stay
    assert seqs.used_cells() <= n_ctx
    assert len(backend._cache) >= 1  # evicted ones kept their state in RAM
    again = generate(backend, conversations[0])  # evicted long ago: back from RAM
    assert again.stats.cached_tokens == firsts[0].stats.prompt_tokens - 1
    assert again.finish_reason == firsts[0].finish_reason and again.stats.gen_tokens > 0


def test_a_state_restored_from_ram_gives_the_logits_of_a_recomputation(backend, starter_model: Path):
    """Bit for bit: restoring is exact. (Comparing the text of two runs would also compare how
    llama.cpp splits batches: its kernels round differently for one token and for many.)"""
    backend.load(LoadRequest(str(starter_model), n_ctx=1024))
    llm, seqs = backend._llama, backend._prefixes.seqs
    tokens = list(tokens_of(backend, topic("ants")))
    unused = lambda: None  # noqa: E731 - the cache never fills here

    def last_logits() -> np.ndarray:
        row = llama_cpp.llama_get_logits_ith(llm.context_pointer, -1)
        return np.ctypeslib.as_array(row, shape=(llm.n_vocab,)).copy()

    seqs.clear_live()
    seqs.decode(tokens, unused)
    state = llm.save_state(0)
    seqs.clear_live()
    seqs.decode(tokens[:-1], unused)
    seqs.decode(tokens[-1:], unused)
    recomputed = last_logits()
    seqs.clear_live()
    assert state is not None and llm.restore_state(state, 0)
    seqs.live_restored(tokens)
    assert seqs.trim_live(len(tokens) - 1)
    seqs.decode(tokens[-1:], unused)
    assert np.array_equal(last_logits(), recomputed)


def test_a_pinned_system_prompt_is_prefilled_at_load_and_evicted_last(backend, starter_model: Path):
    backend.load(LoadRequest(str(starter_model), n_ctx=1024, pinned_prompts=(SYSTEM,)))
    system = tokens_of(backend, [ChatMessage("system", SYSTEM)], add_generation_prompt=False)
    (pinned,) = backend._prefixes.seqs.parked
    assert pinned.pinned and pinned.tokens == system
    first = generate(backend, [ChatMessage("system", SYSTEM), ChatMessage("user", "Hello.")])
    assert first.stats.cached_tokens >= len(system)  # the very first message after loading
    for name in ("ants", "bees", "cats", "dogs"):
        generate(backend, topic(name, sentences=20))
        parked = backend._prefixes.seqs.parked
        assert any(p.pinned for p in parked) or any(e.pinned for e in backend._cache)
    later = generate(backend, [ChatMessage("system", SYSTEM), ChatMessage("user", "Bye.")])
    assert later.stats.cached_tokens >= len(system)


def test_greedy_output_after_a_restore_from_ram_equals_the_chat_that_never_left(backend, starter_model: Path):
    """The next turn of a chat restored from RAM says what it says when the chat stays in its slot.

    Both runs take the same path through llama.cpp (the first turn prefilled and decoded the same way, its
    next turn prefilled after it), the one only with a save and a restore in between. A cold run of the
    second turn is no baseline: it prefills the first reply as part of a batch where the first run decoded it
    token by token, and llama.cpp's kernels round those differently (a near tie in the reply flipped 1 run
    in 4). Threads fixed: the engine's own choice follows what other programs use of the cores.
    """
    conversations = [topic(name, sentences=20) for name in ("ants", "bees", "cats", "dogs", "eels")]
    backend.load(LoadRequest(str(starter_model), n_ctx=1024, n_threads=2))
    backend._cache.clear()  # nothing another test left: the first turn is prefilled here
    first = generate(backend, conversations[0])
    for c in conversations[1:]:
        generate(backend, c)
    turn2 = [*conversations[0], ChatMessage("assistant", first.text), ChatMessage("user", "Say more.")]
    restored = generate(backend, turn2)
    assert restored.stats.cached_tokens >= first.stats.prompt_tokens

    backend.load(LoadRequest(str(starter_model), n_ctx=1024, n_threads=2))
    backend._cache.clear()
    again = generate(backend, conversations[0])
    assert again.text == first.text and again.stats.cached_tokens == 0
    stayed = generate(backend, turn2)
    assert stayed.stats.cached_tokens == restored.stats.cached_tokens  # the same prefix, from the slot itself
    assert restored.text == stayed.text and restored.stats.gen_tokens == stayed.stats.gen_tokens
