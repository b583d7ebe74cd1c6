"""What a ChatSession tells the outside: the listener it reports to, and the timer it asks for.

The window's ChatController implements the listener with Qt signals of the same names (one
signal each); tests implement it with a list of calls. Every call comes on the thread that
drives the session (the GUI thread in the window).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from app.chat.context_guard import ContextShortfall
from app.chat.tool_permissions import PermissionAsk
from app.services.history.store import Conversation, Message, Version
from app.services.history.tool_steps import ToolCallRecord
from engine.protocol import Done, Error, Loaded, MemoryReport
from models.plan.decision_tree import Plan


class SessionListener(Protocol):
    """What happened in the session, for the views.

    The stream_* calls concern the open conversation only: a reply that streams into another one
    (the user switched chats meanwhile) is saved but not shown.
    """

    def conversations_changed(self) -> None:
        """Titles or order of conversations changed."""

    def conversation_opened(self, conversation: Conversation, messages: list[Message]) -> None:
        """Show this conversation with these finished messages."""

    def versions_changed(self, versions: dict[int, Version]) -> None:
        """Each message's place among its versions (‹ 2/3 ›) in the open conversation, by message id: after
        it opened, and when a reply adds a version."""

    def search_hit(self, message_id: int, query: str) -> None:
        """The open conversation was opened from a search: this message holds `query` (show it)."""

    def message_added(self, message: Message) -> None:
        """A finished message was added to the open conversation."""

    def stream_started(self, message: Message) -> None:
        """The open conversation's reply began (the empty assistant message, state 'streaming')."""

    def stream_text(self, text: str) -> None:
        """More text of the open conversation's streaming reply (its answer)."""

    def stream_reasoning(self, text: str, tokens: int, seconds: float) -> None:
        """More of that reply's reasoning (it comes before the answer), with the reasoning tokens so far
        and the seconds since the first of them."""

    def stream_finished(self, message: Message) -> None:
        """The final message of that reply (complete, cancelled or interrupted)."""

    def tool_step(self, message: Message) -> None:
        """The open conversation's streaming reply called tools: `message` is that reply so far, its
        `tool_steps` ending with the new step (the text streamed since the last step is that step's text now;
        its calls wait). What streams next comes after the step's calls."""

    def tool_call_changed(self, message_id: int, step: int, call: ToolCallRecord) -> None:
        """A call of step `step` (from 0) of the open conversation's streaming reply changed: it runs or ended."""

    def tool_permission_asked(self, ask: PermissionAsk | None) -> None:
        """Ask whether `ask.call` may run (answered with ChatSession.answer_permission); None: no question
        stands any more (it was answered, or the reply stopped)."""

    def busy_changed(self, busy: bool) -> None:
        """A reply is being written or waits for the model (or no longer)."""

    def model_changed(self, text: str) -> None:
        """The model line for the status bar."""

    def stats_changed(self, text: str) -> None:
        """The stats line of the reply that just finished (or of the open chat's last one)."""

    def notice(self, text: str) -> None:
        """A short hint for the status bar."""

    def problem(self, text: str, can_reload: bool) -> None:
        """An error for the banner, and whether Reload applies."""

    def problem_cleared(self) -> None:
        """The banner can go."""

    def history_failed(self) -> None:
        """The chat history refused a write (the store's problem says why); the chat goes on."""

    def context_loaded(self, text: str) -> None:
        """The context the model was loaded with ("Context: Auto — 32,768 tokens"); "" for a remote."""

    def context_outgrown(self, shortfall: ContextShortfall) -> None:
        """A message was not sent: with its reply it would not fit the context."""

    def planned(self, plan: Plan | None) -> None:
        """The plan a load follows (None when the file's header is unreadable: the engine says why)."""

    def load_progress(self, fraction: float, stage: str) -> None:
        """How far the load running now got (0..1 of its stage), and its stage: "reading" the weights,
        "offloading" them (some layers to the GPU) or making the "context"; a retry with fewer GPU layers
        starts again from 0. The load ends with `loaded`, or a `model_changed` that says what came instead."""

    def loaded(self, event: Loaded) -> None:
        """The engine loaded the model."""

    def unloaded(self) -> None:
        """The engine unloaded the model."""

    def reply_done(self, event: Done) -> None:
        """A reply of the session ended (with its stats, for the memory panel)."""

    def engine_error(self, event: Error) -> None:
        """The engine reported an error (after the session handled it)."""

    def memory(self, report: MemoryReport) -> None:
        """The engine's latest memory report."""


class Timer(Protocol):
    """A one-shot timer the session asks for (a QTimer in the window, a hand-fired one in tests)."""

    def start(self, seconds: float) -> None:
        """Call back once, `seconds` from now (restarting it if it runs)."""

    def stop(self) -> None: ...

    @property
    def active(self) -> bool: ...


TimerFactory = Callable[[Callable[[], None]], Timer]
