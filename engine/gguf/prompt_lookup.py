"""Prompt lookup: drafts for speculative decoding taken from the conversation itself.

A reply often repeats what came before (code being edited, a text being rewritten, names and
numbers quoted back): the tokens that followed the last time the reply's latest few tokens
appeared are a good guess at what comes next. No draft model, no extra memory: an index of the
n-grams seen so far, kept up to date as tokens are added, so a draft costs a few dict lookups.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_NGRAM = 3  # the longest match tried first: fewer, better drafts
MIN_NGRAM = 1  # a single-token match still drafts (short, cheap to verify)


class PromptLookup:
    """The n-gram index of a prompt and the reply so far.

    Args:
        tokens: the prompt.
        max_ngram / min_ngram: the match lengths tried, longest first.
    """

    def __init__(self, tokens: Sequence[int], max_ngram: int = MAX_NGRAM, min_ngram: int = MIN_NGRAM):
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"n-gram lengths must satisfy 1 <= min <= max, not {min_ngram}, {max_ngram}")
        self._max, self._min = max_ngram, min_ngram
        self._tokens: list[int] = []
        # n-gram -> the position just after its latest occurrence that has a token following it
        self._next: dict[tuple[int, ...], int] = {}
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
            self._tokens.append(token)

    def follow(self, context: Sequence[int], limit: int) -> list[int]:
        """Drafts after `context`, the indexed tokens and those added since (a backend's Drafter)."""
        self.extend(context[len(self._tokens) :])
        return self.draft(limit)

    def draft(self, limit: int) -> list[int]:
        """Up to `limit` tokens that followed the latest earlier occurrence of the longest tail that
        occurred before; [] when none did."""
        tokens, end = self._tokens, len(self._tokens)
        if limit <= 0:
            return []
        for n in range(min(self._max, end), self._min - 1, -1):
            start = self._next.get(tuple(tokens[end - n :]))
            if start is not None:
                return tokens[start : start + limit]
        return []
