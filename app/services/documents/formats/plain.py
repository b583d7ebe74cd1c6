"""Plain text, logs and source code: a paragraph at each blank line. Code has no headings to find that
would hold across languages, so its structure is its blank-line groups (functions, classes, imports); the
chunker packs them up to the budget and splits a long one at line ends."""

from __future__ import annotations

import re
from typing import BinaryIO

from app.services.documents.document import Document, DocumentBuilder
from app.services.documents.limits import DocumentLimits
from app.services.documents.text import read_text

_BLANK_LINES = re.compile(r"\n[ \t]*\n")


def extract(name: str, file: BinaryIO, limits: DocumentLimits, kind: str = "text") -> Document:
    text, warnings = read_text(name, file, limits.max_text_chars)
    builder = DocumentBuilder(name, kind, limits.max_text_chars, warnings=warnings)
    add_paragraphs(builder, text)
    return builder.build()


def add_paragraphs(builder: DocumentBuilder, text: str, page: int | None = None) -> None:
    """Each blank-line-separated run of `text` as one paragraph block."""
    for paragraph in _BLANK_LINES.split(text):
        builder.paragraph(paragraph.rstrip(), page)
        if builder.full:
            return
