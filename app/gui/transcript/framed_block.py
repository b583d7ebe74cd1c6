"""FramedBlock: what a collapsible block of the transcript (a reply's reasoning, a tool card) does with its frame:
cursors into it, its header line, whether a position falls inside it."""

from __future__ import annotations

from PySide6.QtGui import QTextCursor, QTextFrame


class FramedBlock:
    """A block written into a QTextFrame of its own (`frame`, set by the subclass), its header the first line."""

    frame: QTextFrame

    def _cursor(self, position: int) -> QTextCursor:
        cursor = QTextCursor(self.frame.document())
        cursor.setPosition(position)
        return cursor

    def header_cursor(self) -> QTextCursor:
        """A cursor selecting the header's text (what the keyboard focus of the link is)."""
        cursor = self._cursor(self.frame.firstPosition())
        cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
        return cursor

    def contains(self, position: int) -> bool:
        return self.frame.firstPosition() <= position <= self.frame.lastPosition()
