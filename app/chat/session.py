"""ChatSession: what a conversation does, without Qt.

Send, regenerate and edit (branch_actions.py: versions and branches); open, rename and delete chats; the model the engine should have
(ModelState) and the reply that streams into the store (Replies). It reports through a
`SessionListener`; the engine's events come in through `handle`, on the thread that drives the
session (the window posts them onto the GUI thread). Tests drive it with a scripted engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from types import EllipsisType

from app.chat.branch_actions import BranchActions
from app.chat.context_guard import ContextShortfall, conversation_tokens, estimate_tokens, shortfall
from app.chat.document_context import document_budget
from app.chat.engine_tokens import EngineTokens, TokenCountFailed
from app.chat.folders import ChatFolders
from app.chat.hints import BUSY_HINT, DEAD_HINT
from app.chat.listener import SessionListener, TimerFactory
from app.chat.load_settings import load_settings_of
from app.chat.model_state import ModelState, Planner, Wanted, not_running
from app.chat.replies import Replies
from app.chat.session_tools import SessionTools
from app.chat.stats_line import format_stats
from app.chat.tool_rounds import ToolFinished
from app.mcp.types import ServerStatus
from app.services.documents.chunking import TokenCounter
from app.services.history.sent_documents import SentDocuments
from app.services.history.store import (
    DEFAULT_TITLE,
    AudioRef,
    ChatSettings,
    ChatStore,
    Conversation,
    FileRef,
    ImageRef,
    Message,
    Preset,
    StoreError,
)
from app.services.load_settings import LoadSettings
from app.services.media.intake import CheckedAudio, PreparedAudio, PreparedImage
from engine.interface import Engine, EngineNotRunning
from engine.interface import TokenCounter as EngineCounter
from engine.protocol import Done, Error, Event, Loaded, LoadProgress, MemoryReport, Token, Unloaded
from models.plan.decision_tree import Plan


class ChatSession(BranchActions, SessionTools):
    """The chat logic between the store, the engine and the views.

    Args:
        store: the chat history.
        engine: the engine to drive (its events must reach `handle`).
        planner: plans each load.
        model_path: the model to load when the engine starts.
        listener: told of everything the views show.
        make_timer: makes the timer that saves a streaming reply while the model pauses.
    """

    def __init__(self, store: ChatStore, engine: Engine, planner: Planner, model_path: str,
                 listener: SessionListener, make_timer: TimerFactory):
        self.store, self.listener = store, listener
        self.model = ModelState(engine, planner, model_path, listener)
        self.replies = Replies(store, listener, make_timer, self._is_open)
        self.folders = ChatFolders(store, listener)
        self.current: Conversation | None = None
        # A new chat's settings from the open one's (None: no chat open); the window's preferences replace it.
        self.new_chat_settings: Callable[[ChatSettings | None], ChatSettings] = (
            lambda base: replace(base) if base else ChatSettings())

    @property
    def busy(self) -> bool:
        return self.replies.busy

    @property
    def model_path(self) -> str:
        """The model the next reply is answered with."""
        return self.model.path

    @property
    def plan(self) -> Plan | None:
        """The plan of the last load asked for."""
        return self.model.plan

    @property
    def engine(self) -> Engine:
        return self.model.engine

    @property
    def partial_reply(self) -> str | None:
        """The text of the reply streaming now, if any."""
        return self.replies.partial_reply

    # ------------------------------------------------------------ the engine and the model

    def _load_settings(self, settings: ChatSettings | None = None) -> LoadSettings:
        settings = settings or (self.current.settings if self.current else ChatSettings())
        return load_settings_of(settings, self.store.pinned_prompts(), self.model.path)

    def start(self) -> None:
        """Start the engine and load the model."""
        self._guarded(lambda: self.model.start(self._load_settings()))

    def reload_engine(self) -> None:
        """Start the engine afresh and load the model again (after it died, or on another engine)."""
        self._guarded(lambda: self.model.restart(self._load_settings()))

    def load_model(self, path: str) -> bool:
        """Switch to another model; False (with a notice) while a reply is being written."""
        if self.busy:
            self.listener.notice(BUSY_HINT)
            return False
        self.model.path = str(path)
        self._guarded(lambda: self.model.request_load(self.model.wants(self._load_settings())))
        return True

    def cancel_load(self) -> bool:
        """Stop the model's load; the model loaded before comes back (ModelState.on_load_cancelled). False
        when nothing loads."""
        try:
            return self.model.cancel_load()
        except EngineNotRunning as exc:
            self._on_engine_died(not_running(exc))
            return False

    def use_engine(self, engine: Engine, planner: Planner) -> tuple[Engine, Planner]:
        """Chat through another engine (a remote server, or the local one again) and start it;
        the engine and planner used until now (the caller shuts that engine down if it wants)."""
        previous = self.model.use(engine, planner)
        self.reload_engine()
        return previous

    def stop(self) -> None:
        self.replies.stop(self.model.engine)

    def shutdown(self) -> None:
        """Stop any reply (saving what it has as 'cancelled') and end the engine."""
        self.replies.shutdown(self.model.engine)
        self.model.engine.shutdown()

    def _guarded(self, request: Callable[[], object]) -> None:
        """Run an engine request; a gone engine is reported as dead, as its reader would."""
        try:
            request()
        except EngineNotRunning as exc:
            self._on_engine_died(not_running(exc))

    def _start_reply(self, conversation_id: int) -> None:
        """Answer the conversation's last message, loading the model first when needed."""
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None:
            return
        wanted = self.model.wants(self._load_settings(conversation.settings))
        self.replies.wait_for_model(conversation_id)
        if self.model.loaded == wanted:
            self._begin(conversation_id)
        elif self.model.loading != wanted:
            self._guarded(lambda: self._load_for(wanted))

    def _load_for(self, wanted: Wanted) -> None:
        """Load what the waiting message needs; a load the plan refuses leaves the message to the user."""
        if not self.model.request_load(wanted):
            self.replies.drop_pending()

    def _begin(self, conversation_id: int) -> None:
        conversation = self.store.get_conversation(conversation_id)
        if conversation is not None and self._tools_starting(conversation.settings):
            return  # the reply stays pending: on_server_status begins it
        tools = self._tools_for(conversation.settings) if conversation is not None else None
        choice = conversation.settings.tool_choice if conversation is not None else "auto"
        try:
            self.replies.begin(self.model.engine, conversation_id, tools, choice, sees_images=self.model.sees_images,
                               hears_at=self.model.audio_sample_rate if self.model.hears_audio else None)
        except EngineNotRunning as exc:
            self._on_engine_died(not_running(exc))

    # ------------------------------------------------------------ engine events

    def handle(self, event: Event) -> None:
        """One event of the engine (on the thread that drives the session)."""
        if isinstance(event, Token):
            self.replies.on_token(event)
        elif isinstance(event, ToolFinished):
            self._guarded(lambda: self.replies.on_tool_finished(event))
        elif isinstance(event, ServerStatus):
            self.on_server_status(event)
        elif isinstance(event, Done):
            self._guarded(lambda: self.replies.on_done(event, self.model.answering))
            self.listener.reply_done(event)
        elif isinstance(event, Error):
            self._on_error(event)
            self.listener.engine_error(event)
        elif isinstance(event, Loaded):
            self.model.on_loaded(event)
            if self.replies.pending is not None:
                self._begin(self.replies.pending)
            self.listener.loaded(event)
        elif isinstance(event, LoadProgress):
            self.model.on_load_progress(event)
        elif isinstance(event, MemoryReport):
            self.listener.memory(event)
        elif isinstance(event, Unloaded):
            self.listener.unloaded()

    def _on_error(self, event: Error) -> None:
        if self.replies.take_ignored(event.request_id):
            return
        if event.kind == "engine_died":
            self._on_engine_died(event)
        elif event.kind == "load_cancelled":
            self.replies.drop_pending()  # the message that asked for the load waits for the user again
            self._guarded(lambda: self.model.on_load_cancelled(event))
        elif event.kind == "invalid_model" or (self.model.loading and event.request_id is None):
            self.replies.drop_pending()
            self.model.on_load_failed(event)
        else:
            self.replies.on_error(event)
            self.listener.problem(f"The reply failed ({event.kind}): {event.message}", False)

    def _on_engine_died(self, event: Error) -> None:
        if self.model.dead:
            return  # reported twice: by the reader thread and by a failed send
        self.replies.interrupt()
        self.model.on_died(event)

    # ------------------------------------------------------------ conversations

    def _is_open(self, conversation_id: int) -> bool:
        return self.current is not None and self.current.id == conversation_id

    def list_conversations(self, query: str = "", folder_id: int | None | EllipsisType = ...) -> list[Conversation]:
        """The chats, pinned first; `query` keeps those whose title or any branch's text holds it, `folder_id`
        those in that folder (None: in none; left out: in any)."""
        return self.store.list_conversations(query, folder_id)

    def new_conversation(self) -> Conversation:
        """A new chat with the settings of the open one."""
        settings = self.new_chat_settings(self.current.settings if self.current else None)
        # What was allowed "Always in this chat" was allowed in that chat only: a new one asks again; and the
        # knowledge a chat answers from is that chat's.
        settings = replace(settings, allowed_tools=(), knowledge=None)
        conversation = self.store.create_conversation(DEFAULT_TITLE, settings)
        self.listener.conversations_changed()
        self.open_conversation(conversation.id)
        return conversation

    def open_conversation(self, conversation_id: int, find: str = "") -> None:
        """Show a conversation; with `find` (a search), the branch of its first message holding it."""
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None:
            return
        self.current = conversation
        hit = self.store.find_in_conversation(conversation_id, find) if find else None
        if hit is not None and not self.busy:
            self._show_hit(hit)
        messages = self.store.list_messages(conversation_id)
        streaming = self.replies.streaming_in(conversation_id)
        if streaming is not None:
            messages = [m for m in messages if m.id != streaming.message_id]
        self.listener.conversation_opened(conversation, messages)
        replies = [m for m in messages if m.role == "assistant" and m.stats]
        self.listener.stats_changed(format_stats(replies[-1].stats) if replies else "")
        if streaming is not None:
            self.replies.show_stream(streaming)
        self.listener.versions_changed(self.store.versions(conversation_id))
        if hit is not None and any(m.id == hit for m in messages):
            self.listener.search_hit(hit, find.strip())

    def close_conversation(self) -> None:
        """No chat is open (the history was opened afresh)."""
        self.current = None

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        title = title.strip()
        if not title:
            return
        try:
            self.store.rename_conversation(conversation_id, title)
        except StoreError:
            self.listener.history_failed()
            return
        if self.current and self.current.id == conversation_id:
            self.current.title = title
        self.listener.conversations_changed()

    def delete_conversation(self, conversation_id: int) -> None:
        """Delete a conversation; a reply streaming into it is cancelled first."""
        self.replies.forget(self.model.engine, conversation_id)
        self.store.delete_conversation(conversation_id)
        if self.current and self.current.id == conversation_id:
            self.current = None
            remaining = self.store.list_conversations()
            if not remaining:
                self.new_conversation()
                return
            self.open_conversation(remaining[0].id)
        self.listener.conversations_changed()

    def update_settings(self, settings: ChatSettings, fields: Iterable[str] | None = None) -> None:
        """Store the open conversation's settings; they apply from the next reply. With `fields`, only those
        are taken from `settings` (what the settings panel shows: the chat's tools, chosen elsewhere, stay)."""
        if self.current is not None:
            if fields is not None:
                settings = replace(self.current.settings, **{f: getattr(settings, f) for f in fields})
            self.current.settings = settings
            self.store.update_settings(self.current.id, settings)

    def save_preset(self, preset: Preset) -> list[Preset]:
        """Save `preset` (replacing one of the same name); the presets there are now."""
        self.store.save_preset(preset)
        when = " Its system prompt is prefilled from the next model load." if preset.pinned else ""
        self.listener.notice(f"Preset “{preset.name}” saved.{when}")
        return self.store.list_presets()

    def delete_preset(self, name: str) -> list[Preset]:
        self.store.delete_preset(name)
        self.listener.notice(f"Preset “{name}” deleted.")
        return self.store.list_presets()

    # ------------------------------------------------------------ messages

    def _can_start(self) -> bool:
        """Whether a new reply may start now; says why not in a notice."""
        if self.busy:
            self.listener.notice(BUSY_HINT)
            return False
        if self.model.dead:
            self.listener.notice(DEAD_HINT)
            return False
        return True

    def send(self, text: str, images: Sequence[PreparedImage] = (),
             clips: Sequence[CheckedAudio | PreparedAudio] = (), documents: SentDocuments | None = None,
             files: Sequence[FileRef] = ()) -> bool:
        """Send a user message, with the images and audio clips it carries and the documents' block it goes with
        (DocumentContext.sent(), made for this chat's `document_budget`) and the originals of its documents (`files`,
        in the media store already); False (the caller keeps the text and
        the attachments) when it cannot be sent now, or when the conversation would outgrow the context (then
        `context_outgrown` says so)."""
        text = text.strip()
        if not (text or images or clips or (documents and documents.block)) or not self._can_start():
            return False
        try:
            if self.current is None:
                self.new_conversation()
            conversation = self.current
            if self._outgrows(self.store.list_messages(conversation.id), text, editing=False, images=images,
                              clips=clips, documents=documents):
                return False
            message = self.store.add_message(conversation.id, "user", text, images=images, clips=clips,
                                             documents=documents, files=files)
        except StoreError:  # the disk filled up meanwhile: the composer keeps the text
            self.listener.history_failed()
            return False
        if conversation.title == DEFAULT_TITLE:
            self.rename_conversation(conversation.id, _title_of(text, images, clips, documents))
        else:
            self.listener.conversations_changed()
        self.listener.message_added(message)
        self._start_reply(conversation.id)
        return True

    def document_budget(self, text: str) -> int:
        """The tokens the documents of a message `text` may take in the open chat (a new one's settings when
        none is open): its context less the conversation, the question, the reply's max tokens and a margin, and
        at most the chat's document budget. Counted as the context guard counts, so a block made for it passes
        the guard."""
        settings = self.current.settings if self.current else self.new_chat_settings(None)
        context = self.context_of(settings)
        n_ctx = context[0] if context is not None else (settings.load.n_ctx or UNKNOWN_CONTEXT)
        messages = self.store.list_messages(self.current.id) if self.current else []
        conversation = conversation_tokens(messages, settings.system_prompt, text)
        left = document_budget(n_ctx, conversation, settings.max_tokens)
        return left if settings.document_budget is None else min(left, settings.document_budget)

    def set_knowledge(self, name: str | None) -> None:
        """The knowledge index the open chat answers from (None: none); its passages go with each message."""
        if self.current is not None and self.current.settings.knowledge != name:
            self.current.settings = replace(self.current.settings, knowledge=name)
            self.store.update_settings(self.current.id, self.current.settings)

    def token_counter(self) -> TokenCounter:
        """What counts a document's tokens: the loaded model's tokenizer through the engine (callable from any
        thread; a count that fails is estimated), else the guard's estimate (a remote server counts nothing)."""
        engine = self.model.engine
        if not isinstance(engine, EngineCounter) or not engine.running:
            return estimate_tokens
        exact = EngineTokens(engine)

        def count(text: str) -> int:
            try:
                return exact(text)
            except TokenCountFailed:
                return estimate_tokens(text)

        return count

    def last_user_text(self) -> str | None:
        return self._last("user")

    def last_reply(self) -> str | None:
        return self._last("assistant")

    def _last(self, role: str) -> str | None:
        if self.current is None:
            return None
        found = [m for m in self.store.list_messages(self.current.id) if m.role == role]
        return found[-1].content if found else None

    # ------------------------------------------------------------ the context a conversation needs

    def context_of(self, settings: ChatSettings) -> tuple[int, int | None] | None:
        """(context, largest context that fits or None) a reply with `settings` gets (ModelState.context_for)."""
        return self.model.context_for(self._load_settings(settings))

    def _outgrows(self, messages: list[Message], text: str, editing: bool, edit_of: int | None = None,
                  images: Sequence[PreparedImage | ImageRef] = (), clips: Sequence[CheckedAudio | PreparedAudio | AudioRef] = (),
                  documents: SentDocuments | None = None) -> bool:
        """Whether answering `text` (with `images`, `clips` and the block of `documents`) after `messages` would
        outgrow the context (`context_outgrown` is told)."""
        settings = self.current.settings
        context = self.context_of(settings)
        if context is None:
            return False
        sizes = [(i.full_width, i.full_height) if isinstance(i, PreparedImage) else (i.width, i.height) for i in images]
        short = shortfall(messages, settings.system_prompt, text, settings.max_tokens, *context, editing=editing,
                          edit_of=edit_of, images=sizes, image_tokens=self.model.image_tokens, carried=tuple(images),
                          clips=[c.seconds for c in clips], clip_tokens=self.model.clip_tokens,
                          carried_clips=tuple(clips), documents=documents.tokens if documents else 0)
        if short is not None and documents is not None:
            short = replace(short, documents=documents)
        if short is not None:
            self.listener.context_outgrown(short)
        return short is not None

    def send_with_larger_context(self, short: ContextShortfall) -> bool:
        """Set the open chat's context to `short.max_context` and send its message (the model reloads
        first); False when it cannot be sent (the caller keeps the text).

        Auto stays Auto with its cap raised to that figure; a fixed context becomes that figure.
        """
        if self.current is None or not short.can_reload:
            return False
        settings = self.current.settings
        load = settings.load
        if load.n_ctx is None:
            larger = replace(load, auto_ctx_cap=max(load.auto_ctx_cap, short.max_context))
        else:
            larger = replace(load, n_ctx=short.max_context)
        self.update_settings(replace(settings, load=larger))
        if short.editing and short.edit_of is not None:
            return self.edit_message(short.edit_of, short.text, list(short.images), list(short.clips))
        return self.send(short.text, short.images, short.clips, short.documents)


# The context a block of documents is made for when the chat's is not known (a remote server's own): a small
# one that every model served today has, so the block never outgrows it.
UNKNOWN_CONTEXT = 4096


def _title_of(text: str, images: Sequence, clips: Sequence, documents: SentDocuments | None) -> str:
    """A new chat's title: its first message's first line, else the name of what it carries."""
    if text.splitlines():
        return text.splitlines()[0][:48]
    if images or clips:
        return (*images, *clips)[0].name[:48]
    return (documents.notes[0].split(" · ")[0] if documents and documents.notes else "Documents")[:48]
