"""A finished chat reply's next turn, prefilled while the engine is idle.

What a reply's slot holds after it ended is not what the next turn sends back: the templates of
reasoning models drop earlier turns' thinking (Qwen3, QwQ, DeepSeek-R1, gpt-oss), every template
closes the turn with tokens the model did not write (ChatML's `<|im_end|>\\n`), and calls of tools
are rendered the template's own way. Left alone, the next turn shares the history only up to the
reply's start, and prefills its answer again: 7.1% of a cold prefill for a reasoning chat's next
turn at 2,000 tokens, against 4.6% for a plain chat. While nothing runs, each finished slot is
brought to the history as the template will render it, up to where the user's next message
begins; the next turn then prefills that message alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from engine.backend import BackendError
from engine.gguf.kv_sequences import KvCacheFull
from engine.gguf.prefix_cache import common_prefix_len
from engine.gguf.prefix_reuse import PrefixReuse
from engine.protocol import ChatMessage, Done, GenerateRequest

log = logging.getLogger(__name__)

# Two next messages: the tokens both prompts share are what any next message's prompt shares.
PROBES = ("a", "b")


@dataclass(slots=True, frozen=True)
class FinishedTurn:
    """A chat reply that ended in `slot`, while the slot still holds what it did then (`held`)."""

    slot: int
    held: tuple[int, ...]
    request: GenerateRequest
    done: Done


def next_turn_tokens(render: Callable[[list[ChatMessage]], str], tokenize: Callable[[str], list[int]],
                     turn: FinishedTurn) -> list[int]:
    """The tokens every next turn's prompt starts with: the history with the reply's answer, rendered
    as the template renders an earlier turn (empty when the template cannot render it)."""
    answer = ChatMessage("assistant", turn.done.text, tool_calls=turn.done.tool_calls)
    history = [*turn.request.messages, answer]
    try:
        first, second = (tokenize(render([*history, ChatMessage("user", p)])) for p in PROBES)
    except BackendError as exc:  # a template that refuses the history as it stands: nothing to warm
        log.debug("no next-turn warm-up: %s", exc)
        return []
    return first[: common_prefix_len(first, second)]


class NextTurns:
    """Finished chat replies, one per slot, waiting for the engine to be idle."""

    def __init__(self) -> None:
        self._waiting: dict[int, FinishedTurn] = {}

    def finished(self, turn: FinishedTurn) -> None:
        self._waiting[turn.slot] = turn

    def clear(self) -> None:
        self._waiting.clear()

    def warm(self, prefixes: PrefixReuse, tokens_of: Callable[[FinishedTurn], list[int]]) -> int:
        """Bring each waiting slot that still holds its reply to its next turn's history (`tokens_of`);
        how many tokens were prefilled in all."""
        prefilled = 0
        waiting, self._waiting = self._waiting, {}
        for turn in waiting.values():
            if prefixes.seqs.tokens_of(turn.slot) != turn.held:  # another reply ran there since
                continue
            tokens = tokens_of(turn)
            try:
                prefilled += prefixes.extend_to(tokens, turn.slot)
            except KvCacheFull:  # no room without evicting live work: the next turn prefills as before
                log.debug("no room to warm slot %d's next turn", turn.slot)
        return prefilled
