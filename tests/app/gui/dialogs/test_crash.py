"""Unhandled exceptions in the window: a real exception raised in a slot shows a dialog with the log's path."""

from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QObject, Qt, QTimer, QUrl, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QApplication, QPushButton

from app.gui.dialogs.crash import CrashDialog, CrashReporter
from app.services.log_setup import configure_logging
from app.services.paths import AppPaths
from engine.process_log import latest_process_log
from tests.app.gui import theme_fixtures
from tests.app.gui.entry_point import run_main

app = theme_fixtures.app  # main() installs the theme on the application: put back afterwards

# pytest-qt would catch the exceptions itself; here the app's own hook must see them.
pytestmark = pytest.mark.qt_no_exception_capture
WAIT_MS = 10_000


class Boom(Exception):
    pass


@pytest.fixture
def log_file(tmp_path: Path):
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    yield configure_logging(tmp_path / "logs" / "tailor.log")
    root.handlers[:], root.level = saved


@pytest.fixture
def reporter(log_file: Path):
    hooks = sys.excepthook, threading.excepthook
    crash = CrashReporter(log_file).install()
    yield crash
    crash.uninstall()
    if crash.dialog is not None:
        crash.dialog.close()
    assert (sys.excepthook, threading.excepthook) == hooks


class OpenedUrls(QObject):
    """Receives the URLs QDesktopServices would hand to the desktop (registered as the file: handler)."""

    def __init__(self):
        super().__init__()
        self.urls: list[QUrl] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.urls.append(url)


@pytest.fixture
def opened():
    receiver = OpenedUrls()
    QDesktopServices.setUrlHandler("file", receiver, "open")
    yield receiver
    QDesktopServices.unsetUrlHandler("file")


def _raise_in_slot(qtbot, message: str) -> QPushButton:
    button = QPushButton("Break")
    qtbot.addWidget(button)

    def broken() -> None:
        raise Boom(message)

    button.clicked.connect(broken)
    button.show()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    return button


def test_an_exception_in_a_slot_shows_the_dialog_and_goes_to_the_log(qtbot, reporter, log_file: Path):
    button = _raise_in_slot(qtbot, "the slot broke")
    qtbot.waitUntil(lambda: reporter.dialog is not None and reporter.dialog.isVisible(), timeout=WAIT_MS)
    dialog = reporter.dialog
    assert str(log_file) in dialog.message.text() and "unexpected error" in dialog.message.text()
    assert "Boom: the slot broke" in dialog.details.toPlainText()
    text = log_file.read_text()
    assert "unhandled exception" in text and "Boom: the slot broke" in text and "Traceback" in text
    qtbot.mouseClick(dialog.continue_button, Qt.MouseButton.LeftButton)
    assert not dialog.isVisible() and button.isVisible()  # the app goes on


def test_repeated_errors_share_one_dialog(qtbot, reporter):
    _raise_in_slot(qtbot, "first")
    qtbot.waitUntil(lambda: reporter.dialog is not None and reporter.dialog.isVisible(), timeout=WAIT_MS)
    dialog = reporter.dialog
    _raise_in_slot(qtbot, "second")
    qtbot.waitUntil(lambda: dialog.count == 2, timeout=WAIT_MS)
    assert reporter.dialog is dialog and "2 unexpected errors" in dialog.message.text()
    assert [w for w in QApplication.topLevelWidgets() if isinstance(w, CrashDialog) and w.isVisible()] == [dialog]
    assert "first" in dialog.details.toPlainText() and "second" in dialog.details.toPlainText()


def test_an_exception_in_a_worker_thread_is_shown_on_the_gui_thread(qtbot, reporter, log_file: Path):
    def work() -> None:
        raise Boom("the worker broke")

    worker = threading.Thread(target=work, name="downloader")
    worker.start()
    worker.join()
    qtbot.waitUntil(lambda: reporter.dialog is not None and reporter.dialog.isVisible(), timeout=WAIT_MS)
    assert "In downloader" in reporter.dialog.details.toPlainText()
    assert "the worker broke" in log_file.read_text()


def test_open_log_folder_opens_the_folder_of_the_log(qtbot, reporter, opened: OpenedUrls, log_file: Path):
    _raise_in_slot(qtbot, "x")
    qtbot.waitUntil(lambda: reporter.dialog is not None and reporter.dialog.isVisible(), timeout=WAIT_MS)
    qtbot.mouseClick(reporter.dialog.open_button, Qt.MouseButton.LeftButton)
    assert [Path(u.toLocalFile()) for u in opened.urls] == [log_file.parent]


def test_help_open_log_folder_in_the_window(qtbot, make_window, opened: OpenedUrls):
    window = make_window(start=False)
    (help_menu,) = [a.menu() for a in window.menuBar().actions() if a.text() == "&Help"]
    assert window.help_menu.open_log_action in help_menu.actions()
    window.help_menu.open_log_action.trigger()
    assert [Path(u.toLocalFile()) for u in opened.urls] == [AppPaths.default().log_dir]
    assert AppPaths.default().log_dir.is_dir()


def test_the_real_entry_point_installs_the_reporter(app, qtbot, tmp_path: Path, log_file: Path):
    from app.gui.main_window import MainWindow

    hook = sys.excepthook
    details: list[str] = []

    def crash() -> None:
        raise Boom("while the app runs")

    def close_when_reported() -> None:
        dialogs = [w for w in QApplication.topLevelWidgets() if isinstance(w, CrashDialog) and w.isVisible()]
        if not dialogs:
            QTimer.singleShot(50, close_when_reported)
            return
        details.append(dialogs[0].message.text() + dialogs[0].details.toPlainText())
        dialogs[0].close()
        for widget in QApplication.topLevelWidgets():
            if isinstance(widget, MainWindow):
                widget.close()

    QTimer.singleShot(100, crash)
    QTimer.singleShot(100, close_when_reported)
    assert run_main(["tailor", "--db", str(tmp_path / "chats.sqlite3")]) == 0
    (text,) = details
    log_file = latest_process_log(AppPaths.default().app_log)
    assert "while the app runs" in text and str(log_file) in text
    assert "while the app runs" in log_file.read_text()
    assert sys.excepthook is hook  # main() leaves the interpreter as it found it
