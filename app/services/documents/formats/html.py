"""HTML through the standard library's parser: text in reading order with h1–h6 as headings, and a new
block at every paragraph, list item, table row, quote or pre; the cells of a row joined by " | ". What a
reader never sees is dropped: scripts, styles, templates, the head (its <title> too: it nearly always
repeats the page's <h1>, and a chunk's source already names the file)."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import BinaryIO

from app.services.documents.document import Document, DocumentBuilder
from app.services.documents.limits import DocumentLimits
from app.services.documents.text import read_text

_DROPPED = {"script", "style", "noscript", "template", "head", "svg", "math", "iframe", "object"}
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_BLOCKS = {"p", "div", "li", "tr", "pre", "blockquote", "section", "article", "header", "footer", "main",
           "nav", "aside", "table", "ul", "ol", "dl", "dt", "dd", "figure", "figcaption", "form", "hr", "br",
           "address", "details", "summary", "caption"}
_CELLS = {"td", "th"}
_VOID = {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr"}


class _Reader(HTMLParser):
    def __init__(self, builder: DocumentBuilder) -> None:
        super().__init__(convert_charrefs=True)
        self.builder = builder
        self.text: list[str] = []
        self.dropped = 0  # depth inside a dropped element
        self.heading_level = 0
        self.in_pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _DROPPED and tag not in _VOID:
            self.dropped += 1
        elif self.dropped:
            return
        elif tag in _HEADINGS:
            self.flush()
            self.heading_level = _HEADINGS[tag]
        elif tag in _BLOCKS:
            self.flush()
            self.in_pre += tag == "pre"
        elif tag in _CELLS and self.text and self.text[-1].strip():
            self.text.append(" | ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _DROPPED and tag not in _VOID:
            self.dropped = max(0, self.dropped - 1)
        elif self.dropped:
            return
        elif tag in _HEADINGS:
            title = "".join(self.text)
            self.text.clear()
            self.builder.heading(self.heading_level or _HEADINGS[tag], title)
            self.heading_level = 0
        elif tag in _BLOCKS:
            self.flush()
            self.in_pre -= tag == "pre" and self.in_pre > 0

    def handle_data(self, data: str) -> None:
        if self.dropped:
            return
        self.text.append(data if self.in_pre else _spaced(data))

    def flush(self) -> None:
        text = "".join(self.text)
        self.text.clear()
        if not text.strip():
            return
        self.builder.paragraph(text if self.in_pre else " ".join(text.split()))


def _spaced(data: str) -> str:
    """Whitespace collapsed, but a leading or trailing space kept, so "<b>a</b> b" stays "a b"."""
    inner = " ".join(data.split())
    if not inner:
        return " " if data else ""
    return (" " if data[:1].isspace() else "") + inner + (" " if data[-1:].isspace() else "")


def extract(name: str, file: BinaryIO, limits: DocumentLimits) -> Document:
    text, warnings = read_text(name, file, limits.max_text_chars)
    builder = DocumentBuilder(name, "html", limits.max_text_chars, warnings=warnings)
    reader = _Reader(builder)
    reader.feed(text)
    reader.close()
    reader.flush()
    return builder.build()
