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


def test_drafts_are_as_long_as_pays_by_the_measured_step_costs():
    from engine.gguf.speculation import DraftPolicy

    gpu = DraftPolicy("auto", max_draft=8)
    for _ in range(3):  # a batch costs what a token does (a GPU): long drafts pay once the model keeps them
        gpu.record(0, 0, 0.010)
        gpu.record(8, 8, 0.011)
    assert gpu.limit(100) == 8 and gpu.limit(3) == 3  # never past the room left
    cpu = DraftPolicy("auto", max_draft=8)
    for _ in range(3):  # a 2-core CPU: 9 tokens cost 5 plain steps; the model keeps 1 draft in 3
        cpu.record(0, 0, 0.006)
        cpu.record(8, 1, 0.031)
    assert cpu.limit(100) == 0 and cpu.acceptance == 3 / 24  # plain decoding is faster
    forced = DraftPolicy("lookup", max_draft=8)
    forced.record(0, 0, 0.006)
    forced.record(8, 1, 0.031)
    assert forced.limit(100) >= 1  # lookup drafts all the same


def test_auto_looks_again_after_a_run_of_plain_steps():
    from engine.gguf.speculation import EXPLORE_DRAFT, EXPLORE_EVERY, DraftPolicy

    policy = DraftPolicy("auto")
    for _ in range(3):
        policy.record(0, 0, 0.006)
        policy.record(4, 0, 0.030)
    for _ in range(EXPLORE_EVERY - 1):
        assert policy.limit(100) == 0
        policy.record(0, 0, 0.006)
    assert policy.limit(100) == 0
    policy.record(0, 0, 0.006)
    assert policy.limit(100) == EXPLORE_DRAFT  # a short draft, to see whether the reply repeats now
    policy.record(EXPLORE_DRAFT, 0, 0.014)  # it kept nothing: the next try waits twice as long
    for _ in range(2 * EXPLORE_EVERY):
        assert policy.limit(100) == 0
        policy.record(0, 0, 0.006)
    assert policy.limit(100) == EXPLORE_DRAFT
    assert DraftPolicy("off").limit(100) == 0


def test_a_run_of_kept_drafts_is_expected_to_go_on():
    from engine.gguf.speculation import DraftPolicy

    policy = DraftPolicy("auto", max_draft=8)
    policy.record(0, 0, 0.006)
    for _ in range(3):  # CPU costs: runs of full steps, runs of misses
        for kept in (8, 8, 8, 8, 8, 0, 0, 0, 0, 0):
            policy.record(8, kept, 0.031)
    policy.record(8, 8, 0.031)
    after_full = policy.limit(100)
    policy.record(8, 0, 0.031)
    assert after_full == 8 and policy.limit(100) < after_full  # a run goes on; after a miss, less or none
