"""Unhandled exceptions in the window: logged, then shown in a dialog with the log's path.

Without this, PySide prints the traceback to a terminal the user does not have and the window
goes on in an unknown state, or the bundle vanishes. `CrashReporter.install()` replaces
`sys.excepthook` (exceptions in slots and Qt overrides arrive there) and `threading.excepthook`
(worker threads); the dialog is always built on the GUI thread.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from pathlib import Path
from types import TracebackType

from PySide6.QtCore import QObject, Qt, QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices, QGuiApplication
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

log = logging.getLogger(__name__)


def open_log_folder(log_path: Path) -> bool:
    """Open the folder of the log files (one tailor-*.log and engine-*.log per process) in the file manager."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    return QDesktopServices.openUrl(QUrl.fromLocalFile(str(log_path.parent)))


class CrashDialog(QDialog):
    """What went wrong, where the log is, and the choice to go on or quit.

    Args:
        log_path: the log file the traceback was written to.
        details: the traceback text.
        parent: the Qt parent (None: a top-level dialog, so it shows even without a window).
    """

    def __init__(self, log_path: Path, details: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.log_path = log_path
        self.count = 1
        self.setWindowTitle("Tailor — unexpected error")
        self.setMinimumWidth(560)
        self.message = QLabel(wordWrap=True, textFormat=Qt.TextFormat.PlainText)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details = QPlainTextEdit(details, readOnly=True)
        self.details.setMinimumHeight(160)
        self._set_message()
        self.open_button = QPushButton("Open log folder")
        self.copy_button = QPushButton("Copy details")
        self.continue_button = QPushButton("Continue")
        self.quit_button = QPushButton("Quit Tailor")
        self.continue_button.setDefault(True)
        buttons = QHBoxLayout()
        buttons.addWidget(self.open_button)
        buttons.addWidget(self.copy_button)
        buttons.addStretch(1)
        buttons.addWidget(self.continue_button)
        buttons.addWidget(self.quit_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.message)
        layout.addWidget(self.details, 1)
        layout.addLayout(buttons)
        self.open_button.clicked.connect(lambda: open_log_folder(self.log_path))
        self.copy_button.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.details.toPlainText()))
        self.continue_button.clicked.connect(self.close)
        self.quit_button.clicked.connect(_quit)

    def add(self, details: str) -> None:
        """Another error while the dialog is open: one dialog, not a pile of them."""
        self.count += 1
        self.details.appendPlainText("\n" + details)
        self._set_message()

    def _set_message(self) -> None:
        errors = "An unexpected error" if self.count == 1 else f"{self.count} unexpected errors"
        self.message.setText(
            f"{errors} happened inside Tailor. Your chats are saved as they stream.\n"
            f"The details were written to the log: {self.log_path}\n"
            "You can go on, or quit and start Tailor again. Please attach the log when you report this."
        )


class CrashReporter(QObject):
    """Logs unhandled exceptions and shows them in a `CrashDialog`.

    Args:
        log_path: the log file (already configured by `configure_logging`).
        parent: the Qt parent; it must live on the GUI thread.

    Signals:
        crashed(str): an unhandled exception, as traceback text (delivered on the GUI thread).
    """

    crashed = Signal(str)

    def __init__(self, log_path: Path, parent: QObject | None = None):
        super().__init__(parent)
        self.log_path = log_path
        self.dialog: CrashDialog | None = None
        self._previous_hook = sys.excepthook
        self._previous_thread_hook = threading.excepthook
        self.crashed.connect(self._show)  # queued when emitted from a worker thread

    def install(self) -> CrashReporter:
        self._previous_hook, self._previous_thread_hook = sys.excepthook, threading.excepthook
        sys.excepthook = self._hook
        threading.excepthook = self._thread_hook
        return self

    def uninstall(self) -> None:
        sys.excepthook, threading.excepthook = self._previous_hook, self._previous_thread_hook

    def _hook(self, exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            self._previous_hook(exc_type, exc, tb)
            return
        log.error("unhandled exception", exc_info=(exc_type, exc, tb))
        try:
            self.crashed.emit("".join(traceback.format_exception(exc_type, exc, tb)))
        except RuntimeError:  # the reporter is already gone (the app is closing)
            self._previous_hook(exc_type, exc, tb)

    def _thread_hook(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_value is None or args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else "a thread"
        log.error("unhandled exception in %s", name, exc_info=(args.exc_type, args.exc_value, args.exc_traceback))
        text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
        try:
            self.crashed.emit(f"In {name}:\n{text}")
        except RuntimeError:
            pass

    @Slot(str)
    def _show(self, details: str) -> None:
        try:
            if self.dialog is not None and self.dialog.isVisible():
                self.dialog.add(details)
            else:
                self.dialog = CrashDialog(self.log_path, details)
                self.dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, False)
            self.dialog.show()
            self.dialog.raise_()
            self.dialog.activateWindow()
        except Exception:  # never recurse into ourselves: the log already has the first error
            log.exception("could not show the crash dialog")


def _quit() -> None:
    QApplication.closeAllWindows()  # the main window's closeEvent shuts the engine down
    QApplication.quit()
