"""The model's latest replies, kept for drafts: a request asked again drafts its earlier reply."""

from __future__ import annotations

from engine.gguf.prompt_lookup import MAX_MATCH, PromptLookup
from engine.gguf.reply_memory import ReplyMemory

PROMPT = list(range(1000, 1100))
REPLY = list(range(2000, 2040))


def _all(_match: int) -> int:
    return 64


def test_the_same_prompt_again_drafts_the_earlier_reply_from_its_first_token():
    memory = ReplyMemory()
    memory.add([*PROMPT, *REPLY], len(PROMPT))
    again = PromptLookup(())
    # The new reply's first token is out: its tail matches the earlier prompt's end and first token.
    drafts = again.follow([*PROMPT, REPLY[0]], _all, memory.lookup)
    assert drafts == REPLY[1:]  # the whole earlier reply, and nothing past its end
    assert memory.lookup.match_of([*PROMPT, REPLY[0]])[1] == MAX_MATCH


def test_the_conversation_wins_where_it_matches_as_long():
    memory = ReplyMemory()
    memory.add([7, 8, 9, 1, 2, 3], 3)
    # "8 9" is followed by 5 in the conversation and by 1 in the memory: the conversation's own follows.
    assert PromptLookup(()).follow([8, 9, 5, 6, 8, 9], _all, memory.lookup) == [5, 6, 8, 9]
    # Where the memory's match is longer, its passage is followed.
    assert PromptLookup(()).follow([6, 7, 8, 9], _all, memory.lookup) == [1, 2, 3]


def test_a_prompt_alone_or_an_empty_reply_adds_nothing():
    memory = ReplyMemory()
    memory.add(PROMPT, len(PROMPT))
    assert len(memory.lookup) == 0


def test_the_oldest_replies_go_first_and_the_memory_stays_bounded():
    memory = ReplyMemory(most_tokens=1_000)
    for i in range(40):
        memory.add([*PROMPT, *(t + 10_000 * i for t in REPLY)], len(PROMPT))
        assert len(memory.lookup) <= 1_000
    newest = [t + 10_000 * 39 for t in REPLY]
    assert PromptLookup(()).follow([*PROMPT, newest[0]], _all, memory.lookup) == newest[1:]
    oldest = REPLY
    assert memory.lookup.match_of([9, 9, oldest[0], oldest[1]]) == (0, 0)  # forgotten


def test_a_copy_is_found_where_it_was_not_only_where_the_tail_last_occurred():
    """Every reply opens with the template's tokens: the latest reply's opening is no reason to lose an older
    reply that the new one is copying, found by its last COPY_NGRAM tokens."""
    memory = ReplyMemory()
    header = [1, 2, 3]  # the assistant header and a first word every reply shares
    memory.add([*PROMPT, *header, *REPLY], len(PROMPT))
    memory.add([*range(5000, 5100), *header, 7, 7, 7], 100)  # a newer reply to another prompt, same opening
    drafts = PromptLookup(()).follow([*PROMPT, *header], _all, memory.lookup)
    assert drafts == REPLY  # without the long index: [7, 7, 7], the newer reply's
