"""What the transcript's own links open: a reply's reasoning header, a tool card's header, a result's "Show all".

A click reaches them through the view's `anchorClicked` (TranscriptActions.open_link); the keyboard through
Tab, which moves the view's text cursor from link to link, then Enter or Space (`key_pressed`). A helper the
chat view owns.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeyEvent, QTextCursor
from PySide6.QtWidgets import QTextBrowser

from app.gui.transcript.reasoning_block import SCHEME
from app.gui.transcript.state import TranscriptState
from app.gui.transcript.tool_card import SCHEME as TOOL_SCHEME
from app.gui.transcript.tool_card import SHOW_ALL_SCHEME
from app.gui.transcript.tool_steps_view import ToolSteps

_KEYS = (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space)


class TranscriptLinks:
    """Toggles what the transcript's links open.

    Args:
        view: the chat view (its text cursor: the keyboard's link).
        state: what it shows (the reasoning blocks).
        tool_steps: the replies' tool steps and cards.
        at_end: whether the view is scrolled to its end.
        scroll_to_end: scrolls it to its end when given True.
    """

    def __init__(self, view: QTextBrowser, state: TranscriptState, tool_steps: ToolSteps,
                 at_end: Callable[[], bool], scroll_to_end: Callable[[bool], None]):
        self._view, self._state, self._steps = view, state, tool_steps
        self._at_end, self._scroll_to_end = at_end, scroll_to_end

    def toggle_reasoning(self, message_id: int) -> bool:
        """Show or hide a reply's reasoning; whether it has a block."""
        block = self._state.reasoning_blocks.get(message_id)
        if block is None:
            return False
        at_end = self._at_end()
        block.toggle()
        self._scroll_to_end(at_end and message_id == self._state.stream_id)
        return True

    def toggle(self, href: str) -> bool:
        """Open or close what `href` names (one of the schemes above); whether it named something shown."""
        scheme, _, key = href.partition(":")
        if scheme == SCHEME and key.isdigit():
            return self.toggle_reasoning(int(key))
        if scheme in (SCHEME, TOOL_SCHEME):
            return self._steps.toggle(key)
        return scheme == SHOW_ALL_SCHEME and self._steps.show_all(key)

    def header_cursor(self, href: str) -> QTextCursor | None:
        """The header of what `href` names (a "Show all": its card's)."""
        key = href.partition(":")[2]
        if key.isdigit():
            block = self._state.reasoning_blocks.get(int(key))
            return block.header_cursor() if block is not None else None
        return self._steps.header_cursor(key)

    def key_pressed(self, event: QKeyEvent) -> bool:
        """Enter or Space on a focused link of ours toggles it, the focus staying on its header; whether it was."""
        cursor = self._view.textCursor()
        href = cursor.charFormat().anchorHref()
        ours = href.partition(":")[0] in (SCHEME, TOOL_SCHEME, SHOW_ALL_SCHEME)
        if event.key() not in _KEYS or not cursor.hasSelection() or not ours:
            return False
        if self.toggle(href):
            header = self.header_cursor(href)
            if header is not None:
                self._view.setTextCursor(header)
        return True
