"""A text's tokens counted by the loaded model's own tokenizer, through the engine's CountTokensRequest.

The engine counts whole prompts (the chat template rendered around the messages), so a text's tokens are
the prompt of one user message holding it less the prompt of an empty one: the template's markers cancel
out. Each count is a round trip to the engine process; callers count a few dozen texts per message.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from engine.interface import EngineNotRunning
from engine.interface import TokenCounter as EngineCounter
from engine.protocol import ChatMessage, Error, Event, TokenCount

# How long a count may take before the engine is taken for gone: tokenizing is milliseconds a page.
COUNT_TIMEOUT_S = 60.0


class TokenCountFailed(RuntimeError):
    """The engine could not count (it died, or answered with an error)."""


@dataclass(slots=True)
class EngineTokens:
    """Callable as a chunking.TokenCounter: `tokens(text)` counts with the engine's tokenizer."""

    engine: EngineCounter
    timeout: float = COUNT_TIMEOUT_S
    _empty: int | None = field(default=None, init=False)

    def prompt(self, messages: list[ChatMessage]) -> int:
        """The tokens of the prompt `messages` make, template included (what a reply's stats count)."""
        answered = threading.Event()
        answer: list[Event] = []

        def on_event(event: Event) -> None:  # on the engine client's reader thread
            answer.append(event)
            answered.set()

        try:
            self.engine.count_tokens(messages, on_event=on_event)
        except EngineNotRunning as exc:
            raise TokenCountFailed(f"the engine could not count tokens ({exc})") from None
        if not answered.wait(self.timeout):
            raise TokenCountFailed(f"the engine did not count tokens within {self.timeout:.0f} s")
        event = answer[0]
        if isinstance(event, TokenCount):
            return event.tokens
        message = event.message if isinstance(event, Error) else type(event).__name__
        raise TokenCountFailed(f"the engine could not count tokens ({message})")

    def __call__(self, text: str) -> int:
        if self._empty is None:
            self._empty = self.prompt([ChatMessage("user", "")])
        return max(0, self.prompt([ChatMessage("user", text)]) - self._empty)

