"""What every backend does the same around its own decode loop: check the prompt (prompt.py renders it), hold
back stop strings, stream text, time the reply and sum it up in a Done.

The GGUF and PyTorch backends differ in how they get the next token; everything a user sees of a
reply (the error for a prompt that does not fit, when a stop string ends it, TTFT and tok/s) comes
from here, so both say it the same way.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Protocol

from engine.backend import BackendError
from engine.protocol import Done, FinishReason, GenerateRequest, GenerationStats
from engine.reply.text import ReplyText

if TYPE_CHECKING:
    from engine.reply.shape import ShapedPrompt

log = logging.getLogger(__name__)


def check_fits(prompt_tokens: int, n_ctx: int) -> None:
    """Refuse a prompt that leaves no room in the context (BackendError "context_overflow")."""
    if prompt_tokens >= n_ctx:
        raise BackendError(
            "context_overflow",
            f"The conversation is {prompt_tokens} tokens long; the context holds {n_ctx}. "
            "Start a new chat or raise the context length.",
        )


class Emit(Protocol):
    """Where a reply's text goes as it comes: the answer, or with `reasoning` its reasoning."""

    def __call__(self, text: str, reasoning: bool = False) -> None: ...


class ReplyStream:
    """One reply as its tokens come: call `token()` when each is sampled, `add()` with its text."""

    def __init__(self, request: GenerateRequest, prompt_tokens: int, emit: Emit, t_start: float,
                 shaped: ShapedPrompt | None = None):
        """`t_start`: when the request arrived (before rendering), the start of its time to first token;
        `shaped`: how to read the reply (reasoning, tool calls), None for plain text."""
        self._request, self._prompt_tokens = request, prompt_tokens
        self._text = ReplyText(request.sampling.stop, lambda text, reasoning: emit(text, reasoning) if reasoning
                               else emit(text), shaped)
        self._t_start = t_start
        self._t_first: float | None = None
        self._t_last: float | None = None
        self._t_answer: float | None = None
        self.n_gen = 0

    @property
    def stopped(self) -> bool:
        """A stop string has appeared: the reply is over."""
        return self._text.stopped

    @property
    def in_answer(self) -> bool:
        """The reasoning is over (or there is none): a grammar of the answer applies from the next token."""
        return self._text.in_answer

    def token(self) -> None:
        """A token was sampled (an end-of-generation one too): the clock of TTFT and decode speed."""
        now = time.perf_counter()
        if self._t_first is None:
            self._t_first = now
        self._t_last = now

    def add(self, text: str) -> None:
        """A generated token's text: its reasoning streamed apart, its answer once no stop string can start in it."""
        self.n_gen += 1
        self._text.feed(text)
        if self._t_answer is None and self._text.in_answer:
            self._t_answer = time.perf_counter()

    def close_reasoning(self, force: bool = False) -> str | None:
        """The text the engine writes into the reply now to end its reasoning (its budget is spent, or
        `force`), or None."""
        return self._text.close_now(force)

    def done(
        self, finish: FinishReason, cached_tokens: int, tail: str = "", draft_acceptance: float | None = None
    ) -> Done:
        """The reply's Done; `tail` is text the decoder still held (dropped when cancelled)."""
        parts = self._text.end(finish == "cancelled", tail)
        t_end = time.perf_counter()
        t_first = self._t_first or t_end
        prefill_s = max(t_first - self._t_start, 1e-9)
        decode_s = (self._t_last or t_end) - t_first
        n = self.n_gen
        stats = GenerationStats(
            ttft_s=prefill_s,
            prompt_tokens=self._prompt_tokens,
            cached_tokens=cached_tokens,
            gen_tokens=n,
            prefill_tok_s=(self._prompt_tokens - cached_tokens) / prefill_s,
            decode_tok_s=(n - 1) / decode_s if n > 1 and decode_s > 0 else 0.0,
            draft_acceptance=draft_acceptance,
            reasoning_tokens=self._text.reasoning_tokens,
            reasoning_s=((self._t_answer or t_end) - t_first) if self._text.reasoning_tokens else 0.0,
        )
        answer = parts.answer
        if parts.tool_calls:
            finish = "tool_calls" if finish == "stop" else finish
            answer = answer if answer.strip() else ""  # the whitespace around calls is no content
        stop_string = self._text.stop_string if finish == "stop" else None
        return Done(self._request.request_id, answer, finish, stats, parts.reasoning, parts.tool_calls,
                    parts.reasoning_closed, stop_string)
