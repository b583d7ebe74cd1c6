"""Send, beside the message box; while a reply streams, Stop in its place."""

from __future__ import annotations

from PySide6.QtCore import Slot
from PySide6.QtWidgets import QPushButton, QSizePolicy, QStackedWidget, QWidget


class SendStop(QStackedWidget):
    """The Send button, or the Stop button while a reply streams: the same place.

    Args:
        parent: the Qt parent.
    """

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.send_button = QPushButton("Send")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.stop_button.setToolTip("Stop the reply (Esc)")
        self.addWidget(self.send_button)
        self.addWidget(self.stop_button)
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)

    @Slot(bool)
    def set_busy(self, busy: bool) -> None:
        """While a reply streams Stop takes the Send button's place; focus on the one goes to the other."""
        had_focus = self.currentWidget().hasFocus()
        self.stop_button.setEnabled(busy)
        self.setCurrentWidget(self.stop_button if busy else self.send_button)
        if had_focus:
            self.currentWidget().setFocus()
