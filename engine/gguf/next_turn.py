"""A finished chat reply's next turn, prefilled while the engine is idle.

What a reply's slot holds after it ended is not what the next turn sends back: the templates of
reasoning models drop earlier turns' thinking (Qwen3, QwQ, DeepSeek-R1, gpt-oss), every template
closes the turn with tokens the model did not write (ChatML's `<|im_end|>\\n`), and calls of tools
are rendered the template's own way. Left alone, the next turn shares the history only up to the
reply's start, and prefills its answer again: 7.1% of a cold prefill for a reasoning chat's next
turn at 2,000 tokens, against 4.6% for a plain chat. While nothing runs, each finished slot is
brought to the history as the template will render it, up to where the user's next message
begins; the next turn then prefills that message alone.

The warm-up gives way to any request that arrives: it prefills in chunks of WARM_CHUNK tokens and
stops between two when `interrupted()` says a request waits; what is left stays waiting for the
next idle moment. A request that came first only prefills the answer itself, as it would unwarmed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from engine.backend import BackendError
from engine.gguf.kv_sequences import KvCacheFull
from engine.gguf.prefix_cache import common_prefix_len
from engine.gguf.prefix_reuse import PrefixReuse
from engine.protocol import ChatMessage, Done, GenerateRequest

log = logging.getLogger(__name__)

# Two next messages: the tokens both prompts share are what any next message's prompt shares.
PROBES = ("a", "b")
# Tokens prefilled between two looks at `interrupted`: a request that arrives during the warm-up waits
# at most for one such chunk (a reasoning reply's answer can be hundreds of tokens).
WARM_CHUNK = 32


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

    def warm(self, prefixes: PrefixReuse, tokens_of: Callable[[FinishedTurn], list[int]],
             interrupted: Callable[[], bool] = lambda: False) -> int:
        """Bring each waiting slot that still holds its reply to its next turn's history (`tokens_of`),
        until `interrupted()`; how many tokens were prefilled in all. A turn cut short waits for the next
        call, from where it stopped."""
        prefilled = 0
        waiting, self._waiting = self._waiting, {}
        for turn in waiting.values():
            if interrupted():
                self._waiting.setdefault(turn.slot, turn)
                continue
            if prefixes.seqs.tokens_of(turn.slot) != turn.held:  # another reply ran there since
                continue
            tokens = tokens_of(turn)
            try:
                done, stopped = self._extend(prefixes, tokens, turn.slot, interrupted)
            except KvCacheFull:  # no room without evicting live work: the next turn prefills as before
                log.debug("no room to warm slot %d's next turn", turn.slot)
                continue
            prefilled += done
            if stopped:  # what the slot holds now is where the next call goes on from
                self._waiting.setdefault(turn.slot, replace(turn, held=prefixes.seqs.tokens_of(turn.slot)))
        return prefilled

    @staticmethod
    def _extend(prefixes: PrefixReuse, tokens: list[int], slot: int,
                interrupted: Callable[[], bool]) -> tuple[int, bool]:
        """Prefill `slot` towards `tokens` a chunk at a time; (tokens prefilled, whether cut short)."""
        prefilled = 0
        end = common_prefix_len(prefixes.seqs.tokens_of(slot), tokens)
        while end < len(tokens):
            if prefilled and interrupted():
                return prefilled, True
            end = min(end + WARM_CHUNK, len(tokens))
            added = prefixes.extend_to(tokens[:end], slot)
            if not added:  # the slot cannot be brought there (recurrent, a window gone): nothing to do
                break
            prefilled += added
        return prefilled, False
