"""ChatController: what happens when the user sends, stops, regenerates or edits.

It owns the chat store and the engine bridge, keeps the state of the one reply that may be
streaming, and tells the views what changed through signals. No widgets here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, Signal, Slot

from app.gui.engine_bridge import EngineBridge
from app.store import DEFAULT_TITLE, ChatSettings, ChatStore, Conversation, Message
from engine.protocol import ChatMessage, Done, Error, Loaded, SamplingParams

SAVE_INTERVAL_S = 0.4  # a streaming reply reaches the database at least this often
BUSY_HINT = "A reply is still being written: wait for it, or press Esc to stop it."


@dataclass(slots=True)
class _Stream:
    request_id: int
    conversation_id: int
    message_id: int
    parts: list[str] = field(default_factory=list)
    last_save: float = field(default_factory=time.monotonic)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def format_stats(stats: dict | None) -> str:
    """One line for the status bar from a message's stats."""
    if not stats:
        return ""
    return (
        f"TTFT {stats.get('ttft_s', 0):.2f} s · prompt {stats.get('prompt_tokens', 0)} tok "
        f"({stats.get('cached_tokens', 0)} cached) · prefill {stats.get('prefill_tok_s', 0):.0f} tok/s"
        f" · decode {stats.get('decode_tok_s', 0):.1f} tok/s"
    )


class ChatController(QObject):
    """The chat logic between the store, the engine and the window.

    Args:
        store: the chat history.
        bridge: the engine, seen from Qt.
        model_path: the model to load when the engine starts.

    Signals:
        conversations_changed(): titles or order of conversations changed.
        conversation_opened(object, object): a Conversation and its list of Messages to show.
        message_added(object): a finished Message was added to the open conversation.
        stream_started(object): the streaming (empty) assistant Message of the open conversation.
        stream_text(str): more text of the streaming reply.
        stream_finished(object): the final Message of the reply that streamed.
        busy_changed(bool): a reply is being written (or waits for the model).
        model_changed(str): the model line for the status bar.
        stats_changed(str): the stats line of the last reply.
        notice(str): a short hint for the status bar.
        problem(str, bool): an error to show in the banner, and whether Reload applies.
        problem_cleared(): the banner can go.
    """

    conversations_changed = Signal()
    conversation_opened = Signal(object, object)
    message_added = Signal(object)
    stream_started = Signal(object)
    stream_text = Signal(str)
    stream_finished = Signal(object)
    busy_changed = Signal(bool)
    model_changed = Signal(str)
    stats_changed = Signal(str)
    notice = Signal(str)
    problem = Signal(str, bool)
    problem_cleared = Signal()

    def __init__(
        self, store: ChatStore, bridge: EngineBridge, model_path: str, parent: QObject | None = None
    ):
        super().__init__(parent)
        self.store, self.bridge = store, bridge
        self.model_path = str(model_path)
        self._good_model_path: str | None = None
        self.current: Conversation | None = None
        self._loaded: tuple[str, int] | None = None  # (path, n_ctx asked for)
        self._loading: tuple[str, int] | None = None
        self._pending_reply: int | None = None  # conversation waiting for a load to finish
        self._stream: _Stream | None = None
        self._ignored: set[int] = set()  # request ids whose late events are dropped
        self.engine_dead = False
        bridge.loaded.connect(self._on_loaded)
        bridge.token.connect(self._on_token)
        bridge.done.connect(self._on_done)
        bridge.error.connect(self._on_error)

    # ------------------------------------------------------------ state

    @property
    def busy(self) -> bool:
        return self._stream is not None or self._pending_reply is not None

    @property
    def streaming_conversation(self) -> int | None:
        return self._stream.conversation_id if self._stream else None

    @property
    def partial_reply(self) -> str | None:
        """The text of the reply streaming now, if any."""
        return self._stream.text if self._stream else None

    @property
    def model_ready(self) -> bool:
        return self._loaded is not None and self._loading is None

    def _settings(self) -> ChatSettings:
        return self.current.settings if self.current else ChatSettings()

    # ------------------------------------------------------------ engine and model

    def start(self) -> None:
        """Start the engine and load the model."""
        self.bridge.start()
        self.engine_dead = False
        self._request_load(self.model_path, self._settings().n_ctx)

    def reload_engine(self) -> None:
        """Start a new engine process and load the model again (after the engine died)."""
        self.problem_cleared.emit()
        self.bridge.restart()
        self.engine_dead = False
        self._loaded = self._loading = None
        self._request_load(self.model_path, self._settings().n_ctx)

    def load_model(self, path: str) -> bool:
        """Switch to another model file; False while a reply is being written."""
        if self.busy:
            self.notice.emit(BUSY_HINT)
            return False
        self.model_path = str(path)
        self._request_load(self.model_path, self._settings().n_ctx)
        return True

    def _request_load(self, path: str, n_ctx: int) -> None:
        self._loaded = None
        self._loading = (path, n_ctx)
        self.model_changed.emit(f"Loading {path.rsplit('/', 1)[-1]} …")
        self.bridge.load(path, n_ctx)

    @Slot(object)
    def _on_loaded(self, event: Loaded) -> None:
        self._loaded = self._loading or (event.info.path, event.info.n_ctx)
        self._loading = None
        self._good_model_path = self._loaded[0]
        self.model_changed.emit(f"{event.info.name} · context {event.info.n_ctx}")
        if self._pending_reply is not None:
            conversation_id, self._pending_reply = self._pending_reply, None
            self._begin_generation(conversation_id)

    # ------------------------------------------------------------ conversations

    def list_conversations(self, query: str = "") -> list[Conversation]:
        return self.store.list_conversations(query)

    def new_conversation(self) -> Conversation:
        settings = self.current.settings if self.current else ChatSettings()
        conversation = self.store.create_conversation(DEFAULT_TITLE, ChatSettings(**_fields(settings)))
        self.conversations_changed.emit()
        self.open_conversation(conversation.id)
        return conversation

    def open_conversation(self, conversation_id: int) -> None:
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None:
            return
        self.current = conversation
        messages = self.store.list_messages(conversation_id)
        stream = self._stream if self._stream and self._stream.conversation_id == conversation_id else None
        if stream is not None:
            messages = [m for m in messages if m.id != stream.message_id]
        self.conversation_opened.emit(conversation, messages)
        if stream is not None:
            message = self.store.get_message(stream.message_id)
            self.stream_started.emit(message)
            self.stream_text.emit(stream.text)

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        title = title.strip()
        if not title:
            return
        self.store.rename_conversation(conversation_id, title)
        if self.current and self.current.id == conversation_id:
            self.current.title = title
        self.conversations_changed.emit()

    def delete_conversation(self, conversation_id: int) -> None:
        """Delete a conversation; a reply streaming into it is cancelled first."""
        if self._stream and self._stream.conversation_id == conversation_id:
            self._drop_stream(cancel=True)
        if self._pending_reply == conversation_id:
            self._pending_reply = None
            self.busy_changed.emit(False)
        self.store.delete_conversation(conversation_id)
        if self.current and self.current.id == conversation_id:
            self.current = None
            remaining = self.store.list_conversations()
            if remaining:
                self.open_conversation(remaining[0].id)
            else:
                self.new_conversation()
                return
        self.conversations_changed.emit()

    def update_settings(self, settings: ChatSettings) -> None:
        """Store the open conversation's settings; they apply from the next reply."""
        if self.current is None:
            return
        self.current.settings = settings
        self.store.update_settings(self.current.id, settings)

    # ------------------------------------------------------------ messages

    def send(self, text: str) -> bool:
        """Send a user message; False (text stays with the caller) when it cannot be sent now."""
        text = text.strip()
        if not text:
            return False
        if self.busy:
            self.notice.emit(BUSY_HINT)
            return False
        if self.engine_dead:
            self.notice.emit("The engine stopped: press Reload to start it again.")
            return False
        if self.current is None:
            self.new_conversation()
        conversation = self.current
        message = self.store.add_message(conversation.id, "user", text)
        if conversation.title == DEFAULT_TITLE:
            self.rename_conversation(conversation.id, text.splitlines()[0][:48])
        else:
            self.conversations_changed.emit()
        self.message_added.emit(message)
        self._start_reply(conversation.id)
        return True

    def stop(self) -> None:
        """Stop the reply being written (its Done arrives as 'cancelled')."""
        if self._stream is not None:
            self.bridge.cancel(self._stream.request_id)
            self.notice.emit("Stopping…")
        elif self._pending_reply is not None:
            self._pending_reply = None
            self.busy_changed.emit(False)

    def regenerate(self) -> bool:
        """Replace the last assistant reply of the open conversation with a new one."""
        if not self._can_change():
            return False
        messages = self.store.list_messages(self.current.id)
        if messages and messages[-1].role == "assistant":
            self.store.delete_message(messages.pop().id)
        if not messages or messages[-1].role != "user":
            return False
        self.open_conversation(self.current.id)
        self._start_reply(self.current.id)
        return True

    def last_user_text(self) -> str | None:
        if self.current is None:
            return None
        users = [m for m in self.store.list_messages(self.current.id) if m.role == "user"]
        return users[-1].content if users else None

    def last_reply(self) -> str | None:
        if self.current is None:
            return None
        replies = [m for m in self.store.list_messages(self.current.id) if m.role == "assistant"]
        return replies[-1].content if replies else None

    def edit_last_user_message(self, text: str) -> bool:
        """Replace the last user message (dropping what followed it) and answer it again."""
        text = text.strip()
        if not text or not self._can_change():
            return False
        messages = self.store.list_messages(self.current.id)
        users = [i for i, m in enumerate(messages) if m.role == "user"]
        if not users:
            return False
        last = users[-1]
        for later in messages[last + 1 :]:
            self.store.delete_message(later.id)
        self.store.update_message_content(messages[last].id, text)
        self.open_conversation(self.current.id)
        self._start_reply(self.current.id)
        return True

    def _can_change(self) -> bool:
        if self.busy:
            self.notice.emit(BUSY_HINT)
            return False
        if self.engine_dead:
            self.notice.emit("The engine stopped: press Reload to start it again.")
            return False
        return self.current is not None

    # ------------------------------------------------------------ replies

    def _start_reply(self, conversation_id: int) -> None:
        n_ctx = self._settings().n_ctx
        wanted = (self.model_path, n_ctx)
        self._pending_reply = conversation_id
        self.busy_changed.emit(True)
        if self._loaded == wanted and self._loading is None:
            self._pending_reply = None
            self._begin_generation(conversation_id)
        elif self._loading != wanted:
            self._request_load(*wanted)

    def _begin_generation(self, conversation_id: int) -> None:
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None:
            self.busy_changed.emit(False)
            return
        settings = conversation.settings
        history = [
            ChatMessage(m.role, m.content) for m in self.store.list_messages(conversation_id) if m.content
        ]
        if settings.system_prompt.strip():
            history.insert(0, ChatMessage("system", settings.system_prompt))
        sampling = SamplingParams(
            temperature=settings.temperature, top_p=settings.top_p, max_tokens=settings.max_tokens
        )
        request_id = self.bridge.generate(history, sampling)
        if request_id is None:  # the engine is gone; its error is on the way
            self.busy_changed.emit(False)
            return
        message = self.store.add_message(conversation_id, "assistant", "", state="streaming")
        self._stream = _Stream(request_id, conversation_id, message.id)
        if self.current and self.current.id == conversation_id:
            self.stream_started.emit(message)

    @Slot(int, str)
    def _on_token(self, request_id: int, text: str) -> None:
        stream = self._stream
        if stream is None or request_id != stream.request_id:
            return
        stream.parts.append(text)
        if self.current and self.current.id == stream.conversation_id:
            self.stream_text.emit(text)
        now = time.monotonic()
        if now - stream.last_save >= SAVE_INTERVAL_S:
            stream.last_save = now
            self.store.update_message_content(stream.message_id, stream.text)

    @Slot(object)
    def _on_done(self, event: Done) -> None:
        if event.request_id in self._ignored:
            self._ignored.discard(event.request_id)
            return
        stream = self._stream
        if stream is None or event.request_id != stream.request_id:
            return
        text = event.text if len(event.text) >= len(stream.text) else stream.text
        state = "cancelled" if event.finish_reason == "cancelled" else "complete"
        stats = event.stats.as_dict()
        self._finish(stream, text, state, stats)
        self.stats_changed.emit(format_stats(stats))
        if state == "cancelled":
            self.notice.emit("Stopped.")

    def _finish(self, stream: _Stream, text: str, state: str, stats: dict | None = None) -> None:
        self._stream = None
        self.store.finish_message(stream.message_id, text, state, stats)
        message = self.store.get_message(stream.message_id)
        if message is not None and self.current and self.current.id == stream.conversation_id:
            self.stream_finished.emit(message)
        self.busy_changed.emit(False)

    def _drop_stream(self, cancel: bool, state: str = "cancelled") -> None:
        """End the stream now without waiting for its Done; late events are ignored."""
        stream = self._stream
        if stream is None:
            return
        if cancel:
            self.bridge.cancel(stream.request_id)
        self._ignored.add(stream.request_id)
        self._finish(stream, stream.text, state)

    @Slot(object)
    def _on_error(self, event: Error) -> None:
        if event.request_id is not None and event.request_id in self._ignored:
            self._ignored.discard(event.request_id)
            return
        if event.kind == "engine_died":
            if self.engine_dead:
                return
            self.engine_dead = True
            self._loaded = self._loading = None
            if self._stream is not None:
                self._drop_stream(cancel=False, state="interrupted")
            if self._pending_reply is not None:
                self._pending_reply = None
                self.busy_changed.emit(False)
            self.model_changed.emit("Engine stopped")
            self.problem.emit(f"The engine stopped. {event.message} Your chat is saved; press Reload.", True)
            return
        if event.kind == "invalid_model" or (self._loading and event.request_id is None):
            self._on_load_failed(event)
            return
        stream = self._stream
        if stream is not None and event.request_id in (None, stream.request_id):
            if stream.text:
                self._finish(stream, stream.text, "interrupted")
            else:
                self._stream = None
                self.store.delete_message(stream.message_id)
                self.busy_changed.emit(False)
        self.problem.emit(f"The reply failed ({event.kind}): {event.message}", False)

    def _on_load_failed(self, event: Error) -> None:
        failed = self._loading[0] if self._loading else self.model_path
        self._loading = self._loaded = None
        if self._pending_reply is not None:
            self._pending_reply = None
            self.busy_changed.emit(False)
        if self._good_model_path and self._good_model_path != failed:
            self.model_path = self._good_model_path  # the next reply reloads the model that worked
            self.model_changed.emit(f"{self.model_path.rsplit('/', 1)[-1]} (reloads on next message)")
        else:
            self.model_changed.emit("No model loaded")
        self.problem.emit(f"Could not load the model {failed}: {event.message}", False)

    def shutdown(self) -> None:
        """Stop any reply (saving what it has), and end the engine process."""
        if self._stream is not None:
            self._drop_stream(cancel=True)
        self._pending_reply = None
        self.bridge.shutdown()


def _fields(settings: ChatSettings) -> dict:
    return {name: getattr(settings, name) for name in ChatSettings.__dataclass_fields__}


__all__ = ["ChatController", "Message", "format_stats"]
