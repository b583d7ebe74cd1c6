"""Background jobs: a function runs on a pool thread, its result comes back on the GUI thread.

    jobs = Jobs(parent)
    jobs.run(lambda: client.search(query), on_result, on_error)   # callbacks run on the GUI thread

The function never touches a widget; the callbacks may.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool

from app.gui.common.main_thread import MainThread


class _Job(QRunnable):
    def __init__(self, fn: Callable[[], Any], on_result: Callable[[Any], None],
                 on_error: Callable[[BaseException], None], main: MainThread):
        super().__init__()
        # Held in a list the GUI thread empties: the callbacks (bound methods of widgets) and `fn` (often a
        # lambda over one) must lose their last reference there. Dropped here, on the pool thread, the last
        # reference to a widget nobody else holds deleted the widget on this thread while the GUI painted
        # it (a segfault in QWidgetPrivate::shouldPaintOnScreen, seen in the welcome dialog's tests).
        self._box: list[Any] | None = [fn, on_result, on_error]
        self.main = main

    def run(self) -> None:
        box, self._box = self._box, None
        fn = box[0]
        try:
            outcome = (True, fn())
        except Exception as exc:  # every failure reaches the GUI as a message, never a traceback
            outcome = (False, exc)
        del fn
        box.append(outcome)
        self.main.post(partial(_deliver, box))


def _deliver(box: list[Any]) -> None:
    """On the GUI thread: the job's outcome to its callback; the box's references end here."""
    _fn, on_result, on_error, (ok, value) = box
    box.clear()
    (on_result if ok else on_error)(value)


class Jobs(QObject):
    """A small thread pool of its own, so closing a window can wait for what is running.

    Args:
        parent: the Qt parent; an outcome that arrives after it is deleted is dropped.
        max_threads: jobs that run at once.
    """

    def __init__(self, parent: QObject | None = None, max_threads: int = 2):
        super().__init__(parent)
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(max_threads)
        self._main = MainThread(self)

    def run(self, fn: Callable[[], Any], on_result: Callable[[Any], None],
            on_error: Callable[[BaseException], None]) -> None:
        """Run `fn` in the background; `on_result(value)` or `on_error(exc)` later, on the GUI thread."""
        self.pool.start(_Job(fn, on_result, on_error, self._main))

    @property
    def busy(self) -> bool:
        return self.pool.activeThreadCount() > 0

    def wait(self, timeout_ms: int = 10_000) -> bool:
        return self.pool.waitForDone(timeout_ms)
