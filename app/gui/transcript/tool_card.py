"""ToolCard: one tool call of a reply in the transcript, collapsed to a line by default.

    ▸ Called read_file (files) · 0.4 s · 2.1 kB

Like the reasoning block (reasoning_block.py) it is a frame of the chat view's document whose first line is a
link (`tailor-tool:<message id>.<step>.<call>`) that a click, Enter or Space toggles; expanded, the call's
arguments (pretty-printed JSON) and its result follow in a monospace font. Everything is inserted as plain
text, never as HTML: a result holding markup or Markdown shows as the characters it is. A long result is cut
on screen with a "Show all" link (`tailor-tool-all:<key>`), and a huge one stays cut with a note saying so.
The frame keeps its place while the document changes around it, so a card is rewritten in place as its call
runs and ends, keeping whether it is expanded.
"""

from __future__ import annotations

import time

from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QGuiApplication,
    QPalette,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextFrame,
    QTextFrameFormat,
)

from app.gui.common.theme import mix, status_colors
from app.gui.common.tool_text import call_verb, pretty_arguments, size_text, status_words
from app.gui.transcript.framed_block import FramedBlock
from app.services.history.tool_steps import ToolCallRecord

SCHEME = "tailor-tool"
SHOW_ALL_SCHEME = "tailor-tool-all"
CUT_CHARS, CUT_LINES = 3000, 40  # a result longer than this is cut on screen, with "Show all"
SHOWN_AT_MOST = 200_000  # characters of a result the transcript ever shows (the copy has them all)
_OPEN, _CLOSED = "▾ ", "▸ "


def _palette() -> QPalette:
    return QGuiApplication.palette()


def _muted() -> QColor:
    palette = _palette()
    return mix(palette.color(QPalette.ColorRole.Base), palette.color(QPalette.ColorRole.Text), 0.55)


def _frame_format() -> QTextFrameFormat:
    fmt = QTextFrameFormat()
    fmt.setBorder(1)
    fmt.setBorderBrush(mix(_palette().color(QPalette.ColorRole.Base), _muted(), 0.5))
    fmt.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
    fmt.setPadding(4)
    fmt.setMargin(0)
    fmt.setTopMargin(4)
    fmt.setBackground(_palette().color(QPalette.ColorRole.AlternateBase))
    return fmt


def _plain(color: QColor | None = None, mono: bool = False, bold: bool = False) -> QTextCharFormat:
    fmt = QTextCharFormat()
    if color is not None:
        fmt.setForeground(color)
    if mono:
        fmt.setFontFamilies([QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont).family()])
        fmt.setFontStyleHint(QFont.StyleHint.Monospace)
    if bold:
        fmt.setFontWeight(QFont.Weight.Bold)
    return fmt


def _link(fmt: QTextCharFormat, href: str, tip: str) -> QTextCharFormat:
    fmt.setAnchor(True)
    fmt.setAnchorHref(href)
    fmt.setToolTip(tip)
    return fmt


def shown_result(result: str, show_all: bool) -> tuple[str, str]:
    """What of a result the card shows, and what follows it: "" (all of it shown), "more" (cut, "Show all"
    can show it) or "huge" (cut for good: too long for the transcript)."""
    text = result.replace("\r\n", "\n").replace("\r", "\n")
    if show_all:
        return (text, "") if len(text) <= SHOWN_AT_MOST else (text[:SHOWN_AT_MOST], "huge")
    lines = text.split("\n")
    if len(text) <= CUT_CHARS and len(lines) <= CUT_LINES:
        return text, ""
    return "\n".join(lines[:CUT_LINES])[:CUT_CHARS], "more"


class ToolCard(FramedBlock):
    """One call, in a frame inserted at `cursor` (which ends up inside it).

    Args:
        cursor: where the card goes, in the view's document.
        key: "<message id>.<step>.<call>", in its links.
        call: the call as it stands.
    """

    def __init__(self, cursor: QTextCursor, key: str, call: ToolCallRecord):
        self.key = key
        self.call = call
        self.expanded = False
        self.show_all = False
        self.running_since: float | None = time.monotonic() if call.status == "running" else None
        self.frame: QTextFrame = cursor.insertFrame(_frame_format())
        self._write_header()

    @property
    def href(self) -> str:
        return f"{SCHEME}:{self.key}"

    def running_seconds(self) -> float | None:
        return None if self.running_since is None else time.monotonic() - self.running_since

    def header(self) -> str:
        """The header's words, as shown (with its ▸ or ▾)."""
        return self.header_cursor().selectedText()

    # ------------------------------------------------------------ changes

    def set_call(self, call: ToolCallRecord) -> None:
        """The call changed (it runs, or ended): the header, and the details when they are shown."""
        if call == self.call:
            return
        if call.status == "running" and self.running_since is None:
            self.running_since = time.monotonic()
        elif call.status != "running":
            self.running_since = None
        details_changed = (call.result, call.arguments, call.status) != (self.call.result, self.call.arguments,
                                                                         self.call.status)
        self.call = call
        self._write_header()
        if self.expanded and details_changed:
            self._hide()
            self._show()

    def tick(self) -> None:
        """Count on while the call runs."""
        if self.call.status == "running":
            self._write_header()

    def toggle(self) -> None:
        self.expanded = not self.expanded
        self._write_header()
        if self.expanded:
            self._show()
        else:
            self._hide()

    def show_whole_result(self) -> None:
        """"Show all": the whole result (up to SHOWN_AT_MOST characters)."""
        if not self.show_all:
            self.show_all = True
            if self.expanded:
                self._hide()
                self._show()

    # ------------------------------------------------------------ writing

    def _write_header(self) -> None:
        """The header line: ▸, the verb, the name in monospace, the server muted, the status words (a failure
        in the theme's red), all one link."""
        call, muted = self.call, _muted()
        tip = "Hide the call's details" if self.expanded else "Show the arguments and the result"
        status_color = status_colors(_palette()).error if call.status == "failed" else muted
        parts = [((_OPEN if self.expanded else _CLOSED) + call_verb(call), _plain(muted)),
                 (call.name, _plain(mono=True)),
                 (f" ({call.server})" if call.server else "", _plain(muted)),
                 (" · " + status_words(call, self.running_seconds()), _plain(status_color))]
        cursor = self.header_cursor()
        cursor.removeSelectedText()
        for text, fmt in parts:
            if text:
                cursor.insertText(text, _link(fmt, self.href, tip))

    def _show(self) -> None:
        """The arguments and the result, below the header."""
        call, muted = self.call, _muted()
        cursor = self._cursor(self.frame.lastPosition())
        self._label(cursor, "Arguments")
        self._text(cursor, pretty_arguments(call.arguments) or "(none)")
        if call.status in ("pending", "running"):
            self._label(cursor, "Result: not yet")
            return
        if not call.result:
            self._label(cursor, "Result: none")
            return
        text, rest = shown_result(call.result, self.show_all)
        self._label(cursor, "Result")
        self._text(cursor, text)
        if rest == "more":
            cursor.insertBlock(QTextBlockFormat(), _plain(muted))
            cursor.insertText(f"Show all ({size_text(call.result)})",
                              _link(_plain(QGuiApplication.palette().color(QPalette.ColorRole.Link)),
                                    f"{SHOW_ALL_SCHEME}:{self.key}", "Show the whole result here"))
        elif rest == "huge":
            cursor.insertBlock(QTextBlockFormat(), _plain(muted))
            cursor.insertText(f"(cut here: {size_text(call.result)} in all; Copy message has the whole result)",
                              _plain(muted))

    @staticmethod
    def _label(cursor: QTextCursor, text: str) -> None:
        cursor.insertBlock(QTextBlockFormat(), _plain(_muted(), bold=True))
        cursor.insertText(text, _plain(_muted(), bold=True))

    @staticmethod
    def _text(cursor: QTextCursor, text: str) -> None:
        cursor.insertBlock(QTextBlockFormat(), _plain(mono=True))
        cursor.insertText(text, _plain(mono=True))

    def _hide(self) -> None:
        """Remove the details, keeping the header."""
        cursor = self.header_cursor()
        cursor.clearSelection()
        cursor.setPosition(self.frame.lastPosition(), QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
