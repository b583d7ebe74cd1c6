"""The documents a message was sent with, in the transcript: its notes and sources under it, and each [n] of a
reply to it a link that opens the exact passage the model read, highlighted.

A user message sent with documents (app/services/history/sent_documents.py) shows one muted line per document
("report.pdf · 12 pages · 6,210 tokens, whole") and one link per source ("[2] report.pdf · page 37 · ...").
A reply's citations [n] become links to the same sources: `tailor-cite:<message id>.<n>`, the message being
the user's message the reply answers (its parent), so the link survives regenerations and branches. The
passage opens in a viewer over the block as sent: what the model read, not the file as it is now.
"""

from __future__ import annotations

import re
from html import escape

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QKeySequence, QPalette, QShortcut, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QDialog, QLabel, QPlainTextEdit, QTextEdit, QVBoxLayout, QWidget

from app.services.history.records import FileRef
from app.services.history.sent_documents import SentDocuments

CITE_SCHEME = "tailor-cite"  # <a href>: open passage n of a message's documents
FILE_SCHEME = "tailor-file"  # <a href>: open an attached document's original (its sha256)
_CITATION = re.compile(r"\[(\d{1,4})\]")
# Tags inside which [n] stays text: code is code, and a link is a link already.
_VERBATIM = ("pre", "code", "a")


def cite_href(message_id: int, number: int) -> str:
    return f"{CITE_SCHEME}:{message_id}.{number}"


def parse_cite(target: str) -> tuple[int, int] | None:
    """(message id, n) of a citation link's path, or None for one that is not."""
    message_id, _, number = target.partition(".")
    return (int(message_id), int(number)) if message_id.isdigit() and number.isdigit() else None


def documents_html(message_id: int, documents: SentDocuments | None, muted: str, files: tuple[FileRef, ...] = ()) -> str:
    """The attached files (each a link to its original), the notes and the sources shown under a user message
    sent with documents ("" without)."""
    if (documents is None or not (documents.notes or documents.sources)) and not files:
        return ""
    lines = []
    if files:
        links = ", ".join(f'<a href="{FILE_SCHEME}:{f.sha256}" title="Open the file as it was attached">'
                          f"{escape(f.name)}</a>" for f in files)
        lines.append(f'<span style="color:{muted};">Attached:</span> {links}')
    if documents is not None:
        lines += [f'<span style="color:{muted};">{escape(note)}</span>' for note in documents.notes]
        lines += [f'<a href="{cite_href(message_id, s.number)}">{escape(s.label)}</a>' for s in documents.sources]
    return f'<p style="margin-top:2px;"><small>{"<br>".join(lines)}</small></p>'


def link_citations(html: str, message_id: int, documents: SentDocuments) -> str:
    """`html` (a rendered reply) with each [n] that names a source of `documents` a link to its passage; [n]
    in code and in links, and numbers the documents do not have, stay as they are."""
    numbers = {s.number for s in documents.sources}
    if not numbers:
        return html
    parts = re.split(r"(<[^>]*>)", html)
    depth = 0  # inside how many verbatim tags
    for i, part in enumerate(parts):
        if part.startswith("<"):
            name = re.match(r"</?\s*([a-zA-Z]+)", part)
            if name and name.group(1).lower() in _VERBATIM and not part.endswith("/>"):
                depth += -1 if part.startswith("</") else 1
                depth = max(depth, 0)
        elif depth == 0 and "[" in part:
            parts[i] = _CITATION.sub(
                lambda m: f'<a href="{cite_href(message_id, int(m.group(1)))}">{m.group(0)}</a>'
                if int(m.group(1)) in numbers else m.group(0), part)
    return "".join(parts)


class PassageViewer(QDialog):
    """The block a message was sent with, the passage [n] highlighted and scrolled to; Esc closes it."""

    def __init__(self, documents: SentDocuments, number: int, parent: QWidget | None = None):
        super().__init__(parent)
        source = documents.passage(number)
        self.setWindowTitle(source.label if source else f"[{number}]")
        self.resize(760, 560)
        layout = QVBoxLayout(self)
        self.heading = QLabel(source.label if source else f"The documents of this message have no passage [{number}].")
        self.heading.setWordWrap(True)
        self.heading.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.heading)
        self.text = QPlainTextEdit(self)
        self.text.setReadOnly(True)
        self.text.setPlainText(documents.block)
        self.text.setAccessibleName("The documents as the model read them")
        layout.addWidget(self.text, 1)
        QShortcut(QKeySequence.StandardKey.Close, self, self.close)
        self.highlighted: tuple[int, int] | None = None
        self._block = documents.block
        if source is not None:
            self._highlight(source.start, source.end)

    def _highlight(self, start: int, end: int) -> None:
        self.highlighted = (start, end)
        start, end = _utf16(self._block, start), _utf16(self._block, end)  # Qt counts UTF-16 units
        cursor = QTextCursor(self.text.document())
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        selection = QTextEdit.ExtraSelection()
        selection.cursor = cursor
        fmt = QTextCharFormat()
        highlight = self.palette().color(QPalette.ColorRole.Highlight)
        fmt.setBackground(QColor(highlight.red(), highlight.green(), highlight.blue(), 90))
        selection.format = fmt
        self.text.setExtraSelections([selection])
        # Scrolled so the passage starts near the top, not at the bottom edge where ensureCursorVisible puts it.
        self.text.moveCursor(QTextCursor.MoveOperation.End)
        start_cursor = QTextCursor(self.text.document())
        start_cursor.setPosition(start)
        self.text.setTextCursor(start_cursor)
        self.text.ensureCursorVisible()

    def highlighted_text(self) -> str:
        """The text under the highlight, as the viewer shows it ('' without one)."""
        selections = self.text.extraSelections()
        return selections[0].cursor.selectedText().replace("\u2029", "\n") if selections else ""


def _utf16(text: str, index: int) -> int:
    """The position of `text[index]` in UTF-16 code units (a character outside the BMP takes two)."""
    return len(text[:index].encode("utf-16-le")) // 2
