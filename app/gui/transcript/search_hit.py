"""The words a chat was opened for (a search of the chat list), marked in the message that holds them.

The marks are ExtraSelections: painted over the text without changing the document, so the rendered
messages stay as they are and the marks go with the next chat opened.
"""

from __future__ import annotations

from PySide6.QtGui import QPalette, QTextCharFormat, QTextCursor, QTextDocument
from PySide6.QtWidgets import QTextEdit

MAX_MARKS = 200  # a one-letter search in a long reply: enough to see, without thousands of selections


def mark_format(palette: QPalette) -> QTextCharFormat:
    """The theme's own highlight colours (what a selection has), so the mark reads in light and dark themes."""
    fmt = QTextCharFormat()
    fmt.setBackground(palette.color(QPalette.ColorRole.Highlight))
    fmt.setForeground(palette.color(QPalette.ColorRole.HighlightedText))
    return fmt


def hit_marks(document: QTextDocument, query: str, start: int, end: int,
              fmt: QTextCharFormat) -> list[QTextEdit.ExtraSelection]:
    """A mark on each place `query` is found (case-insensitive) between `start` and `end`."""
    marks: list[QTextEdit.ExtraSelection] = []
    query = query.strip()
    if not query:
        return marks
    cursor = QTextCursor(document)
    cursor.setPosition(start)
    while len(marks) < MAX_MARKS:
        cursor = document.find(query, cursor)
        if cursor.isNull() or cursor.selectionEnd() > end:
            break
        mark = QTextEdit.ExtraSelection()
        mark.cursor = QTextCursor(cursor)
        mark.format = fmt
        marks.append(mark)
    return marks


def show_marks(view: QTextEdit, header: QTextCursor, end: int, query: str) -> None:
    """Mark `query` in the message from `header` to `end`, and scroll to the message: its header near the top,
    and its first mark in sight when the message is long."""
    marks = hit_marks(view.document(), query, header.position(), end, mark_format(view.palette()))
    view.setExtraSelections(marks)
    bar = view.verticalScrollBar()
    bar.setValue(bar.value() + view.cursorRect(header).top() - view.fontMetrics().height())
    if marks:
        at = QTextCursor(marks[0].cursor)
        at.clearSelection()
        view.setTextCursor(at)
        view.ensureCursorVisible()
