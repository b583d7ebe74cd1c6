"""Replies: the one reply that may be streaming (or waiting for the model), saved as it streams.

The reply is written to the store at least every SAVE_INTERVAL_S while text comes, and also when
the model pauses between tokens (a timer), so a crash or a kill -9 loses at most that much. A
reasoning model's thoughts stream first (Tokens marked reasoning) and are saved the same way, apart
from the answer; only the answer goes back to the model with the next message.
A write the store refuses is said once (history_failed) and the reply goes on in the window.
A reply whose chat has tools on may call them: it then pauses in a tool step (reply_tools.py) and goes
on with their results, in the same message, until it answers without calls or reaches its step cap.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from app.chat.engine_history import UnavailableMedia, engine_messages
from app.chat.listener import SessionListener, TimerFactory
from app.chat.reply_steps import ReplySteps
from app.chat.reply_tools import ReplyTools
from app.chat.stats_line import format_stats
from app.chat.stored_clips import StoredClips
from app.chat.stored_images import StoredImages
from app.chat.tool_rounds import ToolHost
from app.chat.tool_set import ToolSet
from app.services.history.store import ChatStore, StoreError
from engine.interface import Engine, EngineNotRunning
from engine.protocol import ChatMessage, Done, Error, ReplyShape, SamplingParams, Token

SAVE_INTERVAL_S = 0.4  # a streaming reply reaches the database at least this often


@dataclass(slots=True, frozen=True)
class StreamSoFar:
    """What a streaming reply has so far: its answer, its reasoning and how long it has reasoned."""

    message_id: int
    text: str
    reasoning: str = ""
    reasoning_tokens: int = 0
    reasoning_s: float = 0.0


@dataclass(slots=True)
class _Stream:
    request_id: int
    conversation_id: int
    message_id: int
    parts: list[str] = field(default_factory=list)
    thoughts: list[str] = field(default_factory=list)  # the reasoning Tokens' text
    thinking_since: float | None = None  # when the first reasoning Token came
    thinking_s: float = 0.0  # from it to the last reasoning Token
    last_save: float = field(default_factory=time.monotonic)
    tools: ReplyTools | None = None  # the chat had tools on: the reply may call them

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def reasoning(self) -> str:
        return "".join(self.thoughts)

    @property
    def reasoning_closed(self) -> bool:
        """Whether the reasoning (if any) ended: the answer began after it."""
        return not self.thoughts or bool(self.parts)

    def so_far(self) -> StreamSoFar:
        return StreamSoFar(self.message_id, self.text, self.reasoning, len(self.thoughts), self.thinking_s)


class Replies(ReplySteps):
    """Starts, streams, saves and ends replies, one at a time.

    Args:
        store: the chat history.
        listener: told what streams (only for the open conversation: `is_open`) and how it ends.
        make_timer: makes the timer that saves a reply while the model pauses.
        is_open: whether a conversation is the one on screen.
    """

    def __init__(self, store: ChatStore, listener: SessionListener, make_timer: TimerFactory,
                 is_open: Callable[[int], bool]):
        self.store, self.listener, self._is_open = store, listener, is_open
        self.pending: int | None = None  # the conversation whose reply waits for a load
        self._stream: _Stream | None = None
        self.ignored: set[int] = set()  # request ids whose late events are dropped
        self._timer = make_timer(self.save_partial)
        self.tool_host: ToolHost | None = None  # how tools run (None: this session runs none)
        # The history's images, decoded once each, for a model that sees (engine_history.engine_messages).
        self.images = StoredImages(store.media)
        # Its clips, decoded once each at the rate the model hears, for a model that hears.
        self.clips = StoredClips(store.media)

    @property
    def busy(self) -> bool:
        return self._stream is not None or self.pending is not None

    @property
    def streaming_conversation(self) -> int | None:
        """The conversation a reply streams into now, if any."""
        return self._stream.conversation_id if self._stream else None

    @property
    def partial_reply(self) -> str | None:
        """The text of the reply streaming now, if any."""
        return self._stream.text if self._stream else None

    def streaming_in(self, conversation_id: int) -> StreamSoFar | None:
        """What the reply streaming into that conversation has so far, if any."""
        stream = self._stream
        if stream is None or stream.conversation_id != conversation_id:
            return None
        return stream.so_far()

    def show_stream(self, so_far: StreamSoFar) -> None:
        """Show a streaming reply in the chat just opened: what it has comes as if it streamed now."""
        started = self.store.get_message(so_far.message_id)
        if started is None:
            return
        # What the store has of it is older than what follows (the whole of it so far).
        self.listener.stream_started(replace(started, content="", reasoning=""))
        if so_far.reasoning:
            self.listener.stream_reasoning(so_far.reasoning, so_far.reasoning_tokens, so_far.reasoning_s)
        stream = self._stream
        if stream is not None and stream.tools is not None and stream.tools.steps:
            message = self._message_so_far(stream)
            if message is not None:
                self.listener.tool_step(replace(message, content=""))
        if so_far.text:
            self.listener.stream_text(so_far.text)
        if self.asking is not None:
            self.listener.tool_permission_asked(self.asking)

    def wait_for_model(self, conversation_id: int) -> None:
        self.pending = conversation_id
        self.listener.busy_changed(True)

    def drop_pending(self) -> None:
        """The reply that waited for the model will not come (the load failed, or it was stopped)."""
        if self.pending is not None:
            self.pending = None
            self.listener.busy_changed(False)

    # ------------------------------------------------------------ starting and stopping

    def begin(self, engine: Engine, conversation_id: int, tools: ToolSet | None = None, tool_choice: str = "auto",
              sees_images: bool = False, hears_at: int | None = None) -> None:
        """Ask the engine for the reply of the conversation's last message; with `tools` (and a tool host),
        the model may call them (`tool_choice` holds for the first request: "auto", "required" or a name).
        The messages' images go with them to a model that sees (`sees_images`), their clips to one that hears
        at `hears_at` samples a second (None: it does not); to one that does not, the chat is sent without
        them, and a notice says so.

        Raises:
            EngineNotRunning: the engine is gone (the caller reports it).
        """
        self.pending = None
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None:
            self.listener.busy_changed(False)
            return
        settings = conversation.settings
        history = self._history(conversation_id, settings.system_prompt, sees_images, hears_at)
        sampling = SamplingParams(temperature=settings.temperature, top_p=settings.top_p, max_tokens=settings.max_tokens)
        tools = tools if self.tool_host is not None else None
        shape = ReplyShape(reasoning=settings.reasoning, think_budget=settings.think_budget,
                           tools=tools.tools_json if tools else None, tool_choice=tool_choice if tools else "auto")
        try:
            request_id = engine.generate(history, sampling, shape=shape)
        except EngineNotRunning:
            self.listener.busy_changed(False)
            raise
        try:
            message = self.store.add_message(conversation_id, "assistant", "", state="streaming")
        except StoreError:
            self._drop(engine, request_id)
            self.listener.busy_changed(False)
            self.listener.history_failed()
            return
        self._stream = _Stream(request_id, conversation_id, message.id)
        if tools is not None and self.tool_host is not None:
            self._stream.tools = ReplyTools(self.tool_host, tools, engine, history, sampling, shape,
                                            settings.tool_step_cap, set(settings.allowed_tools))
        if self._is_open(conversation_id):
            self.listener.stream_started(message)
            self.listener.versions_changed(self.store.versions(conversation_id))  # a regenerated reply is one more

    def _history(self, conversation_id: int, system_prompt: str, sees_images: bool,
                 hears_at: int | None) -> list[ChatMessage]:
        """The branch as the engine is sent it; what of its images and clips cannot go is said in a notice."""
        messages = self.store.list_messages(conversation_id)
        pictures = sum(len(m.images) for m in messages)
        sounds = sum(len(m.clips) for m in messages)
        left_out = []
        if pictures and not sees_images:
            left_out.append(f"This model cannot see images: the chat's {pictures} image{'s' * (pictures != 1)} "
                            "went without it (load a model with its mmproj).")
        if sounds and hears_at is None:
            left_out.append(f"This model cannot hear audio: the chat's {sounds} clip{'s' * (sounds != 1)} went "
                            "without it (load a model whose projector takes audio, such as Qwen2-Audio).")
        if left_out:
            self.listener.notice(" ".join(left_out))
        if hears_at is not None:
            self.clips.sample_rate = hears_at
        unavailable: list[UnavailableMedia] = []
        history = engine_messages(messages, system_prompt, self.images if sees_images else None, unavailable,
                                  self.clips if hears_at is not None else None)
        if unavailable:
            self.listener.notice("Sent without " + "; ".join(str(u) for u in unavailable[:3])
                                 + (f" and {len(unavailable) - 3} more" if len(unavailable) > 3 else "") + ".")
        return history

    def stop(self, engine: Engine) -> None:
        """Stop the reply being written (its Done arrives as 'cancelled')."""
        stream = self._stream
        if stream is not None and stream.tools is not None and stream.tools.round is not None:
            self._finish(stream, "cancelled")  # between requests: the calls stop, nothing more is asked
            self.listener.notice("Stopped.")
        elif stream is not None:
            _cancel(engine, stream.request_id)
            self.listener.notice("Stopping…")
        else:
            self.drop_pending()

    def forget(self, engine: Engine, conversation_id: int) -> None:
        """Cancel a reply for a conversation about to be deleted; its late events are ignored."""
        if self._stream and self._stream.conversation_id == conversation_id:
            stream, self._stream = self._stream, None
            self._timer.stop()
            if stream.tools is not None:
                stream.tools.cancel_round()
            self._drop(engine, stream.request_id)
            self.listener.busy_changed(False)
        if self.pending == conversation_id:
            self.drop_pending()

    def shutdown(self, engine: Engine) -> None:
        """Stop any reply, saving what it has as 'cancelled'."""
        if self._stream is not None:
            self._drop(engine, self._stream.request_id)
            self._finish(self._stream, "cancelled")
        self.pending = None

    def interrupt(self) -> None:
        """The engine died: what streamed is kept as 'interrupted', a waiting reply is dropped."""
        if self._stream is not None:
            self._finish(self._stream, "interrupted")
        self.drop_pending()

    def _drop(self, engine: Engine, request_id: int) -> None:
        _cancel(engine, request_id)
        self.ignored.add(request_id)

    # ------------------------------------------------------------ engine events

    def on_token(self, event: Token) -> None:
        stream = self._stream
        if stream is None or event.request_id != stream.request_id:
            return
        now = time.monotonic()
        if event.reasoning:
            if stream.thinking_since is None:
                stream.thinking_since = now
            stream.thoughts.append(event.text)
            stream.thinking_s = now - stream.thinking_since
            if self._is_open(stream.conversation_id):
                self.listener.stream_reasoning(event.text, len(stream.thoughts), stream.thinking_s)
        else:
            stream.parts.append(event.text)
            if self._is_open(stream.conversation_id):
                self.listener.stream_text(event.text)
        if now - stream.last_save >= SAVE_INTERVAL_S:
            self.save_partial()
        elif not self._timer.active:
            self._timer.start(max(0.001, stream.last_save + SAVE_INTERVAL_S - now))

    def save_partial(self) -> None:
        """Write the streaming reply's text so far to the store."""
        self._timer.stop()
        stream = self._stream
        if stream is None:
            return
        stream.last_save = time.monotonic()
        self._save(lambda: self.store.update_message_content(
            stream.message_id, stream.text, stream.reasoning or None, stream.reasoning_closed))

    def take_ignored(self, request_id: int | None) -> bool:
        """Whether a late event of this request is to be dropped (it is the request's last: forgotten after)."""
        if request_id is None or request_id not in self.ignored:
            return False
        self.ignored.discard(request_id)
        return True

    def on_done(self, event: Done, model: str | None = None) -> None:
        """The reply ended; `model`: the file name of the model that wrote it, kept in its stats."""
        if self.take_ignored(event.request_id):
            return
        stream = self._stream
        if stream is None or event.request_id != stream.request_id:
            return
        # The Done's texts are the engine's whole ones; what streamed stands in where they fall short.
        if len(event.text) >= len(stream.text):
            stream.parts = [event.text]
        if event.reasoning and len(event.reasoning) >= len(stream.reasoning):
            stream.thoughts = [event.reasoning]
        if stream.tools is not None and stream.tools.takes(event):
            self._tool_step(stream, event, model)
            return
        self._end_with(stream, event, model)

    def _end_with(self, stream: _Stream, event: Done, model: str | None, stopped_for: str | None = None) -> None:
        state = "cancelled" if event.finish_reason == "cancelled" else "complete"
        stats = event.stats.as_dict()  # with reasoning_s when it thought: the view's "Thought for 12 s"
        if model:
            stats["model"] = model
        if stream.tools is not None and stream.tools.steps:
            stats["tool_steps"] = len(stream.tools.steps)
        if stopped_for:
            stats["stopped_for"] = stopped_for
        closed = event.reasoning_closed or not stream.reasoning
        self._finish(stream, state, stats, closed)
        self.listener.stats_changed(format_stats(stats))
        if state == "cancelled":
            self.listener.notice("Stopped.")

    def on_error(self, event: Error) -> None:
        """A reply failed (not a load, not the engine's death): what streamed is kept as 'interrupted'."""
        stream = self._stream
        if stream is not None and event.request_id in (None, stream.request_id):
            if stream.text or stream.reasoning:
                self._finish(stream, "interrupted")
            else:
                self._stream = None
                self._timer.stop()
                self.store.delete_message(stream.message_id)
                self.listener.busy_changed(False)

    # ------------------------------------------------------------ the store

    def _save(self, write: Callable[[], object]) -> bool:
        """Run one write of the reply; a refused one is said once (history_failed) and the reply goes on."""
        if not self.store.writable:
            return False
        try:
            write()
        except StoreError:
            self.listener.history_failed()
            return False
        return True

    def _finish(self, stream: _Stream, state: str, stats: dict | None = None, closed: bool | None = None) -> None:
        """Store the reply as it ended; `closed`: whether its reasoning ended (None: as it streamed)."""
        self._stream = None
        self._timer.stop()
        text, reasoning = stream.text, stream.reasoning
        closed = stream.reasoning_closed if closed is None else closed
        steps: dict = {}
        if stream.tools is not None:
            if stream.tools.round is not None and self._is_open(stream.conversation_id):
                self.listener.tool_permission_asked(None)
            stream.tools.cancel_round()
            steps = {"tool_steps": tuple(stream.tools.steps)}
        saved = self._save(lambda: self.store.finish_message(
            stream.message_id, text, state, stats, reasoning if reasoning else None, closed, **steps))
        message = self.store.get_message(stream.message_id)
        if message is not None and not saved:  # shown as it ended, though the file keeps what it had
            message = replace(message, content=text, state=state, stats=stats, reasoning=reasoning,
                              reasoning_closed=closed, **steps)
        if message is not None and self._is_open(stream.conversation_id):
            self.listener.stream_finished(message)
        self.listener.busy_changed(False)


def _cancel(engine: Engine, request_id: int) -> None:
    try:
        engine.cancel(request_id)
    except EngineNotRunning:  # a dead engine generates nothing more
        pass
