"""ChatController: what happens when the user sends, regenerates, edits or picks a chat.

It owns the open conversation and hands replies to a ReplyRunner; the views hear about
changes through its signals. No widgets here.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QObject, Signal, Slot

from app.gui.context_guard import ContextShortfall, shortfall
from app.gui.engine_bridge import EngineBridge
from app.gui.reply_runner import BUSY_HINT, ReplyRunner, format_stats, load_settings_of
from app.load_planner import LoadSettings
from app.store import DEFAULT_TITLE, ChatSettings, ChatStore, Conversation, Message, Preset, StoreError
from engine.protocol import Loaded
from models.plan import Plan

__all__ = ["BUSY_HINT", "ChatController"]


def _max_context(plan: Plan | None) -> int | None:
    """The largest context that fits, as the plan found it; None without a plan."""
    return (plan.max_context or None) if plan is not None else None


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
        stream_text(str): more text of the open conversation's streaming reply.
        stream_finished(object): the final Message of the reply that streamed into it.
        busy_changed(bool), model_changed(str), stats_changed(str), notice(str),
        problem(str, bool), problem_cleared(), history_failed(): as ReplyRunner's.
        context_loaded(str): the context the model was loaded with ("Context: Auto — 32,768 tokens").
        context_outgrown(object): a `ContextShortfall`: the message was not sent, because the
            conversation with it and its reply would not fit the context.
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
    history_failed = Signal()
    context_loaded = Signal(str)
    context_outgrown = Signal(object)

    def __init__(
        self, store: ChatStore, bridge: EngineBridge, model_path: str, parent: QObject | None = None
    ):
        super().__init__(parent)
        self.store, self.bridge = store, bridge
        self.runner = ReplyRunner(store, bridge, model_path, self)
        self.current: Conversation | None = None
        r = self.runner
        for name in (
            "busy_changed",
            "model_changed",
            "stats_changed",
            "notice",
            "problem",
            "problem_cleared",
            "history_failed",
        ):
            getattr(r, name).connect(getattr(self, name))
        r.stream_started.connect(self._on_stream_started)
        r.stream_text.connect(self._on_stream_text)
        r.stream_finished.connect(self._on_stream_finished)
        self._loaded_n_ctx = 0  # the context of the model loaded now (ModelInfo.n_ctx); 0 when unknown
        bridge.loaded.connect(self._on_loaded)  # after the runner's own slot: runner.loaded is set

    # ------------------------------------------------------------ engine (delegated)

    @property
    def busy(self) -> bool:
        return self.runner.busy

    @property
    def partial_reply(self) -> str | None:
        return self.runner.partial_reply

    def _load_settings(self) -> LoadSettings:
        settings = self.current.settings if self.current else ChatSettings()
        return load_settings_of(settings, self.store.pinned_prompts(), self.runner.model_path)

    def start(self) -> None:
        """Start the engine and load the model."""
        self.runner.start(self._load_settings())

    def reload_engine(self) -> None:
        """Start a new engine process and load the model again."""
        self.runner.reload_engine(self._load_settings())

    def load_model(self, path: str) -> bool:
        """Switch to another model file; False while a reply is being written."""
        return self.runner.load_model(path, self._load_settings())

    def stop(self) -> None:
        self.runner.stop()

    def shutdown(self) -> None:
        self.runner.shutdown()

    # ------------------------------------------------------------ presets

    def save_preset(self, preset: Preset) -> list[Preset]:
        """Save `preset` (replacing one of the same name); the presets there are now."""
        self.store.save_preset(preset)
        when = " Its system prompt is prefilled from the next model load." if preset.pinned else ""
        self.notice.emit(f"Preset “{preset.name}” saved.{when}")
        return self.store.list_presets()

    def delete_preset(self, name: str) -> list[Preset]:
        self.store.delete_preset(name)
        self.notice.emit(f"Preset “{name}” deleted.")
        return self.store.list_presets()

    # ------------------------------------------------------------ conversations

    def list_conversations(self, query: str = "") -> list[Conversation]:
        return self.store.list_conversations(query)

    def new_conversation(self) -> Conversation:
        """A new chat with the settings of the open one."""
        settings = self.current.settings if self.current else ChatSettings()
        fields = {name: getattr(settings, name) for name in ChatSettings.__dataclass_fields__}
        conversation = self.store.create_conversation(DEFAULT_TITLE, ChatSettings(**fields))
        self.conversations_changed.emit()
        self.open_conversation(conversation.id)
        return conversation

    def open_conversation(self, conversation_id: int) -> None:
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None:
            return
        self.current = conversation
        messages = self.store.list_messages(conversation_id)
        streaming = self.runner.streaming_in(conversation_id)
        if streaming is not None:
            messages = [m for m in messages if m.id != streaming[0]]
        self.conversation_opened.emit(conversation, messages)
        replies = [m for m in messages if m.role == "assistant" and m.stats]
        self.stats_changed.emit(format_stats(replies[-1].stats) if replies else "")
        if streaming is not None:
            self.stream_started.emit(self.store.get_message(streaming[0]))
            self.stream_text.emit(streaming[1])

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        title = title.strip()
        if not title:
            return
        try:
            self.store.rename_conversation(conversation_id, title)
        except StoreError:
            self.history_failed.emit()
            return
        if self.current and self.current.id == conversation_id:
            self.current.title = title
        self.conversations_changed.emit()

    def delete_conversation(self, conversation_id: int) -> None:
        """Delete a conversation; a reply streaming into it is cancelled first."""
        self.runner.forget_conversation(conversation_id)
        self.store.delete_conversation(conversation_id)
        if self.current and self.current.id == conversation_id:
            self.current = None
            remaining = self.store.list_conversations()
            if not remaining:
                self.new_conversation()
                return
            self.open_conversation(remaining[0].id)
        self.conversations_changed.emit()

    def update_settings(self, settings: ChatSettings) -> None:
        """Store the open conversation's settings; they apply from the next reply."""
        if self.current is not None:
            self.current.settings = settings
            self.store.update_settings(self.current.id, settings)

    # ------------------------------------------------------------ messages

    def send(self, text: str) -> bool:
        """Send a user message; False (the caller keeps the text) when it cannot be sent now, or when
        the conversation would outgrow the context (then `context_outgrown` says so)."""
        text = text.strip()
        if not text or not self.runner.can_start():
            return False
        try:
            if self.current is None:
                self.new_conversation()
            conversation = self.current
            if self._outgrows(self.store.list_messages(conversation.id), text, editing=False):
                return False
            message = self.store.add_message(conversation.id, "user", text)
        except StoreError:  # the disk filled up meanwhile: the composer keeps the text
            self.history_failed.emit()
            return False
        if conversation.title == DEFAULT_TITLE:
            self.rename_conversation(conversation.id, text.splitlines()[0][:48])
        else:
            self.conversations_changed.emit()
        self.message_added.emit(message)
        self.runner.start_reply(conversation.id)
        return True

    def regenerate(self) -> bool:
        """Replace the last assistant reply of the open conversation with a new one."""
        if self.current is None or not self.runner.can_start():
            return False
        messages = self.store.list_messages(self.current.id)
        if messages and messages[-1].role == "assistant":
            self.store.delete_message(messages.pop().id)
        if not messages or messages[-1].role != "user":
            return False
        self.open_conversation(self.current.id)
        self.runner.start_reply(self.current.id)
        return True

    def edit_last_user_message(self, text: str) -> bool:
        """Replace the last user message (dropping what followed it) and answer it again."""
        text = text.strip()
        if not text or self.current is None or not self.runner.can_start():
            return False
        messages = self.store.list_messages(self.current.id)
        users = [i for i, m in enumerate(messages) if m.role == "user"]
        if not users or self._outgrows(messages[: users[-1]], text, editing=True):
            return False
        for later in messages[users[-1] + 1 :]:
            self.store.delete_message(later.id)
        self.store.update_message_content(messages[users[-1]].id, text)
        self.open_conversation(self.current.id)
        self.runner.start_reply(self.current.id)
        return True

    # ------------------------------------------------------------ the context a conversation needs

    def context_of(self, settings: ChatSettings) -> tuple[int, int | None] | None:
        """(context, largest context that fits or None) a reply with `settings` gets; None when not
        known: a remote server (its own context), or a file the planner cannot read (the load fails
        and the engine says why)."""
        wanted = load_settings_of(settings, self.store.pinned_prompts(), self.runner.model_path)
        if self.runner.loaded == (self.runner.model_path, wanted) and self._loaded_n_ctx:
            return self._loaded_n_ctx, _max_context(self.bridge.plan)  # the plan the loaded model follows
        # A reload comes first; Auto decides its context only when planned. This is the plan that load
        # makes (a header read and some arithmetic: ~20 ms for the starter model, on this thread as the
        # load's own is), needed only for the first message after a change of model or settings.
        plan = self.bridge.planner.plan_load(self.runner.model_path, wanted).plan
        if plan is None:
            return None
        return settings.n_ctx or plan.context, _max_context(plan)

    def _outgrows(self, messages: list[Message], text: str, editing: bool) -> bool:
        """Whether answering `text` after `messages` would outgrow the context (`context_outgrown` is sent)."""
        settings = self.current.settings
        context = self.context_of(settings)
        if context is None:
            return False
        short = shortfall(messages, settings.system_prompt, text, settings.max_tokens, *context, editing=editing)
        if short is not None:
            self.context_outgrown.emit(short)
        return short is not None

    def send_with_larger_context(self, short: ContextShortfall) -> bool:
        """Set the open chat's context to `short.max_context` and send its message (the model reloads
        first); False when it cannot be sent (the caller keeps the text).

        Auto stays Auto with its cap raised to that figure; a fixed context becomes that figure.
        """
        if self.current is None or not short.can_reload:
            return False
        settings = self.current.settings
        if settings.n_ctx is None:
            larger = replace(settings, auto_ctx_cap=max(settings.auto_ctx_cap, short.max_context))
        else:
            larger = replace(settings, n_ctx=short.max_context)
        self.update_settings(larger)
        return self.edit_last_user_message(short.text) if short.editing else self.send(short.text)

    @Slot(object)
    def _on_loaded(self, event: Loaded) -> None:
        self._loaded_n_ctx = event.info.n_ctx
        loaded = self.runner.loaded
        if not event.info.n_ctx:  # a remote server: its own context, not reported
            self.context_loaded.emit("")
        elif loaded is not None and loaded[1].n_ctx is None:
            self.context_loaded.emit(f"Context: Auto — {event.info.n_ctx:,} tokens")
        else:
            self.context_loaded.emit(f"Context: {event.info.n_ctx:,} tokens")

    def last_user_text(self) -> str | None:
        return self._last("user")

    def last_reply(self) -> str | None:
        return self._last("assistant")

    def _last(self, role: str) -> str | None:
        if self.current is None:
            return None
        found = [m for m in self.store.list_messages(self.current.id) if m.role == role]
        return found[-1].content if found else None

    # ------------------------------------------------------------ the runner's stream, filtered

    def _is_open(self, conversation_id: int) -> bool:
        return self.current is not None and self.current.id == conversation_id

    @Slot(object)
    def _on_stream_started(self, message: Message) -> None:
        if self._is_open(message.conversation_id):
            self.stream_started.emit(message)

    @Slot(int, str)
    def _on_stream_text(self, conversation_id: int, text: str) -> None:
        if self._is_open(conversation_id):
            self.stream_text.emit(text)

    @Slot(object)
    def _on_stream_finished(self, message: Message) -> None:
        if self._is_open(message.conversation_id):
            self.stream_finished.emit(message)
