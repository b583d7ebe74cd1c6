"""Markdown, through markdown-it-py (already the transcript's renderer): its block tokens carry their
source lines, so a heading becomes a heading block and every other top-level block (a paragraph, a list, a
fenced code block, a table, a quote) is kept as its own source text, Markdown marks and all, which a model
reads as well as prose. A `#` inside a code fence is thereby never taken for a heading."""

from __future__ import annotations

from typing import BinaryIO

from markdown_it import MarkdownIt

from app.services.documents.document import Document, DocumentBuilder
from app.services.documents.limits import DocumentLimits
from app.services.documents.text import read_text


def extract(name: str, file: BinaryIO, limits: DocumentLimits) -> Document:
    text, warnings = read_text(name, file, limits.max_text_chars)
    builder = DocumentBuilder(name, "markdown", limits.max_text_chars, warnings=warnings)
    lines = text.split("\n")
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    for index, token in enumerate(tokens):
        if token.level != 0 or token.map is None or token.nesting == -1:
            continue
        if token.type == "heading_open":
            builder.heading(int(token.tag[1:]), tokens[index + 1].content)
        else:
            first, last = token.map
            builder.paragraph("\n".join(lines[first:last]).rstrip())
        if builder.full:
            break
    return builder.build()
