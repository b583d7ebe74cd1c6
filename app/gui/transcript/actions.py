"""What can be done with the chat view's messages: copy one, or one of its code blocks, regenerate the last
reply, edit one of yours, branch; from the hover buttons (message_actions.py), the context menu
(message_menu.py) and the links in the text (a code block's Copy, a reasoning header, a tool card). A helper the view
owns, reading what it shows from the view's TranscriptState (state.py).

Copying happens here, with the clipboard, so the window has nothing to wire for it; regenerating, editing
and branching are asked of the window by the view's signals.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPoint, QUrl
from PySide6.QtGui import QContextMenuEvent, QDesktopServices, QGuiApplication
from PySide6.QtWidgets import QMenu, QTextBrowser

from app.gui.common.tool_text import copy_with_steps
from app.gui.transcript.citations import CITE_SCHEME, FILE_SCHEME, parse_cite
from app.gui.transcript.html import CODE_SCHEME
from app.gui.transcript.images import IMAGE_SCHEME
from app.gui.transcript.message_menu import add_message_actions
from app.gui.transcript.state import TranscriptRequests, TranscriptState
from app.gui.transcript.tool_steps_view import message_code_blocks


class TranscriptActions:
    """The chat view's message actions.

    Args:
        view: the chat view (its text and its context menu).
        state: what the view shows.
        requests: the view's signals (what is asked of the window; what was copied).
        toggle: shows or hides what a link of the transcript's own opens (a reasoning header, a tool card, a
            result's "Show all"), given the link; whether it was one.
    """

    def __init__(self, view: QTextBrowser, state: TranscriptState, requests: TranscriptRequests,
                 toggle: Callable[[str], bool]):
        self._view, self._state, self._requests = view, state, requests
        self._toggle = toggle

    def copy_message(self, message_id: int) -> None:
        """Put a shown message on the clipboard: its text, a reply's tool steps and answer (not its reasoning)."""
        message = self._state.shown(message_id)
        if message is not None:
            QGuiApplication.clipboard().setText(copy_with_steps(message))
            self._requests.copied.emit("Copied the reply" if message.role == "assistant" else "Copied the message")

    def copy_code(self, message_id: int, index: int) -> str | None:
        """Put a message's `index`-th code block on the clipboard, exactly its source text (a block still
        streaming: what it has so far, which may be more than the last frame showed); the code, or None."""
        message = self._state.shown(message_id)
        blocks = message_code_blocks(message) if message is not None else []
        if not 0 <= index < len(blocks):
            return None
        lang, code = blocks[index]
        QGuiApplication.clipboard().setText(code)
        self._requests.copied.emit(f"Copied the {lang} code" if lang else "Copied the code")
        return code

    def message_menu(self, pos: QPoint) -> QMenu:
        """The context menu at `pos` (viewport coordinates): the standard one, with what can be done with
        the message under it (message_menu.py)."""
        view, state = self._view, self._state
        menu = view.createStandardContextMenu(pos)
        message = state.message_at(view.cursorForPosition(pos).position())
        if message is not None:
            shown = state.shown_ids()
            add_message_actions(menu, message, self._requests, last=shown[-1] == message.id,
                                can_change=state.can_change(),
                                can_branch=message.id != state.stream_id)  # a reply being written is no branch yet
        return menu

    def context_menu(self, event: QContextMenuEvent) -> None:
        """Show the context menu the event asks for (the view's contextMenuEvent)."""
        # From the keyboard (Menu key, Shift+F10) the menu is for the message at the text cursor.
        view = self._view
        keyboard = event.reason() == QContextMenuEvent.Reason.Keyboard
        pos = view.cursorRect().center() if keyboard else event.pos()
        menu = self.message_menu(pos)
        menu.exec(view.viewport().mapToGlobal(pos) if keyboard else event.globalPos())
        menu.deleteLater()

    def open_link(self, url: QUrl) -> None:
        """A click (or Enter on a link Tab reached): a reasoning header, a tool card, a code block's Copy, a web
        link."""
        target = url.path()
        if self._toggle(url.toString()):
            return
        if url.scheme() == CODE_SCHEME:
            message_id, _, index = target.partition(".")
            if message_id.isdigit() and index.isdigit():
                self.copy_code(int(message_id), int(index))
        elif url.scheme() == IMAGE_SCHEME:
            self._requests.image_opened.emit(target)
        elif url.scheme() == CITE_SCHEME and (cited := parse_cite(target)) is not None:
            self._view.open_citation(*cited)
        elif url.scheme() == FILE_SCHEME:
            self._view.open_file(target)
        elif url.scheme() in ("http", "https"):
            QDesktopServices.openUrl(url)
