"""ChatController: the ChatSession seen from Qt.

The session is plain Python; this object gives it what Qt has: its listener calls become the
signals of the same names (one signal each, made from SessionListener itself), its timer is a QTimer, and the engine's events,
which come on the engine's own thread, are posted onto the GUI thread into `session.handle`.
The window calls the session's methods and connects to these signals. No widgets here.

The path of one token: engine thread → MainThread (signal 1) → session.handle → Replies →
`stream_text` (signal 2) → ChatView.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import get_type_hints

from PySide6.QtCore import QObject, QTimer, Signal

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


QT_SCALARS = (bool, int, float, str)


def listener_signals(listener: type) -> dict[str, Signal]:
    """One Qt signal per method of `listener`, of the same name and argument types (bool, int, float
    and str as themselves, anything else as object): the event is declared once, on the listener."""
    signals = {}
    for name, method in vars(listener).items():
        if name.startswith("_") or not callable(method):
            continue
        hints = get_type_hints(method)
        arguments = list(inspect.signature(method).parameters)[1:]  # after self
        signals[name] = Signal(*(hints[a] if hints[a] in QT_SCALARS else object for a in arguments))
    return signals


# The session's events as signals, made from SessionListener when this module loads; ChatController adds
# nothing to them, so a new event is one method on the listener and one place that connects it.
EVENTS = listener_signals(SessionListener)
SessionSignals = types.new_class("SessionSignals", (QObject,), exec_body=lambda namespace: namespace.update(EVENTS))


class SignalRelay:
    """The session's listener: each of its calls emits the controller's signal of the same name."""

    def __init__(self, signals: QObject):
        for name in EVENTS:
            setattr(self, name, getattr(signals, name).emit)


class ChatController(SessionSignals):  # type: ignore[misc, valid-type]
    """Owns the ChatSession of the window and relays what it says as signals: one per SessionListener
    method, of the same name (`conversations_changed`, `stream_text`, `loaded`…).

    Args:
        store: the chat history.
        model_path: the model to load when the engine starts.
        planner: plans each load.
        make_engine: makes the engine, given the handler its events go to (from any thread).
        parent: the Qt parent.
    """

    def __init__(self, store: ChatStore, model_path: str, planner: Planner, make_engine: EngineFactory,
                 parent: QObject | None = None):
        super().__init__(parent)
        # The engine's handler, safe from any thread: each event runs session.handle on the GUI thread.
        self.deliver: Callable[[Event], None] = MainThread(self).relay(lambda event: self.session.handle(event))
        listener: SessionListener = SignalRelay(self)  # type: ignore[assignment]
        self.session = ChatSession(store, make_engine(self.deliver), planner, model_path, listener,
                                   lambda callback: _QtTimer(callback, self))
