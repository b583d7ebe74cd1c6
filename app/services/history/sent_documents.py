"""The documents a user message was sent with, kept as they were sent (`messages.documents`, schema step 10).

A message that carries documents (issue 36) is stored with its question as `content` and, beside it, the
block the model read before the question: the documents whole, or the passages retrieved for it, each
numbered [n] (app/chat/document_context.py). The block is kept, not rebuilt from the files, so the chat
reads the same to the model and to you when a file has since changed or gone. Each source says where its
[n] sits in the block, so a reply's citation opens the exact passage; each note is the line shown with the
message ("report.pdf · 12 pages · 6,210 tokens, whole").

JSON in one column, read defensively: a history file or an import may hold anything, and a damaged value
reads as no documents (with a warning), never as a lost chat.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

# Bounds on what is read back: a message names at most this many sources and notes, each label one line.
MAX_SOURCES = 1000
LABEL_LIMIT = 1000


class SentDocumentsError(ValueError):
    """A stored value that is not a message's documents; the message says what is wrong, in one line."""


@dataclass(frozen=True, slots=True)
class SentSource:
    """What one [n] of the block holds.

    Attributes:
        number: n, from 1.
        label: "[2] report.pdf · page 37 · characters 81,200–82,950": file, page and span in the document.
        start, end: the span of its passage (without its heading) in the block.
    """

    number: int
    label: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class SentDocuments:
    """The documents' block of a message, as the model read it before the question; `tokens`: what the block
    took, as counted when it was made (the model's tokenizer where there was one)."""

    block: str
    notes: tuple[str, ...] = ()
    sources: tuple[SentSource, ...] = ()
    tokens: int = 0

    def passage(self, number: int) -> SentSource | None:
        """The source [number], if the block has one."""
        return next((s for s in self.sources if s.number == number), None)

    def message(self, question: str) -> str:
        """What the model reads as the user's message: the block, then the question."""
        return f"{self.block}\n\n{question}" if self.block else question


def documents_to_json(documents: SentDocuments | None) -> str:
    """The column's value: '' for a message without documents."""
    if documents is None:
        return ""
    return json.dumps({
        "block": documents.block,
        "tokens": documents.tokens,
        "notes": list(documents.notes),
        "sources": [{"number": s.number, "label": s.label, "start": s.start, "end": s.end} for s in documents.sources],
    }, ensure_ascii=False)


def documents_from_json(text: str) -> SentDocuments | None:
    """The column's value read back (None for ''); SentDocumentsError when it is not one."""
    if not text:
        return None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise SentDocumentsError(f"not JSON ({exc})") from None
    return documents_from_dict(data)


def documents_from_dict(data: object) -> SentDocuments:
    """Checked SentDocuments from parsed JSON (the history's column, or a chat export's message)."""
    if not isinstance(data, dict):
        raise SentDocumentsError(f"the documents are {type(data).__name__}, not an object")
    block, notes, sources = data.get("block"), data.get("notes", []), data.get("sources", [])
    tokens = data.get("tokens", 0)
    if not isinstance(block, str):
        raise SentDocumentsError("the documents have no block of text")
    if not isinstance(tokens, int) or isinstance(tokens, bool) or not 0 <= tokens <= 10 * len(block) + 1000:
        raise SentDocumentsError("the documents' token count is not a count of their block")
    if not isinstance(notes, list) or not all(isinstance(n, str) and len(n) <= LABEL_LIMIT for n in notes):
        raise SentDocumentsError("the documents' notes are not lines of text")
    if not isinstance(sources, list) or len(sources) > MAX_SOURCES or len(notes) > MAX_SOURCES:
        raise SentDocumentsError(f"the documents name more than {MAX_SOURCES} sources or notes, or none as a list")
    return SentDocuments(block, tuple(notes), tuple(_source(s, i, len(block)) for i, s in enumerate(sources)), tokens)


def _source(data: object, index: int, block_length: int) -> SentSource:
    if not isinstance(data, dict):
        raise SentDocumentsError(f"source {index + 1} is not an object")
    number, label, start, end = (data.get(k) for k in ("number", "label", "start", "end"))
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (number, start, end)):
        raise SentDocumentsError(f"source {index + 1} has no whole number, start or end")
    if not isinstance(label, str) or len(label) > LABEL_LIMIT or "\n" in label:
        raise SentDocumentsError(f"source {index + 1} has no label of one line")
    if not (number >= 1 and 0 <= start <= end <= block_length):
        raise SentDocumentsError(f"source {index + 1} points outside the block ({start}–{end} of {block_length})")
    return SentSource(number, label, start, end)
