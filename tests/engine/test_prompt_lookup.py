"""Prompt lookup drafts what followed the latest earlier occurrence of the conversation's tail."""

from __future__ import annotations

import time

import pytest

from engine.gguf.prompt_lookup import PromptLookup


def test_the_longest_tail_seen_before_drafts_what_followed_it():
    lookup = PromptLookup([1, 2, 3, 4, 5, 9, 2, 3])
    assert lookup.draft(3) == [4, 5, 9]  # "2 3" was followed by 4 5 9
    lookup.extend([4])
    assert lookup.draft(2) == [5, 9]


def test_the_latest_occurrence_wins_and_longer_matches_come_first():
    lookup = PromptLookup([7, 1, 8, 2, 1, 9, 3, 2, 1])
    # "2 1" occurred once, followed by 9; "1" alone was last followed by 9 too, but "3 2 1" never occurred.
    assert lookup.draft(1) == [9]
    lookup = PromptLookup([5, 1, 6, 1, 7, 1])
    assert lookup.draft(4) == [7, 1]  # "1" last followed by 7 (then the tail itself)


def test_no_earlier_occurrence_no_draft():
    assert PromptLookup([1, 2, 3]).draft(4) == []
    assert PromptLookup([]).draft(4) == []
    assert PromptLookup([1, 2, 1]).draft(0) == []


def test_bad_ngram_lengths_are_refused():
    with pytest.raises(ValueError, match="n-gram lengths"):
        PromptLookup([1], max_ngram=1, min_ngram=2)


def test_a_draft_costs_the_same_in_a_long_conversation():
    tokens = [i % 997 for i in range(20_000)]
    lookup = PromptLookup(tokens)
    t0 = time.perf_counter()
    for i in range(2_000):
        lookup.extend([i % 997])
        lookup.draft(8)
    per_token_s = (time.perf_counter() - t0) / 2_000
    assert per_token_s < 2e-4, per_token_s  # microseconds, not a scan of 20,000 tokens


def test_the_draft_length_follows_what_the_model_keeps():
    from engine.gguf.speculation import START_DRAFT_TOKENS, DraftPolicy

    policy = DraftPolicy("lookup", max_draft=8)
    assert policy.limit(100) == START_DRAFT_TOKENS
    policy.record(4, 4, 0.01)  # every draft kept: two more next time
    assert policy.limit(100) == 6 and policy.limit(3) == 3  # never past the room left
    policy.record(6, 6, 0.01)
    policy.record(8, 8, 0.01)
    assert policy.limit(100) == 8  # at most max_draft
    policy.record(8, 2, 0.01)  # a miss: one fewer
    assert policy.limit(100) == 7 and policy.acceptance == 20 / 26


def test_auto_stops_drafting_when_drafted_steps_make_tokens_slower():
    from engine.gguf.speculation import COOLDOWN_STEPS, DraftPolicy

    policy = DraftPolicy("auto")
    policy.record(0, 0, 0.010)  # a plain step: 10 ms a token
    policy.record(4, 0, 0.030)  # drafts refuted: 30 ms for one token
    assert [policy.limit(100) for _ in range(COOLDOWN_STEPS)] == [0] * COOLDOWN_STEPS
    assert policy.limit(100) > 0  # then it tries again
    lookup = DraftPolicy("lookup")
    lookup.record(0, 0, 0.010)
    lookup.record(4, 0, 0.030)
    assert lookup.limit(100) > 0  # lookup always drafts
    assert DraftPolicy("off").limit(100) == 0
