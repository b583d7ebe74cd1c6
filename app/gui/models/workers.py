"""Background jobs for the model manager: a function runs on a pool thread, its result comes back on the GUI thread.

    jobs = Jobs(parent)
    jobs.run(lambda: client.search(query), on_result, on_error)   # callbacks run on the GUI thread

The function never touches a widget; the callbacks may.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, Qt, QThreadPool, Signal, Slot

log = logging.getLogger(__name__)


class Job(QObject):
    """One background call; its outcome is delivered, queued, on the thread the Job lives in (the GUI's).

    Signals:
        finished(object): the function's result.
        failed(object): the exception it raised.
    """

    finished = Signal(object)
    failed = Signal(object)
    _outcome = Signal(bool, object)

    def __init__(self, fn: Callable[[], Any], parent: QObject | None = None):
        super().__init__(parent)
        self.fn = fn
        self._outcome.connect(self._deliver, Qt.ConnectionType.QueuedConnection)

    def run_here(self) -> None:
        """Run the function on the calling (pool) thread and post the outcome."""
        try:
            result = self.fn()
        except Exception as exc:  # every failure reaches the GUI as a message, never a traceback
            ok, result = False, exc
        else:
            ok = True
        try:
            self._outcome.emit(ok, result)
        except RuntimeError:  # the owner was deleted while the job ran
            log.debug("background job outlived its owner")

    @Slot(bool, object)
    def _deliver(self, ok: bool, result: object) -> None:
        (self.finished if ok else self.failed).emit(result)
        self.deleteLater()


class _Runnable(QRunnable):
    def __init__(self, job: Job):
        super().__init__()
        self.job = job

    def run(self) -> None:
        self.job.run_here()


class Jobs(QObject):
    """A small thread pool of its own, so closing the manager can wait for what is running.

    Args:
        parent: the Qt parent.
        max_threads: jobs that run at once.
    """

    def __init__(self, parent: QObject | None = None, max_threads: int = 2):
        super().__init__(parent)
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(max_threads)
        self._running: set[Job] = set()

    def run(self, fn: Callable[[], Any], on_result: Callable[[Any], None],
            on_error: Callable[[BaseException], None]) -> Job:
        """Run `fn` in the background; `on_result(value)` or `on_error(exc)` later, on the GUI thread."""
        job = Job(fn, self)
        self._running.add(job)
        job.finished.connect(on_result)
        job.failed.connect(on_error)
        job.destroyed.connect(lambda *_: self._running.discard(job))
        self.pool.start(_Runnable(job))
        return job

    @property
    def busy(self) -> bool:
        return self.pool.activeThreadCount() > 0

    def wait(self, timeout_ms: int = 10_000) -> bool:
        return self.pool.waitForDone(timeout_ms)
