"""tests/qt_event_loops.py: the check that names a test leaving Qt's event loops quitting at once."""

from __future__ import annotations

import time

from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QApplication

from tests.app.gui.entry_point import run_main
from tests.qt_event_loops import event_loops_quit_at_once


def loop_runs_for(ms: int) -> float:
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    start = time.monotonic()
    loop.exec()
    return time.monotonic() - start


def test_an_exit_outside_exec_is_caught_and_the_loops_run_again(qapp: QApplication):
    assert event_loops_quit_at_once() is False
    qapp.exit(0)  # what a quit landing between main()'s start and its app.exec() amounts to
    assert loop_runs_for(100) < 0.05
    assert event_loops_quit_at_once() is True
    assert loop_runs_for(100) >= 0.09
    assert event_loops_quit_at_once() is False


def test_the_entry_points_guard_stops_with_main(qapp: QApplication, monkeypatch):
    from app.gui import main as gui_main

    monkeypatch.setattr(gui_main, "main", lambda argv: 0)
    assert run_main(["tailor"], limit_ms=50) == 0
    # The next main() of the worker: a guard left armed would quit its app.exec() after 50 ms.
    QTimer.singleShot(200, qapp.quit)
    start = time.monotonic()
    qapp.exec()
    assert time.monotonic() - start >= 0.19
