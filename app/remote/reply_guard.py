"""ReplyGuard: the limits Tailor keeps on a remote reply itself, whatever the server does.

A server may ignore `max_tokens`, send keep-alives forever, or send tokens of megabytes. The
guard counts what came: at `max_tokens` tokens the reply is complete (a length-limited finish,
as a local model's), text past a generous budget per token is dropped, and a stream that
carries no token for `idle_s` seconds (only pings, empty events) fails with a clear error.
A server that says nothing at all is the read timeout's business.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

IDLE_TIMEOUT_S = 120.0  # as long as the read timeout: keep-alives during a long prefill are no worse than silence
# Far above any real token (a few characters; the longest vocabulary entries are runs of spaces or dashes):
# what a reply of `max_tokens` tokens may hold even when a server packs several tokens in one event.
MAX_TOKEN_CHARS = 256
# After `max_tokens`, the events read for the finish reason and the usage a correct server sends next.
TAIL_EVENTS = 4
TAIL_S = 2.0


class IdleStream(Exception):
    """Events keep coming but none carries a token."""


@dataclass(slots=True)
class ReplyGuard:
    """Counts one reply's tokens and watches the time since the last one.

    Args:
        max_tokens: the tokens the reply may have (the request's `max_tokens`).
        idle_s: the longest time without a token while events still come.
    """

    max_tokens: int
    idle_s: float = IDLE_TIMEOUT_S
    tokens: int = 0
    chars: int = 0
    last_token: float = field(default_factory=time.monotonic)

    @property
    def char_budget(self) -> int:
        return max(self.max_tokens, 1) * MAX_TOKEN_CHARS

    @property
    def full(self) -> bool:
        """The reply has all it may have: nothing more is taken."""
        return self.tokens >= self.max_tokens or self.chars >= self.char_budget

    def take(self, text: str) -> str:
        """Count one token (a piece of the reply) and return what of it fits the budget."""
        self.tokens += 1
        self.last_token = time.monotonic()
        text = text[: self.char_budget - self.chars]
        self.chars += len(text)
        return text

    def watch(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        """Pass the stream's chunks on; IdleStream once `idle_s` passed since the last token.

        Checked as each chunk arrives: whatever a chunk holds (pings, empty events), only a token
        resets the clock.
        """
        self.last_token = time.monotonic()
        for chunk in chunks:
            if time.monotonic() - self.last_token > self.idle_s:
                raise IdleStream(f"sent no token for {self.idle_s:g} s, only keep-alives or empty events")
            yield chunk
