"""Where each piece of a reply's text goes: its reasoning, its answer, or a tool call held back.

The generated text runs through, in order: the reasoning splitter (the think block or analysis
channel is reasoning, streamed apart), the stop strings (they end the answer, not the reasoning),
then the tool-call stream (a call's text is held, not shown, and parsed at the end). A tool call
that does not parse, or does not match the tools it calls, is given back as the answer's text: the
user sees what the model wrote, and the reply ends as a plain "stop".
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.protocol import ToolCall
from engine.reply.reasoning_formats import ReasoningSplitter
from engine.reply.stop_strings import StopStringFilter
from engine.reply.tool_formats import ToolCallParseError, ToolCallStream, check_calls

if TYPE_CHECKING:
    from engine.reply.shape import ShapedPrompt

log = logging.getLogger(__name__)

Emit = Callable[[str, bool], None]  # (text, is reasoning)


@dataclass(frozen=True, slots=True)
class ReplyParts:
    """A reply's text once it ended."""

    answer: str
    reasoning: str
    tool_calls: tuple[ToolCall, ...]
    reasoning_closed: bool  # False: it ended inside its reasoning


class ReplyText:
    """Route one reply's text: `feed()` each token's text, `end()` once."""

    def __init__(self, stop: tuple[str, ...], emit: Emit, shaped: ShapedPrompt | None = None):
        self._emit = emit
        self._stops = StopStringFilter(stop)
        fmt = shaped.reasoning if shaped is not None else None
        self._splitter = ReasoningSplitter(fmt, shaped.inside) if fmt is not None else None
        self._budget = shaped.think_budget if shaped is not None else None
        self._close_text = fmt.budget_close if fmt is not None else ""
        self._calls = ToolCallStream(shaped.tool_format) if shaped is not None and shaped.tool_format else None
        self._tools = list(shaped.tools) if shaped is not None else []
        self._answer: list[str] = []  # shown
        self._held: list[str] = []  # passed the stop strings, held by the tool-call stream
        self._reasoning: list[str] = []
        self.reasoning_tokens = 0
        self._forced = False

    @property
    def stopped(self) -> bool:
        """A stop string appeared in the answer: the reply is over."""
        return self._stops.stopped

    @property
    def stop_string(self) -> str | None:
        """The stop string that ended the answer, if one did."""
        return self._stops.matched

    @property
    def in_answer(self) -> bool:
        """The reply is past its reasoning (or not in any): an answer's grammar applies from here. A reply
        that did not start inside a think block is in its answer from the first token: under a grammar
        it answers at once rather than open a block."""
        return self._splitter is None or not self._splitter.in_reasoning

    def feed(self, text: str) -> None:
        """One token's text."""
        if self._splitter is None:
            self._to_answer(text)
            return
        before = self._splitter.in_reasoning
        pieces = self._splitter.feed(text)
        # A token of the reasoning: inside the block, or opening or closing it.
        if before or self._splitter.in_reasoning or any(r for r, _ in pieces):
            self.reasoning_tokens += 1
        self._route(pieces)

    def close_now(self, force: bool = False) -> str | None:
        """The text that closes the reasoning, once, when its budget is spent or `force` (the engine
        writes it into the reply as if the model had, and the model answers after it)."""
        if self._forced or self._splitter is None or not self._splitter.in_reasoning:
            return None
        if not force and (self._budget is None or self.reasoning_tokens < self._budget):
            return None
        self._forced = True
        return self._close_text

    def end(self, cancelled: bool, tail: str = "") -> ReplyParts:
        """The reply's parts; `tail` is text the decoder still held (dropped when cancelled)."""
        closed = True
        if self._splitter is not None:
            if not cancelled:
                self._route(self._splitter.feed(tail) + self._splitter.flush())
            closed = not (self._splitter.in_reasoning and not self._splitter.reasoning_closed)
        elif not cancelled:
            self._to_answer(tail)
        if not cancelled:
            self._pass(self._stops.flush())
        calls = self._end_calls() if not cancelled else ()
        if cancelled and self._held:  # a call cut off: what the model wrote is the answer
            self._show("".join(self._held))
        return ReplyParts("".join(self._answer), "".join(self._reasoning), calls, closed)

    def _route(self, pieces: list[tuple[bool, str]]) -> None:
        for reasoning, text in pieces:
            if reasoning:
                if text:
                    self._reasoning.append(text)
                    self._emit(text, True)
            else:
                self._to_answer(text)

    def _to_answer(self, text: str) -> None:
        if text and not self._stops.stopped:
            self._pass(self._stops.feed(text))

    def _pass(self, text: str) -> None:
        """Answer text past the stop strings: shown, or held while it may be a tool call."""
        if not text:
            return
        if self._calls is None:
            self._show(text)
            return
        self._held.append(text)
        shown = self._calls.feed(text)
        if shown:
            self._show(shown)
            self._take_held(len(shown))

    def _take_held(self, n: int) -> None:
        held = "".join(self._held)
        self._held = [held[n:]] if len(held) > n else []

    def _end_calls(self) -> tuple[ToolCall, ...]:
        if self._calls is None:
            return ()
        try:
            content, calls = self._calls.finish()
            check_calls(calls, self._tools)
        except ToolCallParseError as exc:
            log.info("a tool call did not parse, given back as text: %s", exc)
            self._show("".join(self._held))
            self._held = []
            return ()
        if content:
            self._show(content)
        self._held = []
        return tuple(ToolCall(f"call_{uuid.uuid4().hex[:24]}", c.name, c.arguments) for c in calls)

    def _show(self, text: str) -> None:
        if text:
            self._answer.append(text)
            self._emit(text, False)
