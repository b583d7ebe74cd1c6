"""MainThread: the one way from another thread onto the GUI thread.

Engine events, download events and background jobs all arrive on threads of their own; a
widget may be touched only on the GUI thread. `post(fn)` runs `fn` there, queued behind what
the GUI thread is doing, in the order posted (as anki's taskman `run_on_main`):

    main = MainThread(parent)
    engine = EngineClient(on_event=main.relay(session.handle))   # handle() runs on the GUI thread
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from PySide6.QtCore import QObject, Qt, Signal, Slot

log = logging.getLogger(__name__)
T = TypeVar("T")


class MainThread(QObject):
    """Posts calls onto the thread this object lives in (made on the GUI thread: the GUI's).

    Args:
        parent: the Qt parent; once it is deleted, later posts are dropped (logged at debug level).
    """

    _posted = Signal(object)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        # Queued even when posted from the GUI thread itself: a caller is never re-entered from its own call.
        self._posted.connect(self._run, Qt.ConnectionType.QueuedConnection)

    def post(self, fn: Callable[[], object]) -> None:
        """Run `fn()` on the GUI thread, soon (safe to call from any thread)."""
        try:
            self._posted.emit(fn)
        except RuntimeError:  # deleted while a worker thread still ran
            log.debug("posted after the GUI side was deleted: %r", fn)

    def relay(self, handler: Callable[[T], object]) -> Callable[[T], None]:
        """A callback for another thread: each call runs `handler(value)` on the GUI thread."""
        return lambda value: self.post(partial(handler, value))

    @Slot(object)
    def _run(self, fn: Callable[[], object]) -> None:
        fn()
