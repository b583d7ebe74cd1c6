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


def test_the_match_says_how_far_back_the_tail_agrees_with_the_passage_it_follows():
    passage = list(range(100, 140))
    lookup = PromptLookup([1, 2, *passage, 3, 4, *passage[:20]])
    start, match = lookup.find()
    assert lookup.draft(5) == passage[20:25]
    assert match == 20 and start == 2 + 20  # the 20 copied tokens agree; the token before them does not
    lookup = PromptLookup([7, 8, 9, 5, 8, 9])
    assert lookup.find() == (3, 2)  # "8 9" was followed by 5; the tokens before the two (7 and 5) differ
    assert PromptLookup([1, 2, 3]).find() == (0, 0)


def test_a_drafter_is_told_the_match_and_drafts_what_its_limit_allows():
    passage = list(range(100, 180))
    lookup = PromptLookup([*passage, 5])
    asked: list[int] = []

    def limit_for(match: int) -> int:
        asked.append(match)
        return 16 if match >= 12 else 2

    assert lookup.follow([*passage, 5, *passage[:3]], limit_for) == passage[3:5]  # a 3-token match: 2 drafts
    assert lookup.follow([*passage, 5, *passage[:30]], limit_for) == passage[30:46]  # 30 tokens copied: 16
    assert asked == [3, 30]
    assert lookup.follow([*passage, 5, *passage[:30], 999], limit_for) == [] and asked == [3, 30]  # no match


def test_a_passage_being_copied_drafts_long_while_the_model_keeps_its_drafts():
    from engine.gguf.speculation import LONG_DRAFT_TOKENS, LONG_MATCH, DraftPolicy, StepFigures

    def cpu_cost(n: int) -> float:  # 2 cores, the starter model: a row of a batch costs 0.7 of a step
        return 0.0055 + 0.0037 * (n - 1)

    figures = StepFigures()
    policy = DraftPolicy("auto", max_draft=8, figures=figures)
    for _ in range(3):  # a reply that does not repeat itself: the model keeps 1 draft in 4
        policy.record(0, 0, cpu_cost(1))
        policy.record(8, 2, cpu_cost(9))
    assert policy.limit(100) == 0 and policy.limit(100, match=LONG_MATCH - 1) == 0  # plain is faster
    assert policy.limit(200, match=LONG_MATCH) == LONG_MATCH  # a copy: as far as it agreed so far
    assert policy.limit(200, match=LONG_DRAFT_TOKENS) == LONG_DRAFT_TOKENS
    policy.record(LONG_DRAFT_TOKENS, LONG_DRAFT_TOKENS, cpu_cost(LONG_DRAFT_TOKENS + 1))
    assert policy.limit(20, match=40) == 20  # never past the room left
    # The next reply starts from the step costs this one measured (the backend keeps them for a load).
    follower = DraftPolicy("auto", max_draft=8, figures=figures)
    assert follower.limit(200, match=64) == LONG_DRAFT_TOKENS
    assert follower.figures.step_cost(LONG_DRAFT_TOKENS + 1) == cpu_cost(LONG_DRAFT_TOKENS + 1)
    for _ in range(3):  # the copy stops matching: the model refuses the first draft every time
        assert follower.limit(200, match=64) == LONG_DRAFT_TOKENS or follower._copied is False
        follower.record(LONG_DRAFT_TOKENS, 0, cpu_cost(LONG_DRAFT_TOKENS + 1))
    assert follower.limit(200, match=64) == 0  # long drafts no longer pay, nor do short ones
    assert DraftPolicy("auto", max_draft=8, max_copy=8).limit(100, match=40) <= 8  # the user's cap holds
