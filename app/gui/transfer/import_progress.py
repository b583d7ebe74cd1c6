"""The import's progress in the status bar: chats read, how much of the file, and Cancel.

Inline rather than a dialog, so the chat stays usable while a large export imports.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from app.services.transfer.importer import ImportProgress

STEPS = 1000  # the bar counts per mille: a file's byte count does not fit a QProgressBar's int


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


class ImportProgressBar(QWidget):
    """"Importing… 120 chats, 12.0 of 200.0 MB" with a bar and a Cancel button; hidden when no import runs.

    Signals:
        cancel_requested(): Cancel was pressed.
    """

    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.label = QLabel()
        self.bar = QProgressBar(maximum=STEPS, textVisible=False)
        self.bar.setMaximumWidth(160)
        self.bar.setAccessibleName("Import progress")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop after the chat being imported (those imported stay)")
        self.cancel_button.clicked.connect(self._cancel)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label)
        layout.addWidget(self.bar)
        layout.addWidget(self.cancel_button)
        self.hide()

    def start(self, name: str) -> None:
        self.label.setText(f"Importing {name}…")
        self.bar.setValue(0)
        self.cancel_button.setEnabled(True)
        self.show()

    def show_progress(self, progress: ImportProgress) -> None:
        if progress.bytes_total > 0:
            self.bar.setValue(min(STEPS, progress.bytes_done * STEPS // progress.bytes_total))
        if self.cancel_button.isEnabled():
            chats = f"{progress.chats_done:,} chat{'' if progress.chats_done == 1 else 's'}"
            self.label.setText(f"Importing… {chats}, {_mb(progress.bytes_done)} of {_mb(progress.bytes_total)}")

    def finish(self) -> None:
        self.hide()

    def _cancel(self) -> None:
        self.cancel_button.setEnabled(False)
        self.label.setText("Cancelling after this chat…")
        self.cancel_requested.emit()
