"""A reply as Anthropic's streamed events (`event: NAME` then `data: {...}`, as its SDKs read them).

    message_start (the message, no content yet; its usage is sent whole with message_delta)
    ping
    content_block_start / content_block_delta… / content_block_stop, per block:
        thinking (thinking_delta…, then signature_delta), text (text_delta…),
        tool_use (the call's input whole, in one input_json_delta: the engine parses a call once it ends)
    message_delta (stop_reason, stop_sequence, usage), message_stop

An engine error after the start is an `error` event in Anthropic's envelope, and the stream ends there.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from app.server.anthropic.errors import status_and_body
from app.server.anthropic.message import signature, stop_reason, tool_use_id, usage
from app.server.anthropic.request import MessagesRequest
from app.server.errors import from_engine
from engine.protocol import Done, Error, Event, Token


def event(name: str, data: dict[str, Any]) -> bytes:
    """One server-sent event of Anthropic's stream."""
    payload = json.dumps({"type": name, **data}, ensure_ascii=False, separators=(",", ":"))
    return f"event: {name}\ndata: {payload}\n\n".encode()


class MessageEvents:
    """The events of one reply, block by block."""

    def __init__(self, msg_id: str, model: str, request: MessagesRequest):
        self.msg_id, self.model, self.request = msg_id, model, request
        self._index = -1  # the block open now (or the last one)
        self._open: str | None = None  # its type; None: no block open
        self._thinking: list[str] = []
        self._space = ""  # leading whitespace of the answer, held: before tool calls it is no text

    async def stream(self, first: Event, events: AsyncIterator[Event]) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._events(first, events):
                yield chunk
        finally:  # closed early (the client left): the engine's reply is cancelled at once
            await events.aclose()  # type: ignore[attr-defined]

    async def _events(self, first: Event, events: AsyncIterator[Event]) -> AsyncIterator[bytes]:
        yield event("message_start", {"message": {
            "id": self.msg_id, "type": "message", "role": "assistant", "model": self.model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 0, "output_tokens": 0}}})
        yield event("ping", {})
        item: Event | None = first
        while item is not None:
            if isinstance(item, Token) and item.text:
                for chunk in self._token(item):
                    yield chunk
            elif isinstance(item, Done):
                for chunk in self._done(item):
                    yield chunk
                return
            elif isinstance(item, Error):  # the reply started, so the status is sent already
                yield event("error", {"error": status_and_body(from_engine(item))[1]["error"]})
                return
            item = await anext(events, None)

    def _token(self, token: Token) -> list[bytes]:
        if token.reasoning:
            out = self._start("thinking", {"thinking": "", "signature": ""})
            self._thinking.append(token.text)
            if self.request.show_thinking:
                out.append(self._delta({"type": "thinking_delta", "thinking": token.text}))
            return out
        if self._open != "text" and not token.text.strip():
            self._space += token.text
            return []
        out = self._start("text", {"text": ""})
        text, self._space = self._space + token.text, ""
        out.append(self._delta({"type": "text_delta", "text": text}))
        return out

    def _done(self, done: Done) -> list[bytes]:
        out = []
        if (self._space or self._index < 0) and not done.tool_calls:  # as whole_message: never no block at all
            out += self._start("text", {"text": ""})
            if self._space:
                out.append(self._delta({"type": "text_delta", "text": self._space}))
        out += self._close()
        for call in done.tool_calls:
            out += self._start("tool_use", {"id": tool_use_id(call), "name": call.name, "input": {}})
            out.append(self._delta({"type": "input_json_delta", "partial_json": call.arguments}))
            out += self._close()
        reason, sequence = stop_reason(done, self.request.max_tokens)
        out.append(event("message_delta", {"delta": {"stop_reason": reason, "stop_sequence": sequence},
                                           "usage": usage(done)}))
        out.append(event("message_stop", {}))
        return out

    def _start(self, kind: str, fields: dict[str, Any]) -> list[bytes]:
        """Open a block of `kind` unless one is open: the open block of another kind is closed first."""
        if self._open == kind:
            return []
        out = self._close()
        self._index += 1
        self._open = kind
        out.append(event("content_block_start", {"index": self._index, "content_block": {"type": kind, **fields}}))
        return out

    def _close(self) -> list[bytes]:
        if self._open is None:
            return []
        out = []
        if self._open == "thinking":
            out.append(self._delta({"type": "signature_delta", "signature": signature("".join(self._thinking))}))
            self._thinking.clear()
        out.append(event("content_block_stop", {"index": self._index}))
        self._open = None
        return out

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return event("content_block_delta", {"index": self._index, "delta": delta})
