"""Run the real entry point (`app.gui.main.main`) in a test without leaving anything behind.

`main()` runs `app.exec()`. A guard that quits the application keeps a broken test from hanging the
suite; it must stop when `main()` returns. A bare `QTimer.singleShot(90_000, QApplication.quit)`
outlives its test: 90 s later it fires in whatever test the worker runs then, and when that is another
`main()` still starting its window, the quit leaves Qt's thread data quitting, so every event loop
after it (each qtbot.waitSignal and waitUntil) returns at once and the rest of that worker's Qt tests
time out (CI, stop 43). tests/qt_event_loops.py catches a test that leaves the loops so.
"""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app.gui import main as gui_main


def run_main(argv: list[str], limit_ms: int = 90_000) -> int:
    """`main(argv)`'s exit code; the application is told to quit if it still runs after `limit_ms`."""
    guard = QTimer()
    guard.setSingleShot(True)
    guard.timeout.connect(QApplication.quit)
    guard.start(limit_ms)
    try:
        return gui_main.main(argv)
    finally:
        guard.stop()
