"""ReplyRunner: gets replies from the engine into the chat store.

It keeps the model the engine should have (reloading it when a conversation wants another
context length), the one reply that may be streaming, and what to do when the engine
fails. The reply is saved while it streams, so a crash loses at most a fraction of a second.
No widgets here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app.chat.load_settings import load_settings_of
from app.chat.stats_line import format_stats
from app.gui.engine_bridge import EngineBridge
from app.load_planner import LoadSettings
from app.store import ChatStore, Message, StoreError
from engine.protocol import ChatMessage, Done, Error, Loaded, SamplingParams

SAVE_INTERVAL_S = 0.4  # a streaming reply reaches the database at least this often
BUSY_HINT = "A reply is still being written: wait for it, or press Esc to stop it."
DEAD_HINT = "The engine stopped: press Reload to start it again."


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


def _file_name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


class ReplyRunner(QObject):
    """Runs one reply at a time through the engine and saves it as it streams.

    Args:
        store: the chat history.
        bridge: the engine, seen from Qt.
        model_path: the model to load.

    Signals:
        stream_started(object): the new, empty assistant Message (state 'streaming').
        stream_text(int, str): conversation id and more text of its streaming reply.
        stream_finished(object): the final Message of a reply (complete, cancelled, interrupted).
        busy_changed(bool): a reply is being written or waits for the model.
        model_changed(str): the model line for the status bar.
        stats_changed(str): the stats line of the reply that just finished.
        notice(str): a short hint for the status bar.
        problem(str, bool): an error for the banner, and whether Reload applies.
        problem_cleared(): the banner can go.
        history_failed(): the chat history refused a write (its `problem` says why); the reply
            being written goes on in the window.
    """

    stream_started = Signal(object)
    stream_text = Signal(int, str)
    stream_finished = Signal(object)
    busy_changed = Signal(bool)
    model_changed = Signal(str)
    stats_changed = Signal(str)
    notice = Signal(str)
    problem = Signal(str, bool)
    problem_cleared = Signal()
    history_failed = Signal()

    def __init__(
        self, store: ChatStore, bridge: EngineBridge, model_path: str, parent: QObject | None = None
    ):
        super().__init__(parent)
        self.store, self.bridge = store, bridge
        self.model_path = str(model_path)
        self._good_model_path: str | None = None
        self._loaded: tuple[str, LoadSettings] | None = None  # (path, settings asked for)
        self._loading: tuple[str, int] | None = None
        self._pending: int | None = None  # conversation whose reply waits for a load
        self._stream: _Stream | None = None
        self.ignored: set[int] = set()  # request ids whose late events are dropped
        self.engine_dead = False
        bridge.loaded.connect(self._on_loaded)
        bridge.token.connect(self._on_token)
        bridge.done.connect(self._on_done)
        bridge.error.connect(self._on_error)
        # Saves what came when the model pauses between tokens, so no text waits longer than the interval.
        self._save_timer = QTimer(self, singleShot=True)
        self._save_timer.timeout.connect(self._save_partial)

    @property
    def busy(self) -> bool:
        return self._stream is not None or self._pending is not None

    @property
    def partial_reply(self) -> str | None:
        """The text of the reply streaming now, if any."""
        return self._stream.text if self._stream else None

    @property
    def loaded(self) -> tuple[str, LoadSettings] | None:
        """(path, settings asked for) of the model loaded now; None while loading or after a failure."""
        return self._loaded if self._loading is None else None

    def streaming_in(self, conversation_id: int) -> tuple[int, str] | None:
        """(message id, text so far) of the reply streaming into that conversation, if any."""
        stream = self._stream
        if stream is None or stream.conversation_id != conversation_id:
            return None
        return stream.message_id, stream.text

    def can_start(self) -> bool:
        """Whether a new reply may start now; says why not in a notice."""
        if self.busy:
            self.notice.emit(BUSY_HINT)
            return False
        if self.engine_dead:
            self.notice.emit(DEAD_HINT)
            return False
        return True

    # ------------------------------------------------------------ engine and model

    def start(self, settings: LoadSettings) -> None:
        """Start the engine and load the model."""
        self.bridge.start()
        self.engine_dead = False
        self._request_load(self.model_path, settings)

    def reload_engine(self, settings: LoadSettings) -> None:
        """Start a new engine process and load the model again (after the engine died)."""
        self.problem_cleared.emit()
        self.bridge.restart()
        self.engine_dead = False
        self._request_load(self.model_path, settings)

    def load_model(self, path: str, settings: LoadSettings) -> bool:
        """Switch to another model file; False while a reply is being written."""
        if self.busy:
            self.notice.emit(BUSY_HINT)
            return False
        self.model_path = str(path)
        self._request_load(self.model_path, settings)
        return True

    def _request_load(self, path: str, settings: LoadSettings) -> None:
        self._loaded = None
        self._loading = (path, settings)
        self.model_changed.emit(f"Loading {_file_name(path)} …")
        self.bridge.load(path, settings)

    @Slot(object)
    def _on_loaded(self, event: Loaded) -> None:
        self._loaded = self._loading or (event.info.path, LoadSettings(event.info.n_ctx))
        self._loading = None
        self._good_model_path = self._loaded[0]
        where = "remote" if event.info.architecture == "remote" else f"context {event.info.n_ctx}"
        self.model_changed.emit(f"{event.info.name} · {where}")
        if event.info.notice:  # loaded with fewer GPU layers than planned: say why
            self.notice.emit(event.info.notice)
        if self._pending is not None:
            conversation_id, self._pending = self._pending, None
            self._begin(conversation_id)

    # ------------------------------------------------------------ replies

    def start_reply(self, conversation_id: int) -> None:
        """Answer the conversation's last message (loading the model first when needed)."""
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None:
            return
        wanted = (self.model_path, load_settings_of(conversation.settings, self.store.pinned_prompts(), self.model_path))
        self._pending = conversation_id
        self.busy_changed.emit(True)
        if self._loaded == wanted and self._loading is None:
            self._pending = None
            self._begin(conversation_id)
        elif self._loading != wanted:
            self._request_load(*wanted)

    def _begin(self, conversation_id: int) -> None:
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
        try:
            message = self.store.add_message(conversation_id, "assistant", "", state="streaming")
        except StoreError:
            self.bridge.cancel(request_id)
            self.ignored.add(request_id)
            self.busy_changed.emit(False)
            self.history_failed.emit()
            return
        self._stream = _Stream(request_id, conversation_id, message.id)
        self.stream_started.emit(message)

    def stop(self) -> None:
        """Stop the reply being written (its Done arrives as 'cancelled')."""
        if self._stream is not None:
            self.bridge.cancel(self._stream.request_id)
            self.notice.emit("Stopping…")
        elif self._pending is not None:
            self._pending = None
            self.busy_changed.emit(False)

    def forget_conversation(self, conversation_id: int) -> None:
        """Cancel a reply for a conversation about to be deleted; its late events are ignored."""
        if self._stream and self._stream.conversation_id == conversation_id:
            stream, self._stream = self._stream, None
            self.bridge.cancel(stream.request_id)
            self.ignored.add(stream.request_id)
            self.busy_changed.emit(False)
        if self._pending == conversation_id:
            self._pending = None
            self.busy_changed.emit(False)

    def shutdown(self) -> None:
        """Stop any reply (saving what it has as 'cancelled') and end the engine process."""
        if self._stream is not None:
            self.bridge.cancel(self._stream.request_id)
            self.ignored.add(self._stream.request_id)
            self._finish(self._stream, self._stream.text, "cancelled")
        self._pending = None
        self.bridge.shutdown()

    @Slot(int, str)
    def _on_token(self, request_id: int, text: str) -> None:
        stream = self._stream
        if stream is None or request_id != stream.request_id:
            return
        stream.parts.append(text)
        self.stream_text.emit(stream.conversation_id, text)
        now = time.monotonic()
        if now - stream.last_save >= SAVE_INTERVAL_S:
            self._save_partial()
        elif not self._save_timer.isActive():
            self._save_timer.start(max(1, round((stream.last_save + SAVE_INTERVAL_S - now) * 1000)))

    @Slot()
    def _save_partial(self) -> None:
        """Write the streaming reply's text so far to the store."""
        self._save_timer.stop()
        stream = self._stream
        if stream is None:
            return
        stream.last_save = time.monotonic()
        self._save(lambda: self.store.update_message_content(stream.message_id, stream.text))

    @Slot(object)
    def _on_done(self, event: Done) -> None:
        if event.request_id in self.ignored:
            self.ignored.discard(event.request_id)
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

    def _save(self, write: Callable[[], object]) -> bool:
        """Run one write of the reply; a refused one is said once (history_failed) and the reply goes on."""
        if not self.store.writable:
            return False
        try:
            write()
        except StoreError:
            self.history_failed.emit()
            return False
        return True

    def _finish(self, stream: _Stream, text: str, state: str, stats: dict | None = None) -> None:
        self._stream = None
        self._save_timer.stop()
        saved = self._save(lambda: self.store.finish_message(stream.message_id, text, state, stats))
        message = self.store.get_message(stream.message_id)
        if message is not None and not saved:  # shown as it ended, though the file keeps what it had
            message = replace(message, content=text, state=state, stats=stats)
        if message is not None:
            self.stream_finished.emit(message)
        self.busy_changed.emit(False)

    # ------------------------------------------------------------ failures

    @Slot(object)
    def _on_error(self, event: Error) -> None:
        if event.request_id is not None and event.request_id in self.ignored:
            self.ignored.discard(event.request_id)
            return
        if event.kind == "engine_died":
            self._on_engine_died(event)
        elif event.kind == "invalid_model" or (self._loading and event.request_id is None):
            self._on_load_failed(event)
        else:
            stream = self._stream
            if stream is not None and event.request_id in (None, stream.request_id):
                if stream.text:
                    self._finish(stream, stream.text, "interrupted")
                else:
                    self._stream = None
                    self.store.delete_message(stream.message_id)
                    self.busy_changed.emit(False)
            self.problem.emit(f"The reply failed ({event.kind}): {event.message}", False)

    def _on_engine_died(self, event: Error) -> None:
        if self.engine_dead:
            return  # reported twice: by the reader thread and by a failed send
        self.engine_dead = True
        self._loaded = self._loading = None
        if self._stream is not None:
            self._finish(self._stream, self._stream.text, "interrupted")
        if self._pending is not None:
            self._pending = None
            self.busy_changed.emit(False)
        self.model_changed.emit("Engine stopped")
        self.problem.emit(f"The engine stopped. {event.message} Your chat is saved; press Reload.", True)

    def _on_load_failed(self, event: Error) -> None:
        failed = self._loading[0] if self._loading else self.model_path
        self._loading = self._loaded = None
        if self._pending is not None:
            self._pending = None
            self.busy_changed.emit(False)
        if self._good_model_path and self._good_model_path != failed:
            self.model_path = self._good_model_path  # the next reply reloads the model that worked
            self.model_changed.emit(f"{_file_name(self.model_path)} (loads again with the next message)")
        else:
            self.model_changed.emit("No model loaded")
        self.problem.emit(f"Could not load the model {failed}: {event.message}", False)


__all__ = ["BUSY_HINT", "DEAD_HINT", "ReplyRunner", "format_stats", "Message"]
