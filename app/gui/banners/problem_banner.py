"""Banner: a non-modal error strip above the chat (the engine died, a reply failed), with Reload."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from app.gui.common.theme import set_tone


class Banner(QFrame):
    """A non-modal error strip above the chat, with an optional Reload button.

    Args:
        parent: the Qt parent.
    """

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("banner")
        set_tone(self, "error", frame=True)  # a red wash from the theme, light or dark
        self.label = QLabel(wordWrap=True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.reload_button = QPushButton("Reload")
        self.close_button = QPushButton("Dismiss")
        self.close_button.clicked.connect(self.hide)
        layout = QHBoxLayout(self)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.reload_button)
        layout.addWidget(self.close_button)
        self.hide()

    def show_problem(self, text: str, can_reload: bool) -> None:
        self.label.setText(text)
        self.reload_button.setVisible(can_reload)
        self.show()

    def text(self) -> str:
        return self.label.text()
