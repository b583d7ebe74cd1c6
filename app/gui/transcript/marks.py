"""What the chat view marks on its messages: the ‹ 2/3 › bar of a message with other versions, and the
words a chat was opened for (a search). A base class of ChatView (chat_view.py), whose message headers
(`_headers`: a cursor at each shown message's header, in order) and bars (`version_bars`) it uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QPoint

from app.gui.transcript.search_hit import show_marks
from app.services.history.store import Version

if TYPE_CHECKING:
    from app.gui.transcript.view import ChatView


class ChatMarks:
    """ChatView's versions and search marks."""

    def set_versions(self: ChatView, versions: dict[int, Version]) -> None:
        """Each message's place among its versions (the open chat's, by id): a ‹ 2/3 › bar where there are more."""
        self.version_bars.set_versions(versions, list(self._headers))

    def set_busy(self: ChatView, busy: bool) -> None:
        """A reply is being written or waits for the model: the versions cannot be switched, nor a reply
        regenerated or a message edited, meanwhile."""
        self._busy = busy
        self.version_bars.set_enabled(not busy and not self._streaming)
        self.message_actions.schedule()  # its Regenerate and Edit follow

    def shown_ids(self: ChatView) -> list[int]:
        """The messages shown, in order."""
        return list(self._headers)

    def header_point(self: ChatView, message_id: int) -> QPoint | None:
        """Where a shown message's header is, in viewport coordinates (None: not shown)."""
        cursor = self._headers.get(message_id)
        return self.cursorRect(cursor).center() if cursor is not None else None

    def show_hit(self: ChatView, message_id: int, query: str) -> bool:
        """Scroll to a message and mark `query` in it (the chat was opened from a search); False when the
        message is not shown."""
        cursor = self._headers.get(message_id)
        if cursor is None:
            return False
        ids = list(self._headers)
        after = ids.index(message_id) + 1
        end = self._headers[ids[after]].position() if after < len(ids) else self._end_cursor().position()
        show_marks(self, cursor, end, query)
        return True

    def highlights(self: ChatView) -> list[tuple[int, str]]:
        """What is marked: (message id, text) for each mark."""
        found = []
        for mark in self.extraSelections():
            message = self.message_at(mark.cursor.selectionStart())
            found.append((message.id if message else -1, mark.cursor.selectedText()))
        return found

