"""ReasoningBlock: a reply's reasoning in the transcript, above its answer, collapsed by default.

It is a frame of the chat view's document: its first line is the header, a link
(`tailor-reasoning:<message id>`) that the view toggles on a click, Enter or Space; expanded, the
reasoning follows as grey plain text. (A reply's tool steps have blocks of their own, `tailor-reasoning:<id>.<step>`.) The frame keeps its place while the document changes around
it, so a block is rewritten in place: its header as the counters move, its text as reasoning
streams in (appended, never rendered again), its lines shown or removed on a toggle.
"""

from __future__ import annotations

import time

from PySide6.QtGui import (
    QColor,
    QGuiApplication,
    QPalette,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextFrame,
    QTextFrameFormat,
)

from app.chat.reasoning_text import reasoning_figures, reasoning_header
from app.gui.common.theme import mix
from app.gui.transcript.framed_block import FramedBlock
from app.services.history.store import Message

SCHEME = "tailor-reasoning"
_OPEN, _CLOSED = "▾ ", "▸ "


def _palette() -> QPalette:
    """The application's palette (the theme): a block's colours are fixed when it is inserted, and the chat
    view inserts its blocks again when the palette changes."""
    return QGuiApplication.palette()


def _muted() -> QColor:
    """Secondary text over the base: the reasoning is told apart from the answer by it."""
    palette = _palette()
    return mix(palette.color(QPalette.ColorRole.Base), palette.color(QPalette.ColorRole.Text), 0.55)


def _frame_format() -> QTextFrameFormat:
    fmt = QTextFrameFormat()
    fmt.setBorder(0)
    fmt.setPadding(4)
    fmt.setMargin(0)
    fmt.setTopMargin(4)
    fmt.setBackground(_palette().color(QPalette.ColorRole.AlternateBase))
    return fmt


def _text_format() -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setForeground(_muted())
    return fmt


class ReasoningBlock(FramedBlock):
    """One reply's reasoning, in a frame inserted at `cursor` (which ends up inside it).

    Args:
        cursor: where the block goes, in the view's document.
        message_id: the reply's id, in the header's link.
        text: the reasoning so far.
        header: the header's words ("Thinking… 3 s · 120 tokens").
        key: what its link names, when not the reply's id: "<message id>.<step>" for the reasoning of one of
            the reply's tool steps (tool_steps_view.py).
    """

    def __init__(self, cursor: QTextCursor, message_id: int, text: str, header: str, key: str | None = None):
        self.message_id = message_id
        self.key = key or str(message_id)
        self.text = text
        self.header = header
        self.expanded = False
        self._shown = False  # whether any reasoning text is shown below the header
        self.frame: QTextFrame = cursor.insertFrame(_frame_format())
        cursor.insertText(self._header_line(), self._header_format())

    @property
    def href(self) -> str:
        return f"{SCHEME}:{self.key}"

    def _header_format(self) -> QTextCharFormat:
        fmt = QTextCharFormat()
        fmt.setAnchor(True)
        fmt.setAnchorHref(self.href)
        fmt.setForeground(_muted())
        fmt.setToolTip("Hide the reasoning" if self.expanded else "Show what the model thought before it answered")
        return fmt

    def _header_line(self) -> str:
        return (_OPEN if self.expanded else _CLOSED) + self.header

    # ------------------------------------------------------------ changes

    def set_header(self, header: str) -> None:
        if header == self.header:
            return
        self.header = header
        self._write_header()

    def _write_header(self) -> None:
        cursor = self.header_cursor()
        cursor.insertText(self._header_line(), self._header_format())

    def append(self, text: str) -> None:
        """More reasoning; shown at once when the block is expanded."""
        if not text:
            return
        self.text += text
        if self.expanded:
            self._show(text)

    def set_text(self, text: str) -> None:
        """The whole reasoning (the final one of a reply): appended when it only goes on, else rewritten."""
        if text.startswith(self.text):
            self.append(text[len(self.text):])
            return
        self.text = text
        if self.expanded:
            self._hide()
            self._show(text)

    def toggle(self) -> None:
        self.expanded = not self.expanded
        self._write_header()
        if self.expanded:
            self._show(self.text)
        else:
            self._hide()

    def _show(self, text: str) -> None:
        """Write `text` at the end of the frame (below the header, on a line of its own the first time)."""
        cursor = self._cursor(self.frame.lastPosition())
        if not self._shown:
            text = text.lstrip()  # models open their thoughts with a newline or two
            if not text:
                return
            cursor.insertBlock(QTextBlockFormat(), _text_format())
            self._shown = True
        cursor.insertText(text, _text_format())

    def _hide(self) -> None:
        """Remove the reasoning's lines, keeping the header."""
        cursor = self.header_cursor()
        cursor.clearSelection()
        cursor.setPosition(self.frame.lastPosition(), QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        self._shown = False


class LiveReasoning:
    """The streaming reply's reasoning as the view counts it: text not yet in its block, the tokens,
    when the thinking began and, once the answer began, how long it took."""

    def __init__(self, text: str = ""):
        self.pending: list[str] = [text] if text else []
        self.tokens = 0
        self.since: float | None = None
        self.took: float | None = None

    @property
    def thinking(self) -> bool:
        return self.took is None

    def add(self, text: str, tokens: int, seconds: float) -> None:
        """`tokens` of reasoning so far, the first of them `seconds` ago."""
        self.pending.append(text)
        self.tokens = tokens
        if self.thinking:
            self.since = time.monotonic() - seconds

    def answer_began(self) -> None:
        if self.since is not None and self.took is None:
            self.took = time.monotonic() - self.since

    def take(self) -> str:
        """The text not yet in the block (it is then)."""
        text, self.pending = "".join(self.pending), []
        return text

    def seconds(self) -> float | None:
        if self.took is not None or self.since is None:
            return self.took
        return time.monotonic() - self.since

    def header(self) -> str:
        return reasoning_header(self.seconds(), self.tokens or None, streaming=self.thinking)

    def final_header(self, message: Message) -> str:
        """The finished reply's header: its stats' figures, else what was counted here."""
        seconds, tokens = reasoning_figures(message.stats)
        seconds = self.seconds() if seconds is None else seconds
        tokens = (self.tokens or None) if tokens is None else tokens
        return reasoning_header(seconds, tokens, streaming=False, closed=message.reasoning_closed)
