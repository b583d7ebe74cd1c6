"""What can be done with the chat view's messages: copy one, or one of its code blocks, regenerate the last
reply, edit one of yours, branch; from the hover buttons (message_actions.py), the context menu
(message_menu.py) and the links in the text (a code block's Copy, a reasoning header). A base class of
ChatView (chat_view.py), whose messages (`_messages`, `_headers`) and stream it reads.

Copying happens here, with the clipboard, so the window has nothing to wire for it; regenerating, editing
and branching are asked of the window by the view's signals.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from PySide6.QtCore import QPoint, QUrl, Slot
from PySide6.QtGui import QContextMenuEvent, QDesktopServices, QGuiApplication, QTextCursor
from PySide6.QtWidgets import QMenu

from app.chat.reasoning_text import copy_text
from app.gui.transcript.html import CODE_SCHEME
from app.gui.transcript.message_menu import add_message_actions
from app.gui.transcript.reasoning_block import SCHEME
from app.services.history.store import Message
from app.services.markdown_render import code_blocks

if TYPE_CHECKING:
    from app.gui.transcript.view import ChatView


class ChatActions:
    """ChatView's message actions."""

    def can_change(self: ChatView) -> bool:
        """Whether a reply may be regenerated or a message edited now (not while one is written)."""
        return not self._busy and not self._streaming

    def header_cursor(self: ChatView, message_id: int) -> QTextCursor | None:
        """The cursor at a shown message's header (None: not shown)."""
        return self._headers.get(message_id)

    def message_at(self: ChatView, position: int) -> Message | None:
        """The message shown at a document position (the streaming reply with what it has so far)."""
        before = [mid for mid, cursor in self._headers.items() if cursor.position() <= position]
        return self._shown(before[-1]) if before else None

    def _shown(self: ChatView, message_id: int) -> Message | None:
        message = self._messages.get(message_id)
        if message is None or message_id != self._stream_id:
            return message
        block = self.reasoning_blocks.get(message_id)
        thought = (block.text if block else "") + "".join(self._thought.pending)
        return replace(message, content="".join(self._stream_text), reasoning=thought,
                       reasoning_closed=not self._thought.thinking or not thought)

    def copy_message(self: ChatView, message_id: int) -> None:
        """Put a shown message on the clipboard: its text, a reply's answer alone (not its reasoning)."""
        message = self._shown(message_id)
        if message is not None:
            QGuiApplication.clipboard().setText(copy_text(message))
            self.copied.emit("Copied the reply" if message.role == "assistant" else "Copied the message")

    def copy_code(self: ChatView, message_id: int, index: int) -> str | None:
        """Put a message's `index`-th code block on the clipboard, exactly its source text (a block still
        streaming: what it has so far, which may be more than the last frame showed); the code, or None."""
        message = self._shown(message_id)
        blocks = code_blocks(message.content) if message is not None else []
        if not 0 <= index < len(blocks):
            return None
        lang, code = blocks[index]
        QGuiApplication.clipboard().setText(code)
        self.copied.emit(f"Copied the {lang} code" if lang else "Copied the code")
        return code

    def message_menu(self: ChatView, pos: QPoint) -> QMenu:
        """The context menu at `pos` (viewport coordinates): the standard one, with what can be done with
        the message under it (message_menu.py)."""
        menu = self.createStandardContextMenu(pos)
        message = self.message_at(self.cursorForPosition(pos).position())
        if message is not None:
            shown = list(self._headers)
            add_message_actions(menu, message, self, last=shown[-1] == message.id, can_change=self.can_change(),
                                can_branch=message.id != self._stream_id)  # a reply being written is no branch yet
        return menu

    def contextMenuEvent(self: ChatView, event: QContextMenuEvent) -> None:  # noqa: N802 (Qt override)
        # From the keyboard (Menu key, Shift+F10) the menu is for the message at the text cursor.
        keyboard = event.reason() == QContextMenuEvent.Reason.Keyboard
        pos = self.cursorRect().center() if keyboard else event.pos()
        menu = self.message_menu(pos)
        menu.exec(self.viewport().mapToGlobal(pos) if keyboard else event.globalPos())
        menu.deleteLater()

    @Slot(QUrl)
    def _open_link(self: ChatView, url: QUrl) -> None:
        """A click (or Enter on a link Tab reached): a reasoning header, a code block's Copy, a web link."""
        target = url.path()
        if url.scheme() == SCHEME and target.isdigit():
            self.toggle_reasoning(int(target))
        elif url.scheme() == CODE_SCHEME:
            message_id, _, index = target.partition(".")
            if message_id.isdigit() and index.isdigit():
                self.copy_code(int(message_id), int(index))
        elif url.scheme() in ("http", "https"):
            QDesktopServices.openUrl(url)
