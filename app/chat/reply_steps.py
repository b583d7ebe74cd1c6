"""ReplySteps: the part of Replies that turns a reply's calls into a tool step, runs it and goes on.

A request that ends with calls (a Done with tool_calls) does not finish the reply: its text and calls
become a step (saved with the message), a ToolRound asks about and runs the calls, and when every call
has ended the next request goes out with their results. Past the chat's step cap the calls are not run
and the reply ends, saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from app.chat.listener import SessionListener
from app.chat.reply_tools import step_cap_note
from app.chat.tool_permissions import Decision, PermissionAsk
from app.chat.tool_rounds import ToolFinished, ToolHost, ToolRound, skipped
from app.services.history.store import ChatStore, Message
from app.services.history.tool_steps import ToolCallRecord, ToolStep
from engine.protocol import Done

if TYPE_CHECKING:
    from app.chat.replies import _Stream


class ReplySteps:
    """Tool steps of the streaming reply (a base of Replies, which owns the stream and the store)."""

    store: ChatStore
    listener: SessionListener
    tool_host: ToolHost | None
    _stream: _Stream | None
    _is_open: Callable[[int], bool]

    def _save(self, write: Callable[[], object]) -> bool:
        raise NotImplementedError

    def _end_with(self, stream: _Stream, event: Done, model: str | None, stopped_for: str | None = None) -> None:
        raise NotImplementedError

    def _tool_step(self, stream: _Stream, event: Done, model: str | None) -> None:
        """The request ended with calls: they become a step of the reply, which runs them (or stops at its cap)."""
        tools = stream.tools
        text = event.text if len(event.text) >= len(stream.text) else stream.text
        reasoning = event.reasoning if len(event.reasoning) >= len(stream.reasoning) else stream.reasoning
        step = tools.new_step(event, text, reasoning)
        stream.parts, stream.thoughts, stream.thinking_since, stream.thinking_s = [], [], None, 0.0
        if tools.over_cap:
            tools.steps[-1] = skipped(step, step_cap_note(tools.cap))
            self._save_steps(stream)
            self._tell_step(stream)
            self.listener.notice(f"The reply stopped at its cap of {tools.cap} tool steps (Settings: tool steps).")
            self._end_with(stream, event, model, stopped_for="tool_cap")
            return
        self._save_steps(stream)
        self._tell_step(stream)
        index = len(tools.steps) - 1
        tools.round = ToolRound(
            tools.host, step, tools.tools.by_name, tools.allowed_in_chat,
            on_change=lambda call: self._call_changed(stream, index, call),
            on_ask=lambda ask: self._ask(stream, ask),
            on_done=lambda ended: self._continue(stream, ended),
            round_id=next(tools.round_ids), where=(stream.conversation_id, stream.message_id))
        tools.round.start()

    def _message_so_far(self, stream: _Stream) -> Message | None:
        message = self.store.get_message(stream.message_id)
        if message is None:
            return None
        steps = tuple(stream.tools.steps) if stream.tools else ()
        return replace(message, content=stream.text, tool_steps=steps, state="streaming")

    def _tell_step(self, stream: _Stream) -> None:
        if self._is_open(stream.conversation_id):
            message = self._message_so_far(stream)
            if message is not None:
                self.listener.tool_step(message)

    def _save_steps(self, stream: _Stream) -> None:
        steps = tuple(stream.tools.steps)
        self._save(lambda: self.store.update_message_tool_steps(stream.message_id, steps, stream.text))

    def _call_changed(self, stream: _Stream, index: int, call: ToolCallRecord) -> None:
        stream.tools.steps[index] = stream.tools.steps[index].with_call(call)
        self._save_steps(stream)
        if self._is_open(stream.conversation_id):
            self.listener.tool_call_changed(stream.message_id, index, call)

    def _ask(self, stream: _Stream, ask: PermissionAsk | None) -> None:
        if self._is_open(stream.conversation_id):
            self.listener.tool_permission_asked(ask)

    def _continue(self, stream: _Stream, step: ToolStep) -> None:
        """Every call of the step ended: the model goes on with their results.

        Raises:
            EngineNotRunning: the engine is gone (the caller reports it; the reply is kept as interrupted).
        """
        tools = stream.tools
        tools.steps[-1], tools.round = step, None
        self._save_steps(stream)
        stream.request_id = tools.next_request()

    def on_tool_finished(self, event: ToolFinished) -> None:
        """A call's outcome, on the session's thread."""
        stream = self._stream
        if stream is not None and stream.tools is not None and stream.tools.round is not None:
            stream.tools.round.on_finished(event)

    @property
    def asking(self) -> PermissionAsk | None:
        """The question about a call of the streaming reply that stands, if any."""
        stream = self._stream
        round_ = stream.tools.round if stream is not None and stream.tools is not None else None
        return round_.asking if round_ is not None else None

    def answer(self, call_id: str, decision: Decision) -> set[str] | None:
        """The user's answer about a call; the chat's allowed tools after it (None: no such question)."""
        stream = self._stream
        round_ = stream.tools.round if stream is not None and stream.tools is not None else None
        if round_ is None:
            return None
        round_.answer(call_id, decision)
        return set(stream.tools.allowed_in_chat)
