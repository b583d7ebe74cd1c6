"""ChatView: the transcript, a QTextBrowser that renders messages as Markdown.

A streaming reply is coalesced: text is buffered and a timer re-renders only the tail of
the document, from a remembered position, and only the last Markdown block of the reply
(the blocks before it cannot change any more and were inserted once). The timer waits
longer when rendering took long, so a fast model never floods the event loop.
"""

from __future__ import annotations

import time
from html import escape

from PySide6.QtCore import QMimeData, QTimer, QUrl, Slot
from PySide6.QtGui import QDesktopServices, QTextBlockFormat, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QTextBrowser, QWidget

from app.services.markdown_render import render_block, render_markdown, split_blocks, warm_up_in_background
from app.services.store import Message

MIN_INTERVAL_MS = 16
MAX_INTERVAL_MS = 250
_ZWSP = "\u200b"
# Qt merges the first block of inserted HTML into the block at the cursor (losing its
# format), so every insertion starts with a throw-away paragraph that lands in a 1px spacer.
_LEAD = f"<p>{_ZWSP}</p>"
_ROLE_NAMES = {"user": "You", "assistant": "Assistant", "system": "System"}
_ROLE_COLORS = {"user": "#1a5fb4", "assistant": "#26a269", "system": "#777777"}
_STATE_NOTES = {"interrupted": "reply interrupted", "cancelled": "stopped", "streaming": "writing…"}


def _spacer_format() -> QTextBlockFormat:
    fmt = QTextBlockFormat()
    fmt.setLineHeight(1, QTextBlockFormat.LineHeightTypes.FixedHeight.value)
    fmt.setTopMargin(0)
    fmt.setBottomMargin(0)
    return fmt


def header_html(role: str) -> str:
    color = _ROLE_COLORS.get(role, "#000000")
    return f'<p style="margin-top:10px;"><b><span style="color:{color};">{_ROLE_NAMES.get(role, role)}</span></b></p>'


def note_html(state: str) -> str:
    note = _STATE_NOTES.get(state)
    return f'<p><i><span style="color:#999999;">({escape(note)})</span></i></p>' if note else ""


def message_html(message: Message) -> str:
    """The whole HTML of one finished message: header, Markdown body and a state note."""
    return header_html(message.role) + render_markdown(message.content) + note_html(message.state)


class ChatView(QTextBrowser):
    """The transcript of the open conversation.

    Args:
        parent: the Qt parent.
    """

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setReadOnly(True)
        self.setOpenLinks(False)
        self.anchorClicked.connect(self._open_link)
        self.document().setUndoRedoEnabled(False)  # no history of every streamed frame
        warm_up_in_background()
        self._spacer = _spacer_format()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.flush)
        self._interval_ms = MIN_INTERVAL_MS
        self._stream_text: list[str] = []
        self._streaming = False
        self._tail_pos = 0
        self._stable_blocks = 0
        self.last_render_ms = 0.0
        self.renders = 0

    # ------------------------------------------------------------ whole messages

    def set_messages(self, messages: list[Message]) -> None:
        """Show these messages (replaces the transcript and ends any stream shown)."""
        self._timer.stop()
        self._streaming = False
        self.clear()
        if messages:
            self._append_html("".join(message_html(m) for m in messages))
        self._scroll_to_end(True)

    def append_message(self, message: Message) -> None:
        at_end = self._at_end()
        self._append_html(message_html(message))
        self._scroll_to_end(at_end)

    def plain_text(self) -> str:
        return self.toPlainText().replace(_ZWSP, "")

    # ------------------------------------------------------------ streaming

    def begin_stream(self, message: Message) -> None:
        """Start showing a reply that will arrive with `append_stream`."""
        self._append_html(header_html(message.role))
        cursor = self._end_cursor()
        cursor.insertBlock(self._spacer, QTextCharFormat())
        self._tail_pos = cursor.position()
        self._stream_text = [message.content] if message.content else []
        self._stable_blocks = 0
        self._interval_ms = MIN_INTERVAL_MS
        self._streaming = True
        self._schedule()

    def append_stream(self, text: str) -> None:
        """Add text to the reply; the view catches up on the next timer tick."""
        if not self._streaming:
            return
        self._stream_text.append(text)
        self._schedule()

    def end_stream(self, message: Message) -> None:
        """Show the final text and state of the reply that streamed."""
        if not self._streaming:
            self.append_message(message)
            return
        self._timer.stop()
        self._stream_text = [message.content]
        self.flush(note=note_html(message.state))
        self._streaming = False

    @property
    def streaming(self) -> bool:
        return self._streaming

    def _schedule(self) -> None:
        if not self._timer.isActive():
            self._timer.start(self._interval_ms)

    @Slot()
    def flush(self, note: str = "") -> None:
        """Re-render the tail: new finished blocks once, then the last (growing) block."""
        if not self._streaming:
            return
        started = time.perf_counter()
        at_end = self._at_end()
        text = "".join(self._stream_text)
        self._stream_text = [text]
        blocks = split_blocks(text)
        cursor = QTextCursor(self.document())
        cursor.setPosition(self._tail_pos)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        cursor.setBlockFormat(self._spacer)
        cursor.setCharFormat(QTextCharFormat())
        stable = len(blocks) - 1
        if stable > self._stable_blocks:
            cursor.insertHtml(_LEAD + "".join(render_block(b) for b in blocks[self._stable_blocks : stable]))
            cursor.insertBlock(self._spacer, QTextCharFormat())
            self._tail_pos = cursor.position()
            self._stable_blocks = stable
        tail = render_block(blocks[-1]) if blocks else ""
        if tail or note:
            cursor.insertHtml(_LEAD + tail + note)
        self._scroll_to_end(at_end)
        self.last_render_ms = (time.perf_counter() - started) * 1000
        self.renders += 1
        # Adaptive: give the event loop at least twice the time the render took.
        self._interval_ms = int(min(MAX_INTERVAL_MS, max(MIN_INTERVAL_MS, 2 * self.last_render_ms)))

    # ------------------------------------------------------------ helpers

    def _end_cursor(self) -> QTextCursor:
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        return cursor

    def _append_html(self, html: str) -> None:
        cursor = self._end_cursor()
        if not self.document().isEmpty():
            cursor.insertBlock(self._spacer, QTextCharFormat())
        else:
            cursor.setBlockFormat(self._spacer)
        cursor.insertHtml(_LEAD + html)

    def _at_end(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= bar.maximum() - 8

    def _scroll_to_end(self, wanted: bool) -> None:
        if wanted:
            bar = self.verticalScrollBar()
            bar.setValue(bar.maximum())

    def createMimeDataFromSelection(self) -> QMimeData:  # noqa: N802 (Qt override)
        data = super().createMimeDataFromSelection()
        if data.hasText():
            data.setText(data.text().replace(_ZWSP, ""))
        return data

    @Slot(QUrl)
    def _open_link(self, url: QUrl) -> None:
        if url.scheme() in ("http", "https"):
            QDesktopServices.openUrl(url)
