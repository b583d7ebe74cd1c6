"""One reply's engine events as the Responses API's stream events (and its final Response object).

The order OpenAI streams them in: response.created and response.in_progress; per output item
response.output_item.added, response.content_part.added, its deltas (response.reasoning_text.delta for
thinking, response.output_text.delta for the answer), then the .done events of each in reverse;
function calls (whole when the reply ends: the engine parses them at the end) as output_item.added,
response.function_call_arguments.delta and .done, output_item.done; last response.completed,
response.incomplete (the output cap was reached) or response.failed. Every event has its
`sequence_number`. A reply that is not streamed goes through the same steps, so both give the same
Response object.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from app.server.errors import ApiError
from app.server.responses.output import (
    ResponseObject,
    call_item,
    message_item,
    new_id,
    reasoning_item,
    text_part,
)
from engine.protocol import Done, Token, ToolCall

Event = dict[str, Any]


def sse_event(event: Event) -> bytes:
    """One server-sent event, named by its type as OpenAI sends them."""
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event['type']}\ndata: {data}\n\n".encode()


@dataclass(slots=True)
class _OpenItem:
    reasoning: bool
    index: int
    id: str
    texts: list[str] = field(default_factory=list)


class ReplyEvents:
    """The stream events of one response: `start()`, `token()` per engine Token, then `done()` or `fail()`;
    `final` is the Response object once it ended."""

    def __init__(self, response: ResponseObject):
        self.response = response
        self.output: list[dict[str, Any]] = []
        self.final: dict[str, Any] | None = None
        self._sequence = 0
        self._open: _OpenItem | None = None
        self._pending = ""  # answer text held back: whitespace, so far

    def _event(self, kind: str, **fields: Any) -> Event:
        event = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event

    def start(self) -> list[Event]:
        snapshot = self.response.snapshot("in_progress", [])
        return [self._event("response.created", response=snapshot),
                self._event("response.in_progress", response=snapshot)]

    def token(self, token: Token) -> list[Event]:
        if not token.reasoning and (self._open is None or self._open.reasoning):
            # An answer that is only whitespace so far may be the space before tool calls, which is no
            # content (the engine's Done drops it): its message item starts with its first visible text.
            self._pending += token.text
            if not self._pending.strip():
                return []
            text, self._pending = self._pending, ""
            return self._text(text, reasoning=False)
        return self._text(token.text, token.reasoning)

    def _text(self, text: str, reasoning: bool) -> list[Event]:
        if not text:
            return []
        events: list[Event] = []
        if self._open is None or self._open.reasoning != reasoning:
            events += self._close("completed")
            events += self._open_item(reasoning)
        item = self._open
        assert item is not None
        item.texts.append(text)
        where = {"item_id": item.id, "output_index": item.index, "content_index": 0}
        if reasoning:
            events.append(self._event("response.reasoning_text.delta", **where, delta=text))
        else:
            events.append(self._event("response.output_text.delta", **where, delta=text, logprobs=[]))
        return events

    def done(self, done: Done) -> list[Event]:
        incomplete = done.finish_reason == "length"
        kinds = {item["type"] for item in self.output}
        if self._open is not None:
            kinds.add("reasoning" if self._open.reasoning else "message")
        events: list[Event] = []
        # Text the engine did not stream (none of Tailor's engines does that, a remote one might).
        if done.reasoning and "reasoning" not in kinds and "message" not in kinds:
            events += self._text(done.reasoning, reasoning=True)
        pending, self._pending = self._pending, ""
        if "message" not in kinds and not done.tool_calls:
            events += self._text(pending or done.text, reasoning=False)
        if self._open is not None:
            if self._open.reasoning:
                status = "incomplete" if not done.reasoning_closed else "completed"
            else:
                status = "incomplete" if incomplete else "completed"
            events += self._close(status)
        if not self.output and not done.tool_calls:  # the model said nothing: an empty answer
            events += self._open_item(reasoning=False)
            events += self._close("incomplete" if incomplete else "completed")
        for call in done.tool_calls:
            events += self._call(call)
        self.final = self.response.snapshot("incomplete" if incomplete else "completed", self.output, done.stats)
        events.append(self._event(f"response.{self.final['status']}", response=self.final))
        return events

    def fail(self, error: ApiError) -> list[Event]:
        """The reply broke off (the engine failed after it started)."""
        events = self._close("incomplete")
        self.final = self.response.snapshot("failed", self.output, error=error)
        events.append(self._event("response.failed", response=self.final))
        return events

    def _open_item(self, reasoning: bool) -> list[Event]:
        item = _OpenItem(reasoning, len(self.output), new_id("rs" if reasoning else "msg"))
        self._open = item
        shell = (reasoning_item if reasoning else message_item)(item.id, None, "in_progress")
        self.output.append(shell)
        part = {"type": "reasoning_text", "text": ""} if reasoning else text_part("")
        return [self._event("response.output_item.added", output_index=item.index, item=shell),
                self._event("response.content_part.added", item_id=item.id, output_index=item.index,
                            content_index=0, part=part)]

    def _close(self, status: str) -> list[Event]:
        item, self._open = self._open, None
        if item is None:
            return []
        text = "".join(item.texts)
        where = {"item_id": item.id, "output_index": item.index, "content_index": 0}
        if item.reasoning:
            whole = reasoning_item(item.id, text, status, self.response.encrypted_reasoning)
            events = [self._event("response.reasoning_text.done", **where, text=text),
                      self._event("response.content_part.done", **where, part=whole["content"][0])]
        else:
            whole = message_item(item.id, text, status)
            events = [self._event("response.output_text.done", **where, text=text, logprobs=[]),
                      self._event("response.content_part.done", **where, part=whole["content"][0])]
        self.output[item.index] = whole
        events.append(self._event("response.output_item.done", output_index=item.index, item=whole))
        return events

    def _call(self, call: ToolCall) -> list[Event]:
        index, item_id = len(self.output), new_id("fc")
        tools = self.response.tools
        whole = call_item(item_id, call, call.arguments, "completed", tools)
        self.output.append(whole)
        where = {"item_id": item_id, "output_index": index}
        return [self._event("response.output_item.added", output_index=index,
                            item=call_item(item_id, call, "", "in_progress", tools)),
                self._event("response.function_call_arguments.delta", **where, delta=call.arguments),
                self._event("response.function_call_arguments.done", **where, name=whole["name"],
                            arguments=call.arguments),
                self._event("response.output_item.done", output_index=index, item=whole)]
