"""ToolCallTally: the tool calls of one remote reply, put together from its streamed `delta.tool_calls`.

OpenAI streams each call in pieces keyed by `index`: the first piece has the call's id and function
name, the next ones pieces of its arguments. Servers differ: some send each call whole, some omit the
id (one is made up here, as the local engine makes its own) or the index (then a piece starts a call
when it has a new id, or a name once the last call has arguments; else it continues the last call),
some repeat the name in every piece. The
server is someone else's, so what it may add is capped: MAX_TOOL_CALLS calls, MAX_ARGUMENT_BYTES of
arguments for one call, MAX_TOOL_BYTES for all of them; past a cap the reply fails with ToolCallLimit
(the stream stops there, nothing more is read). Wrong types are a MalformedStream, as elsewhere.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from app.remote.bounded_http import size_text
from app.remote.sse_reader import MalformedStream
from engine.protocol import ToolCall

MAX_TOOL_CALLS = 128  # calls in one reply: far more than any model makes at once
MAX_ARGUMENT_BYTES = 1 << 20  # one call's arguments (JSON text)
MAX_TOOL_BYTES = 8 << 20  # all the calls' arguments together, as much as one event may hold
MAX_NAME_CHARS = 256  # a function name (OpenAI allows 64) or a call id


class ToolCallLimit(Exception):
    """The server's tool calls went past one of Tailor's caps; the message says which."""


@dataclass(slots=True)
class _Call:
    id: str = ""
    name: str = ""
    pieces: list[str] = field(default_factory=list)  # of the arguments
    size: int = 0  # bytes of the arguments so far


@dataclass(slots=True)
class ToolCallTally:
    """The calls heard so far, by the index the server gave them (in the order of the indexes)."""

    calls: dict[int, _Call] = field(default_factory=dict)
    size: int = 0  # bytes of all the arguments
    last: int | None = None  # the index the latest piece added to

    def add(self, deltas: Any) -> None:
        """One delta's `tool_calls` (a list of pieces)."""
        if not isinstance(deltas, list):
            raise MalformedStream(f"a delta's tool_calls are not a list: {str(deltas)[:80]!r}")
        for delta in deltas:
            self._add_piece(delta)

    def result(self) -> tuple[ToolCall, ...]:
        """The calls, each with an id (made up where the server gave none, or one already used)."""
        made: list[ToolCall] = []
        ids: set[str] = set()
        for _index, call in sorted(self.calls.items()):
            if not call.name:
                raise MalformedStream("a tool call came without a function name")
            call_id = call.id if call.id and call.id not in ids else f"call_{uuid.uuid4().hex[:24]}"
            ids.add(call_id)
            made.append(ToolCall(call_id, call.name, "".join(call.pieces) or "{}"))
        return tuple(made)

    def _add_piece(self, delta: Any) -> None:
        if not isinstance(delta, dict):
            raise MalformedStream(f"a tool call is not an object: {str(delta)[:80]!r}")
        function = delta.get("function")
        function = {} if function is None else function
        if not isinstance(function, dict):
            raise MalformedStream(f"a tool call's function is not an object: {str(function)[:80]!r}")
        call_id, name, arguments = (_text(delta, "id"), _text(function, "name"), _text(function, "arguments"))
        kind = delta.get("type")
        if kind is not None and kind != "function":
            raise MalformedStream(f"a tool call is of type {str(kind)[:40]!r}, not 'function'")
        call = self._call(delta.get("index"), call_id, name)
        if call_id and not call.id:
            call.id = call_id
        if name and name != call.name:  # (a name sent again in each piece is the same name)
            call.name += name
            if len(call.name) > MAX_NAME_CHARS:
                raise MalformedStream(f"a tool call's name is longer than {MAX_NAME_CHARS} characters")
        if arguments:
            self._grow(call, arguments)

    def _call(self, index: Any, call_id: str | None, name: str | None) -> _Call:
        """The call a piece adds to: by its index, or without one, the last call unless the piece starts one."""
        if index is None:
            last = self.calls.get(self.last) if self.last is not None else None
            starts = (last is None or (call_id is not None and call_id not in ("", last.id))
                      or (bool(name) and bool(last.pieces)))
            index = max(self.calls, default=-1) + 1 if starts else self.last
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise MalformedStream(f"a tool call's index is not a count: {str(index)[:40]!r}")
        if index not in self.calls:
            if len(self.calls) >= MAX_TOOL_CALLS:
                raise ToolCallLimit(f"sent more than {MAX_TOOL_CALLS} tool calls in one reply, Tailor's limit")
            self.calls[index] = _Call()
        self.last = index
        return self.calls[index]

    def _grow(self, call: _Call, arguments: str) -> None:
        size = len(arguments.encode("utf-8", errors="replace"))
        if call.size + size > MAX_ARGUMENT_BYTES:
            raise ToolCallLimit(f"sent a tool call ({call.name or 'unnamed'}) with more than "
                                f"{size_text(MAX_ARGUMENT_BYTES)} of arguments, Tailor's limit for one call")
        if self.size + size > MAX_TOOL_BYTES:
            raise ToolCallLimit(f"sent tool calls with more than {size_text(MAX_TOOL_BYTES)} of arguments in "
                                "all, Tailor's limit for one reply")
        call.size += size
        self.size += size
        call.pieces.append(arguments)


def _text(item: dict[str, Any], key: str) -> str | None:
    """A string field of a piece (None when absent), else a MalformedStream naming it."""
    value = item.get(key)
    if value is not None and not isinstance(value, str):
        raise MalformedStream(f"a tool call's {key} is not text: {str(value)[:80]!r}")
    if key == "id" and value is not None and len(value) > MAX_NAME_CHARS:
        raise MalformedStream(f"a tool call's id is longer than {MAX_NAME_CHARS} characters")
    return value
