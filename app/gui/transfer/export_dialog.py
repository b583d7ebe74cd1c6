"""The Export dialog: which chats (this one, or all in one file, or all a file each) and in which format."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

Scope = Literal["chat", "all", "each"]
# Extension: (the name shown, the file dialog's filter).
FORMATS = {
    "md": ("Markdown", "Markdown (*.md)"),
    "json": ("JSON (complete: every branch; imports again)", "JSON (*.json)"),
    "html": ("HTML (one self-contained page)", "HTML page (*.html)"),
}


@dataclass(slots=True, frozen=True)
class ExportChoice:
    scope: Scope  # the open chat; all chats in one file; all chats, a file each in a folder
    fmt: str  # a key of FORMATS


class ExportDialog(QDialog):
    """Asks what to export.

    Args:
        parent: the window.
        current_title: the open chat's title; None when no chat is open (only "all" then).
    """

    def __init__(self, parent: QWidget | None, current_title: str | None):
        super().__init__(parent)
        self.setWindowTitle("Export chats")
        self.scopes = QButtonGroup(self)
        self.this_chat = QRadioButton(f"This chat (“{current_title}”)" if current_title else "This chat")
        self.this_chat.setEnabled(current_title is not None)
        self.all_one = QRadioButton("All chats, in one file")
        self.all_each = QRadioButton("All chats, a file each (in a folder you pick)")
        for scope, button in zip(("chat", "all", "each"), (self.this_chat, self.all_one, self.all_each), strict=True):
            self.scopes.addButton(button)
            button.setProperty("scope", scope)
        (self.this_chat if current_title is not None else self.all_one).setChecked(True)
        self.format = QComboBox()
        for ext, (name, _filter) in FORMATS.items():
            self.format.addItem(name, ext)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Export…")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout()
        form.addRow("Format:", self.format)
        layout = QVBoxLayout(self)
        for button in (self.this_chat, self.all_one, self.all_each):
            layout.addWidget(button)
        layout.addLayout(form)
        layout.addWidget(buttons)

    def choice(self) -> ExportChoice:
        return ExportChoice(self.scopes.checkedButton().property("scope"), self.format.currentData())
