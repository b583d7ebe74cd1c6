"""Composer: the box where the user writes a message."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtGui import QImage, QKeyEvent
from PySide6.QtWidgets import QPlainTextEdit, QWidget

from app.services.documents.extract import kind_of_name
from app.services.media.sniff import AUDIO_FILE_SUFFIXES, SUFFIXES

_WRITE = "Write a message — Enter sends, Shift+Enter adds a line"
_EDIT = "Edit your message — Enter sends it as a new version (the old one stays), Esc cancels"


class Composer(QPlainTextEdit):
    """A message box where Enter sends and Shift+Enter starts a new line.

    In editing mode (`set_editing`) the text goes in place of one of your messages (`editing_id`; None:
    the last one), as a new version of it; Esc leaves that mode.

    Args:
        parent: the Qt parent.

    Signals:
        submitted(str): Enter was pressed; the text (the box is not cleared: the receiver
            clears it once the message was accepted).
        edit_cancelled(): Esc was pressed while editing a message.
        files_given(list): image, audio or document files were dropped or pasted (their paths), to attach
            rather than type.
        image_pasted(QImage): an image itself was pasted (a screenshot from the clipboard).
    """

    submitted = Signal(str)
    edit_cancelled = Signal()
    files_given = Signal(list)
    image_pasted = Signal(QImage)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setPlaceholderText(_WRITE)
        self.setTabChangesFocus(True)
        self.setMaximumHeight(140)
        self.editing = False
        self.editing_id: int | None = None

    def set_editing(self, text: str | None, message_id: int | None = None) -> None:
        """Start editing `text`, the message `message_id` (None: the last one), or leave edit mode with None."""
        self.editing = text is not None
        self.editing_id = message_id if self.editing else None
        self.setPlaceholderText(_EDIT if self.editing else _WRITE)
        if text is not None:
            self.setPlainText(text)
            self.moveCursor(self.textCursor().MoveOperation.End)
        self.setFocus()

    def canInsertFromMimeData(self, source: QMimeData) -> bool:  # noqa: N802 (Qt override)
        return source.hasImage() or bool(media_files(source)) or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:  # noqa: N802 (Qt override: paste and drop)
        files = media_files(source)
        if files:
            self.files_given.emit(files)
            return
        if source.hasImage():
            image = source.imageData()
            if isinstance(image, QImage) and not image.isNull():
                self.image_pasted.emit(image)
                return
        super().insertFromMimeData(source)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 (Qt override)
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")
            else:
                self.submitted.emit(self.toPlainText())
            event.accept()
            return
        if event.key() == Qt.Key.Key_Escape and self.editing:
            self.set_editing(None)
            self.clear()
            self.edit_cancelled.emit()
            event.accept()
            return
        super().keyPressEvent(event)


# The suffixes the media intake reads as images (it checks the bytes too: a suffix only says what to try).
IMAGE_SUFFIXES = frozenset({*SUFFIXES.values(), ".jpeg"})
# What is attached rather than typed: images, and audio (WAV is read; MP3, FLAC... are refused by name with the
# command that converts them, rather than pasted as a path); and documents, by their names (kind_of_name).
MEDIA_SUFFIXES = IMAGE_SUFFIXES | AUDIO_FILE_SUFFIXES


def media_files(source: QMimeData) -> list[Path]:
    """The local image, audio and document files a paste or drop carries (by name); other URLs and files are
    text as before."""
    if not source.hasUrls():
        return []
    paths = [Path(url.toLocalFile()) for url in source.urls() if url.isLocalFile()]
    return [p for p in paths if p.suffix.lower() in MEDIA_SUFFIXES or kind_of_name(p.name) is not None]
