"""What of the attached documents goes into a message: whole when they fit, else the passages that answer it.

The caller knows how many tokens the documents may take (the context left after the conversation, the
reply's max tokens and a margin: `document_budget`) and passes a function that counts tokens (the loaded
model's tokenizer where there is one: engine_tokens.py). If every document fits whole, each goes in whole;
if not, they are chunked into a temporary index (or the chat's knowledge index is searched) and the
best passages for the question that fit the budget go in, in rank order. Either way each entry is numbered
[1], [2]... and the prompt asks the model to cite them so; `DocumentContext.sources` maps each number
back to its file, page and character offsets, so a reply's [n] can be linked to the exact passage.
No Qt, no engine: a plain function of documents, a question and a budget.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from app.services.documents.chunking import TokenCounter, chunk_document, estimate_tokens
from app.services.documents.document import Document
from app.services.documents.index.store import DocumentIndex, Hit
from app.services.history.sent_documents import SentDocuments, SentSource

INSTRUCTIONS = ("Answer from the documents below where they help, and cite the passages you use as [n], "
                "with n the number of the passage.")
# Hits asked of an index per question: more than ever fit a budget, so a long passage that does not fit
# leaves room for shorter ones after it.
SEARCH_DEPTH = 32
# Tokens held back for what counting parts separately misses (the joins between entries).
JOIN_MARGIN = 16
# Above this many characters a token, a document is too long for the budget without being counted: no
# tokenizer makes tokens that long, so the tokenizer is not asked to count megabytes for nothing.
MAX_CHARS_PER_TOKEN = 16


@dataclass(frozen=True, slots=True)
class ContextSource:
    """What one [n] of the prompt holds.

    Attributes:
        number: n, from 1.
        name: the file's name; path: where it was read (a knowledge index's source), or the name.
        page: its page (PDF), else None.
        start, end: the passage's span in the document's extracted text (the whole text when whole).
        whole: the whole document, not a passage of it.
        tokens: what it took of the budget.
    """

    number: int
    name: str
    path: str
    page: int | None
    start: int
    end: int
    whole: bool
    tokens: int

    def label(self) -> str:
        where = "whole" if self.whole else (f"page {self.page}" if self.page is not None else "passage")
        return f"[{self.number}] {self.name} · {where} · characters {self.start:,}–{self.end:,}"


@dataclass(frozen=True, slots=True)
class DocumentNote:
    """How one attached document went in, for the line shown with the message."""

    name: str
    pages: int | None
    tokens: int
    whole: bool
    passages: int = 0

    def line(self) -> str:
        head = f"{self.name} · {self.pages} pages · " if self.pages else f"{self.name} · "
        if self.whole:
            return f"{head}{self.tokens:,} tokens, whole"
        found = f"{self.passages} passage{'s' * (self.passages != 1)} retrieved" if self.passages else \
            "no passage matched the question"
        return f"{head}{self.tokens:,} tokens: too long for the context; {found}"


@dataclass(frozen=True, slots=True)
class DocumentContext:
    """The documents' part of a message.

    Attributes:
        text: the block to put before the question (empty when nothing went in).
        sources: what each [n] of `text` holds, in order.
        notes: one per attached document (none for a knowledge index's files).
        tokens: what the block takes, as counted.
        spans: where each source's passage (its text, without its heading) sits in `text`, in order.
    """

    text: str
    sources: tuple[ContextSource, ...]
    notes: tuple[DocumentNote, ...]
    tokens: int
    spans: tuple[tuple[int, int], ...] = ()

    def message(self, question: str) -> str:
        """The user message: the documents, then the question."""
        return f"{self.text}\n\n{question}" if self.text else question

    def sent(self) -> SentDocuments:
        """What the history keeps of it with the message: the block as sent, its notes, where each [n] is."""
        return SentDocuments(self.text, tuple(n.line() for n in self.notes),
                             tuple(SentSource(s.number, s.label(), start, end)
                                   for s, (start, end) in zip(self.sources, self.spans, strict=True)), self.tokens)


def document_budget(n_ctx: int, conversation: int, max_tokens: int, margin: int = 64) -> int:
    """The tokens documents may take: the context less the conversation (question included), the reply's
    max tokens and a margin for the template's markers around the documents' block."""
    return max(0, n_ctx - conversation - max_tokens - margin)


def document_context(documents: Sequence[Document], question: str, budget: int,
                     count: TokenCounter = estimate_tokens, *, knowledge: DocumentIndex | None = None,
                     chunk_budget: int | None = None, knowledge_ranking: Sequence[int] | None = None) -> DocumentContext:
    """The block of `documents` (whole when all fit `budget`, else retrieved for `question`), then passages
    of `knowledge` for the question in the budget left.

    Args:
        chunk_budget: the size of a retrieved passage (default: an eighth of the budget, 64 to 384 tokens,
            so several passages fit).
        knowledge_ranking: the knowledge's chunk ids nearest the question by meaning (semantic.py), fused
            with its words' ranking; None: words alone.
    """
    overhead = count(INSTRUCTIONS) + JOIN_MARGIN
    room = budget - overhead
    sizes = [_size(d, room, count) for d in documents]
    entries: list[_Entry] = []
    notes: list[DocumentNote] = []
    if documents and sum(sizes) + sum(count(_heading(i + 1, d.name, None, True)) for i, d in enumerate(documents)) <= room:
        for document, tokens in zip(documents, sizes, strict=True):
            entries.append(_Entry(document.name, document.name, None, 0, len(document.text), True,
                                  document.text, tokens))
            notes.append(DocumentNote(document.name, document.pages, tokens, True))
    elif documents:
        chunk_budget = chunk_budget or max(64, min(384, room // 8))
        with _attached_index(documents, chunk_budget) as attached:
            hits = attached.search(question, SEARCH_DEPTH)
        entries = _fitting(hits, room, count, attached=True)
        for document, tokens in zip(documents, sizes, strict=True):
            passages = sum(1 for e in entries if e.name == document.name)
            notes.append(DocumentNote(document.name, document.pages, tokens, False, passages))
    if knowledge is not None:
        left = room - sum(e.tokens for e in entries)
        taken = {(e.path, e.start) for e in entries}
        hits = [h for h in knowledge.search(question, SEARCH_DEPTH, vector_ranking=knowledge_ranking)
                if (h.source, h.start) not in taken]
        entries += _fitting(hits, left, count, number_from=len(entries) + 1)
    return _assembled(entries, overhead, notes)


@dataclass(frozen=True, slots=True)
class _Entry:
    name: str
    path: str
    page: int | None
    start: int
    end: int
    whole: bool
    text: str
    tokens: int  # the entry's heading and text


def _heading(number: int, name: str, page: int | None, whole: bool) -> str:
    where = " (whole)" if whole else (f", page {page}" if page is not None else "")
    return f"[{number}] {name}{where}"


def _size(document: Document, room: int, count: TokenCounter) -> int:
    """A document's tokens: counted, unless its length alone says it cannot fit (then estimated)."""
    if len(document.text) > max(room, 0) * MAX_CHARS_PER_TOKEN:
        return estimate_tokens(document.text)
    return count(document.text)


def _fitting(hits: Sequence[Hit], room: int, count: TokenCounter, number_from: int = 1,
             attached: bool = False) -> list[_Entry]:
    """The hits, best first, that fit `room` tokens with their headings; one too big is passed over.
    `attached`: hits of the temporary index, whose sources are named by the attachment's name alone."""
    entries: list[_Entry] = []
    used = 0
    for hit in hits:
        number = number_from + len(entries)
        tokens = count(_heading(number, hit.name, hit.page, False)) + count(hit.text)
        if used + tokens <= room:
            entries.append(_Entry(hit.name, hit.name if attached else hit.source, hit.page, hit.start, hit.end, False, hit.text, tokens))
            used += tokens
    return entries


def _assembled(entries: list[_Entry], overhead: int, notes: list[DocumentNote]) -> DocumentContext:
    if not entries:
        return DocumentContext("", (), tuple(notes), 0)
    parts = [INSTRUCTIONS]
    sources = []
    spans = []
    at = len(INSTRUCTIONS)
    for number, entry in enumerate(entries, start=1):
        heading = _heading(number, entry.name, entry.page, entry.whole)
        parts.append(f"{heading}\n{entry.text}")
        start = at + len("\n\n") + len(heading) + 1
        spans.append((start, start + len(entry.text)))
        at = start + len(entry.text)
        sources.append(ContextSource(number, entry.name, entry.path, entry.page, entry.start, entry.end,
                                     entry.whole, entry.tokens))
    return DocumentContext("\n\n".join(parts), tuple(sources), tuple(notes), overhead + sum(e.tokens for e in entries),
                           tuple(spans))


@contextmanager
def _attached_index(documents: Sequence[Document], chunk_budget: int) -> Iterator[DocumentIndex]:
    """The attached documents chunked into an index held in memory, gone on exit. In memory: their text is
    held already (Document.text), so the index at most doubles it, and nothing is left on disk."""
    index = DocumentIndex(":memory:")
    try:
        for document in documents:
            # Keyed by its text: two attachments of one name but different content are kept apart.
            sha256 = hashlib.sha256(document.text.encode("utf-8", "surrogatepass")).hexdigest()
            if index.has_content(sha256):
                continue
            with index.transaction():
                index.put_document(sha256, document, chunk_document(document, chunk_budget))
                index.link_source(f"{document.name}#{sha256[:12]}", sha256, len(document.text), 0)
        yield index
    finally:
        index.close()
