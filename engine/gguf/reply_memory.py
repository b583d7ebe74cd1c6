"""What the model wrote lately, kept for drafts: a reply asked again (regenerate, a client's retry) or a
file rewritten turn after turn follows a passage of an earlier reply, often from its first token on.

Each finished reply is kept with the end of its prompt before it (a match looks back that far), apart
from the others by a separator no tail can match, in one n-gram index (prompt_lookup.py) bounded by
tokens: the oldest replies go first. llama-server's ngram-mod keeps its n-gram table across requests too.
Drafts are only proposals the model verifies, so a draft from another chat changes no reply.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from engine.gguf.prompt_lookup import MAX_MATCH, PromptLookup

SEPARATOR = -1  # between two replies: no tail holds it, and a draft ends before it
MOST_TOKENS = 8_192  # kept at most (an index of about 5 MB: 19 MB at 32,768 tokens); the oldest replies go first


class ReplyMemory:
    """The latest replies of one loaded model, as an index drafts follow."""

    def __init__(self, most_tokens: int = MOST_TOKENS):
        self._most = most_tokens
        self._kept: deque[list[int]] = deque()
        self._size = 0
        self.lookup = PromptLookup(())

    def add(self, context: Sequence[int], prompt_len: int) -> None:
        """A reply ended: `context` is its prompt (the first `prompt_len` tokens) and the tokens it wrote."""
        if len(context) <= prompt_len:
            return
        kept = [*context[max(0, prompt_len - MAX_MATCH) :][-self._most :], SEPARATOR]
        self._kept.append(kept)
        self._size += len(kept)
        if self._size <= self._most:
            self.lookup.extend(kept)
            return
        while self._size > self._most // 2 and len(self._kept) > 1:  # rebuilt now and then, not per reply
            self._size -= len(self._kept.popleft())
        self.lookup = PromptLookup([token for kept in self._kept for token in kept])
