"""Prompt lookup: drafts for speculative decoding taken from the conversation itself.

A reply often repeats what came before (code being edited, a text being rewritten, names and
numbers quoted back): the tokens that followed the last time the reply's latest few tokens
appeared are a good guess at what comes next. No draft model, no extra memory: an index of the
n-grams seen so far, kept up to date as tokens are added, so a draft costs a few dict lookups.

How far back the tail agrees with the passage found (the match) says how sure the guess is: a
match of a few tokens is a coincidence as often as not, one of a dozen or more is a passage being
copied, whose drafts the model keeps run after run (speculation.py drafts longer there).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

MAX_NGRAM = 3  # the longest n-gram looked up: fewer, better drafts
MIN_NGRAM = 1  # a single-token match still drafts (short, cheap to verify)
MAX_MATCH = 64  # how far back a match is followed (a longer one says nothing more)
# Passages are also indexed by this many tokens, so a copy is found wherever it was, not only where its
# last few tokens occurred last (every reply begins with the same template tokens, and often "The").
COPY_NGRAM = 12


class PromptLookup:
    """The n-gram index of a prompt and the reply so far.

    Args:
        tokens: the prompt.
        max_ngram / min_ngram: the n-gram lengths looked up, longest first.
    """

    def __init__(self, tokens: Sequence[int], max_ngram: int = MAX_NGRAM, min_ngram: int = MIN_NGRAM):
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"n-gram lengths must satisfy 1 <= min <= max, not {min_ngram}, {max_ngram}")
        self._max, self._min = max_ngram, min_ngram
        self._tokens: list[int] = []
        # n-gram -> the position just after its latest occurrence that has a token following it
        self._next: dict[tuple[int, ...], int] = {}
        self._copies: dict[tuple[int, ...], int] = {}  # … of the COPY_NGRAM-grams
        self.extend(tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    def extend(self, tokens: Sequence[int]) -> None:
        """Tokens added to the conversation (accepted reply tokens)."""
        for token in tokens:
            end = len(self._tokens)  # the n-grams ending just before `token` now have a follower
            for n in range(self._min, self._max + 1):
                if end >= n:
                    self._next[tuple(self._tokens[end - n : end])] = end
            if end >= COPY_NGRAM:
                self._copies[tuple(self._tokens[end - COPY_NGRAM : end])] = end
            self._tokens.append(token)

    def follow(self, context: Sequence[int], limit_for: Callable[[int], int],
               earlier: PromptLookup | None = None) -> list[int]:
        """Drafts after `context`, the indexed tokens and those added since (a backend's Drafter): as many
        as `limit_for(the match's length)` allows. `earlier`: other text to draft from (what the model wrote
        in earlier replies, reply_memory.py), where its match is longer than the conversation's own. Drafts
        end before any token below 0 (a media's, or a separator's): they are not the model's to write."""
        self.extend(context[len(self._tokens) :])
        source, (start, match) = self._tokens, self.find()
        if earlier is not None:
            other_start, other_match = earlier.match_of(self._tokens)
            if other_match > match:
                source, start, match = earlier._tokens, other_start, other_match
        if not match:
            return []
        drafts = source[start : start + limit_for(match)]
        cut = next((i for i, token in enumerate(drafts) if token < 0), len(drafts))
        return drafts[:cut]

    def draft(self, limit: int) -> list[int]:
        """Up to `limit` tokens that followed the latest earlier occurrence of the longest tail that
        occurred before; [] when none did."""
        start, match = self.find()
        return self._tokens[start : start + limit] if match and limit > 0 else []

    def find(self) -> tuple[int, int]:
        """match_of the indexed tokens themselves: their tail's latest earlier occurrence."""
        return self.match_of(self._tokens)

    def match_of(self, context: Sequence[int]) -> tuple[int, int]:
        """Where the tokens that followed the latest occurrence here of the tail of `context` begin (its last
        COPY_NGRAM tokens where they occurred, else the longest of its last few that did), and how many tokens
        before that tail agree with those before the occurrence (MAX_MATCH at most); (0, 0) when no tail
        occurred here."""
        tokens, end = self._tokens, len(context)
        copied = self._copies.get(tuple(context[end - COPY_NGRAM :])) if end >= COPY_NGRAM else None
        for n in range(min(self._max, end), self._min - 1, -1):  # with a copy found, its first n matches
            start = copied if copied is not None else self._next.get(tuple(context[end - n :]))
            if start is not None:
                match, most = n, min(MAX_MATCH, start, end)
                while match < most and tokens[start - 1 - match] == context[end - 1 - match]:
                    match += 1
                return start, match
        return 0, 0
