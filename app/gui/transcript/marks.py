"""What the chat view marks on its messages: the ‹ 2/3 › bar of a message with other versions, and the
words a chat was opened for (a search). A helper the view owns, over its message headers (TranscriptState's
`headers`: a cursor at each shown message's header, in order) and its bars (version_bar.py).
"""

from __future__ import annotations

from PySide6.QtCore import QPoint
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QTextBrowser

from app.gui.transcript.search_hit import show_marks
from app.gui.transcript.state import TranscriptState
from app.gui.transcript.version_bar import VersionBars
from app.services.history.store import Version


class TranscriptMarks:
    """The chat view's versions and search marks.

    Args:
        view: the chat view.
        state: what it shows.
        bars: its ‹ 2/3 › bars.
    """

    def __init__(self, view: QTextBrowser, state: TranscriptState, bars: VersionBars):
        self._view, self._state, self._bars = view, state, bars

    def set_versions(self, versions: dict[int, Version]) -> None:
        """Each message's place among its versions (the open chat's, by id): a ‹ 2/3 › bar where there are more."""
        self._bars.set_versions(versions, self._state.shown_ids())

    def header_point(self, message_id: int) -> QPoint | None:
        """Where a shown message's header is, in viewport coordinates (None: not shown)."""
        cursor = self._state.headers.get(message_id)
        return self._view.cursorRect(cursor).center() if cursor is not None else None

    def show_hit(self, message_id: int, query: str) -> bool:
        """Scroll to a message and mark `query` in it (the chat was opened from a search); False when the
        message is not shown."""
        headers = self._state.headers
        cursor = headers.get(message_id)
        if cursor is None:
            return False
        ids = list(headers)
        after = ids.index(message_id) + 1
        end = headers[ids[after]].position() if after < len(ids) else self._end_position()
        show_marks(self._view, cursor, end, query)
        return True

    def highlights(self) -> list[tuple[int, str]]:
        """What is marked: (message id, text) for each mark."""
        found = []
        for mark in self._view.extraSelections():
            message = self._state.message_at(mark.cursor.selectionStart())
            found.append((message.id if message else -1, mark.cursor.selectedText()))
        return found

    def _end_position(self) -> int:
        cursor = QTextCursor(self._view.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        return cursor.position()
