"""The Export dialog: which chats (this one, or all in one file, or all a file each), in which format, and for
JSON whether the chats' images and audio clips go inside the file or into a folder beside it (HTML always holds them inline,
Markdown links to them in that folder)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
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
    embed_media: bool = False  # JSON: the images and clips inside the file (base64), not in a folder beside it


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
        self.embed_media = QCheckBox("Put the images and audio inside the file (else in a folder beside it)")
        self.embed_media.setToolTip("JSON only: HTML always holds its images and audio; Markdown links to files "
                                    "beside it.")
        self.format.currentIndexChanged.connect(self._format_changed)
        self._format_changed()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Export…")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout()
        form.addRow("Format:", self.format)
        form.addRow("", self.embed_media)
        layout = QVBoxLayout(self)
        for button in (self.this_chat, self.all_one, self.all_each):
            layout.addWidget(button)
        layout.addLayout(form)
        layout.addWidget(buttons)

    def _format_changed(self) -> None:
        self.embed_media.setEnabled(self.format.currentData() == "json")

    def choice(self) -> ExportChoice:
        fmt = self.format.currentData()
        return ExportChoice(self.scopes.checkedButton().property("scope"), fmt,
                            fmt == "json" and self.embed_media.isChecked())
