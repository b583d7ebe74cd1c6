"""What a remote reply added up to, kept as it streams: its answer, its reasoning, when each came, and the
Done the local engine would send for it (the same stats fields, so the window and `tailor chat` say the
same of both), with the tool calls it made."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from app.remote.tool_call_tally import ToolCallTally
from engine.protocol import Done, FinishReason, GenerationStats, Token, ToolCall


@dataclass(slots=True)
class ReplyTally:
    request_id: int
    calls: ToolCallTally | None = None  # the tool calls as they come; None: the reply may call none
    t0: float = field(default_factory=time.perf_counter)  # the request sent
    pieces: list[str] = field(default_factory=list)  # the answer's
    thoughts: list[str] = field(default_factory=list)  # the reasoning's (the server's reasoning_content)
    thought_tokens: int = 0  # reasoning pieces taken: the count when the server gives none (as a local one's)
    t_first: float | None = None
    t_last: float | None = None
    t_answer: float | None = None
    made: tuple[ToolCall, ...] = ()  # the calls, once the reply ended as it should

    def take_calls(self) -> None:
        """The calls, complete: the reply ended as it should (MalformedStream: one has no function name)."""
        if self.calls is not None:
            self.made = self.calls.result()

    def heard(self, kept: str, shown: bool) -> Token | None:
        """One piece the guard let through (`kept`, maybe cut to ""): the Token to pass on, if any."""
        now = time.perf_counter()
        self.t_first = self.t_first or now
        self.t_last = now
        if shown and kept:
            self.t_answer = self.t_answer or now
            self.pieces.append(kept)
            return Token(self.request_id, kept)
        if not shown:
            self.thought_tokens += 1
            if kept:
                self.thoughts.append(kept)
                return Token(self.request_id, kept, reasoning=True)
        return None

    def done(self, finish: FinishReason, counts: ReplyCounts) -> Done:
        """The reply's Done. `counts`: the server's figures, or the guard's where they are not of what was kept."""
        t_end = time.perf_counter()
        t_first = self.t_first or t_end
        reasoning_tokens = self.thought_tokens
        # The server's figure, unless the guard cut the reply or it says 0 beside reasoning that came (a
        # server that fills OpenAI's field without counting).
        if counts.reasoning is not None and (counts.reasoning or not self.thought_tokens):
            reasoning_tokens = counts.reasoning
        gen = counts.generated
        decode_s = (self.t_last or t_end) - t_first
        stats = GenerationStats(
            ttft_s=t_first - self.t0,
            prompt_tokens=counts.prompt,  # None: the server did not say
            cached_tokens=counts.cached,
            gen_tokens=gen,
            prefill_tok_s=0.0,  # not known from outside the server
            decode_tok_s=(gen - 1) / decode_s if gen > 1 and decode_s > 0 else 0.0,
            reasoning_tokens=reasoning_tokens,
            # As the local engine times it: from the first token to the answer's first (or the end).
            reasoning_s=(self.t_answer or t_end) - t_first if self.thought_tokens else 0.0,
        )
        answer = "".join(self.pieces)
        if self.made and finish == "stop":  # as the local engine's: the whitespace around calls is no content
            finish, answer = "tool_calls", answer if answer.strip() else ""
        return Done(self.request_id, answer, finish, stats, reasoning="".join(self.thoughts),
                    tool_calls=self.made if finish == "tool_calls" else (),
                    reasoning_closed=bool(self.pieces) or not self.thoughts)


@dataclass(frozen=True, slots=True)
class ReplyCounts:
    """The token counts a Done reports: generated ones, and the server's others (None where unknown)."""

    generated: int
    prompt: int | None = None
    cached: int | None = None
    reasoning: int | None = None
