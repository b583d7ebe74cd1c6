"""Help: the welcome (Welcome…, also shown on the first start) and the folder of the logs."""

from __future__ import annotations

from PySide6.QtCore import Signal, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QWidget

from app.gui.dialogs.crash import open_log_folder
from app.gui.dialogs.welcome import FirstRunDialog
from app.services.paths import AppPaths


class HelpMenu(QMenu):
    """The Help menu, and the welcome it opens.

    Args:
        parent: the window (the welcome opens over it).

    Signals:
        chat_requested(): the welcome's "Chat now" was pressed (it has closed).
        model_requested(str): the welcome's "Show this model" was pressed, with the repo id.
    """

    chat_requested = Signal()
    model_requested = Signal(str)

    def __init__(self, parent: QWidget):
        super().__init__("&Help", parent)
        self._window = parent
        self.welcome_action = QAction("Welcome…", parent)
        self.welcome_action.triggered.connect(self.show_welcome)
        self.welcome: FirstRunDialog | None = None
        self.addAction(self.welcome_action)
        # The folder of the tailor-*.log and engine-*.log files (one per process): what a bug report needs.
        self.open_log_action = self.addAction("Open log folder", lambda: open_log_folder(AppPaths.default().app_log))

    @Slot()
    def show_welcome(self) -> FirstRunDialog:
        """Open (or raise) the welcome: this machine, the built-in model, a recommended download."""
        if self.welcome is None:
            self.welcome = FirstRunDialog(self._window)
            self.welcome.chat_requested.connect(self.chat_requested)
            self.welcome.model_requested.connect(self.model_requested)
        self.welcome.show()
        self.welcome.raise_()
        self.welcome.activateWindow()
        return self.welcome

    def shutdown(self) -> None:
        """The window closes: close the welcome and wait for its hardware detection."""
        if self.welcome is not None:
            self.welcome.close()
            self.welcome.jobs.wait()
