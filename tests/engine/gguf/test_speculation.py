"""Speculative decoding by prompt lookup in the GGUF backend, on the starter model with real llama.cpp:
greedy replies identical token for token to plain decoding, the drafts it keeps counted, and the
cases where it must not draft."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from engine.gguf.backend import GgufBackend
from engine.protocol import ChatMessage, LoadRequest, SamplingParams
from models.plan.load_options import SpeculativeOptions
from tests.engine.helpers import reply

TEXT = (
    "The quarterly report shows revenue of 4.2 million dollars, up 12 percent from last year. "
    "Costs rose 3 percent, mostly from new hires in the support team. The board approved the "
    "budget for the new office in Lisbon, which opens in March."
)
REWRITE = [ChatMessage("user", f"Repeat this text exactly, word for word:\n\n{TEXT}")]
FREE = [ChatMessage("user", "Write a short poem about the sea.")]
GREEDY = SamplingParams(temperature=0.0, max_tokens=96)


def _load(backend: GgufBackend, starter_model: Path, mode: str, **extra: object) -> None:
    backend.load(LoadRequest(str(starter_model), n_ctx=2048, n_threads=2, prefix_cache_bytes=0,
                             speculation=SpeculativeOptions(mode), **extra))


@pytest.mark.parametrize("messages", [REWRITE, FREE], ids=["rewrite", "free"])
def test_greedy_replies_are_the_same_with_and_without_drafts(backend, starter_model, messages):
    _load(backend, starter_model, "off")
    plain = reply(backend, messages, GREEDY)
    assert plain.stats.draft_acceptance is None
    for mode in ("lookup", "auto"):
        _load(backend, starter_model, mode)
        drafted = reply(backend, messages, GREEDY)
        assert drafted.text == plain.text, mode
        assert (drafted.finish_reason, drafted.stats.gen_tokens) == (plain.finish_reason, plain.stats.gen_tokens)


def test_a_rewrite_keeps_most_of_its_drafts(backend, starter_model):
    _load(backend, starter_model, "lookup")
    done = reply(backend, REWRITE, GREEDY)
    assert TEXT[:40] in done.text
    assert done.stats.draft_acceptance is not None and done.stats.draft_acceptance > 0.5, done.stats


def test_the_kv_cache_holds_exactly_the_conversation_after_a_drafted_reply(backend, starter_model):
    """Refuted drafts leave no cells behind: the next turn reuses the prefix as after plain decoding (a
    last token the sampler accepted from the drafts is in the cache already: one more reused)."""
    _load(backend, starter_model, "lookup")
    first = reply(backend, REWRITE, GREEDY)
    follow = [*REWRITE, ChatMessage("assistant", first.text), ChatMessage("user", "Thanks. Now say it shorter.")]
    second = reply(backend, follow, GREEDY)
    _load(backend, starter_model, "off")
    reply(backend, REWRITE, GREEDY)
    plain = reply(backend, follow, GREEDY)
    assert second.text == plain.text
    assert plain.stats.cached_tokens <= second.stats.cached_tokens <= plain.stats.cached_tokens + 1
    assert plain.stats.cached_tokens > 0


def test_sampled_replies_draft_too_and_stay_within_max_tokens(backend, starter_model):
    _load(backend, starter_model, "lookup")
    sampling = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=40, seed=7)
    done = reply(backend, REWRITE, sampling)
    assert 0 < done.stats.gen_tokens <= 40 and done.stats.draft_acceptance is not None
    again = reply(backend, REWRITE, sampling)
    assert again.text == done.text  # the same seed draws the same reply


def test_a_stop_string_inside_accepted_drafts_ends_the_reply_there(backend, starter_model):
    _load(backend, starter_model, "lookup")
    done = reply(backend, REWRITE, replace(GREEDY, stop=("Lisbon",)))
    assert "Lisbon" not in done.text and done.finish_reason == "stop" and done.text.strip()


def test_a_request_asked_again_drafts_the_earlier_reply_whole(backend, starter_model):
    """The model's latest replies are drafted from too (reply_memory.py): an answer asked again, which its
    prompt holds nothing of, is drafted from its first copy, and comes out the same."""
    question = [ChatMessage("user", "Explain what a CPU does, in one paragraph.")]
    _load(backend, starter_model, "auto")
    first = reply(backend, question, GREEDY)
    again = reply(backend, question, GREEDY)
    assert again.text == first.text and again.stats.gen_tokens > 30
    assert again.stats.draft_acceptance is not None and again.stats.draft_acceptance > 0.9, again.stats
    assert first.stats.draft_acceptance is None or first.stats.draft_acceptance < 0.5, first.stats
    _load(backend, starter_model, "auto")  # another load forgets what the last one wrote
    assert (reply(backend, question, GREEDY).stats.draft_acceptance or 0) < 0.5
