"""ChatController: the ChatSession seen from Qt.

The session is plain Python; this object gives it what Qt has: its listener calls become the
signals of the same names (one signal each), its timer is a QTimer, and the engine's events,
which come on the engine's own thread, are posted onto the GUI thread into `session.handle`.
The window calls the session's methods and connects to these signals. No widgets here.

The path of one token: engine thread → MainThread (signal 1) → session.handle → Replies →
`stream_text` (signal 2) → ChatView.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal, SignalInstance

from app.chat.listener import SessionListener
from app.chat.model_state import Planner
from app.chat.session import ChatSession
from app.gui.common.main_thread import MainThread
from app.services.history.store import ChatStore
from engine.interface import Engine
from engine.protocol import Event

EngineFactory = Callable[[Callable[[Event], None]], Engine]  # (event handler for any thread) -> engine


class _QtTimer:
    """The session's Timer as a single-shot QTimer."""

    def __init__(self, callback: Callable[[], None], parent: QObject):
        self._timer = QTimer(parent, singleShot=True)
        self._timer.timeout.connect(callback)

    def start(self, seconds: float) -> None:
        self._timer.start(max(1, round(seconds * 1000)))

    def stop(self) -> None:
        self._timer.stop()

    @property
    def active(self) -> bool:
        return self._timer.isActive()


class _Emitter:
    """A SessionListener whose every call emits the controller's signal of the same name."""

    def __init__(self, signals: QObject):
        self._signals = signals

    def __getattr__(self, name: str) -> Callable[..., None]:
        signal = getattr(self._signals, name)
        if not isinstance(signal, SignalInstance):
            raise AttributeError(name)
        return signal.emit


class ChatController(QObject):
    """Owns the ChatSession of the window and relays what it says as signals (see SessionListener).

    Args:
        store: the chat history.
        model_path: the model to load when the engine starts.
        planner: plans each load.
        make_engine: makes the engine, given the handler its events go to (from any thread).
        parent: the Qt parent.
    """

    conversations_changed = Signal()
    conversation_opened = Signal(object, object)
    versions_changed = Signal(object)
    search_hit = Signal(int, str)
    message_added = Signal(object)
    stream_started = Signal(object)
    stream_text = Signal(str)
    stream_reasoning = Signal(str, int, float)
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
    planned = Signal(object)
    load_progress = Signal(float, str)
    loaded = Signal(object)
    unloaded = Signal()
    reply_done = Signal(object)
    engine_error = Signal(object)
    memory = Signal(object)

    def __init__(self, store: ChatStore, model_path: str, planner: Planner, make_engine: EngineFactory,
                 parent: QObject | None = None):
        super().__init__(parent)
        # The engine's handler, safe from any thread: each event runs session.handle on the GUI thread.
        self.deliver: Callable[[Event], None] = MainThread(self).relay(lambda event: self.session.handle(event))
        listener: SessionListener = _Emitter(self)  # type: ignore[assignment]
        self.session = ChatSession(store, make_engine(self.deliver), planner, model_path, listener,
                                   lambda callback: _QtTimer(callback, self))
