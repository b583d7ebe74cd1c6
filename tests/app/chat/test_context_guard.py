"""The window's count of a conversation's tokens before it is sent: the engine's own counts, and an
estimate that must not fall under what the starter model's real tokenizer counts."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import llama_cpp
import pytest

from app.chat.context_guard import MESSAGE_OVERHEAD, conversation_tokens, estimate_tokens, shortfall
from app.services.history.store import Message

SAMPLES = {
    "English prose": "The quick brown fox jumps over the lazy dog while the farmer watches from the porch. " * 20,
    "Python code": inspect.getsource(json.decoder),
    "French": "Le renard brun rapide saute par-dessus le chien paresseux pendant que le fermier regarde. " * 20,
    "German": "Der schnelle braune Fuchs springt über den faulen Hund, während der Bauer zuschaut. Größe! " * 20,
    "Chinese": "敏捷的棕色狐狸跳过了懒狗，农夫在门廊上看着。" * 20,
    "Russian": "Быстрая коричневая лиса перепрыгивает через ленивую собаку. " * 20,
    "emoji": "I love it 😀🎉👍 so much! " * 20,
    "digits": "3.14159265358979323846264338327950288419716939937510 " * 20,
    "JSON": '{"id": 12345, "name": "widget", "tags": ["a", "b"], "price": 9.99}\n' * 20,
    "capitals": "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG. " * 20,
    "hex": "0x7f3a9c2be4d1 deadbeefcafebabe 9f86d081884c7d659a2feaa0c55ad015 " * 20,
    "URLs": "https://example.com/path/to/some-resource?query=value&other=thing#frag " * 20,
}


@pytest.fixture(scope="module")
def vocab(starter_model: Path) -> llama_cpp.Llama:
    return llama_cpp.Llama(str(starter_model), vocab_only=True, verbose=False)


@pytest.mark.parametrize("kind", SAMPLES)
def test_the_estimate_is_at_least_the_real_count_and_at_most_twice_it(kind: str, vocab: llama_cpp.Llama):
    text = SAMPLES[kind]
    real = len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False))
    estimate = estimate_tokens(text) - MESSAGE_OVERHEAD
    assert real <= estimate <= 2 * real, (kind, real, estimate)


def message(i: int, role: str, content: str, stats: dict | None = None) -> Message:
    return Message(i, 1, role, content, "complete", stats, 0.0)


def test_the_engines_count_of_the_last_reply_is_used_and_only_what_follows_is_estimated():
    history = [
        message(1, "user", "x" * 9000),  # estimated, this would be ~2,600 tokens; the engine counted
        message(2, "assistant", "y" * 3000, {"prompt_tokens": 1000, "gen_tokens": 200}),
        message(3, "user", "And now?"),
    ]
    new = "One more question."
    expected = 1000 + 200 + MESSAGE_OVERHEAD + estimate_tokens("And now?") + estimate_tokens(new)
    assert conversation_tokens(history, "Be brief.", new) == expected


def test_without_stats_everything_is_estimated_with_the_system_prompt():
    history = [message(1, "user", "Hi"), message(2, "assistant", "Hello!", {"prompt_tokens": None})]
    total = conversation_tokens(history, "Be brief.", "Bye")
    assert total == sum(estimate_tokens(t) for t in ("Be brief.", "Hi", "Hello!", "Bye"))


def test_a_shortfall_offers_a_reload_only_when_the_largest_context_holds_it():
    assert shortfall([], "", "short", 24, 2048) is None
    long = "word " * 2000  # ~2,500 tokens estimated
    short = shortfall([], "", long, 512, 2048, 8192)
    assert short is not None and short.needed > 2048 and short.text == long and short.can_reload
    assert not shortfall([], "", long, 512, 2048, 2048).can_reload  # nothing larger fits
    assert not shortfall([], "", long, 512, 2048, short.needed - 1).can_reload  # larger, still too small
    assert not shortfall([], "", long, 512, 2048, None).can_reload  # not known


def test_a_messages_documents_count_as_their_block_was_counted():
    from dataclasses import replace

    from app.services.history.sent_documents import SentDocuments

    block = "word " * 4000  # the estimate would say far more than the 1,200 the tokenizer counted
    asked = replace(message(1, "user", "What is in it?"), documents=SentDocuments(block, tokens=1200))
    plain = conversation_tokens([message(1, "user", "What is in it?")], "", "And then?")
    assert conversation_tokens([asked], "", "And then?") == plain + 1200
    assert conversation_tokens([], "", "What is in it?", new_documents=1200) == \
        conversation_tokens([], "", "What is in it?") + 1200
    assert shortfall([], "", "Q", 100, 1300, documents=1200) is not None
    assert shortfall([], "", "Q", 10, 1300, documents=1200) is None
