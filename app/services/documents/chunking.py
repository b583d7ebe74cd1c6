"""A Document cut into Chunks: passages that fit a token budget, cut along its structure.

A chunk never spans two pages (so it has one page number to cite) and starts afresh at every heading (so
its heading path is true of all of it); within that it packs whole blocks (paragraphs, rows, pages) up to
the budget, and a block too long for one chunk is cut into lines (then words, then runs of characters),
which are packed the same way.
Consecutive chunks of one section share up to `overlap` tokens of whole lines or paragraphs, so a fact
cut at a chunk's end is still whole in the next.

Tokens are counted by a function the caller passes (the loaded model's tokenizer, where there is one);
the default is a cheap estimate. Blocks are counted once each and summed, so a chunk's count is the sum
of its parts' (separators not counted): close for any subword tokenizer, and linear in the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from app.services.documents.document import Block, Document

TokenCounter = Callable[[str], int]

# The budget of one chunk: a few paragraphs, enough to hold an answer with its context, small enough that
# eight of them fit a 8K context beside the conversation.
DEFAULT_BUDGET = 384
DEFAULT_OVERLAP = 48

_SPLITS = (re.compile(r"(?<=\n)"), re.compile(r"(?<=\s)(?=\S)"))


def estimate_tokens(text: str) -> int:
    """About four characters a token: what BPE tokenizers average on English prose and code. It errs
    high on plain words and low on dense symbols, which a budget with room to spare absorbs."""
    return (len(text) + 3) // 4


@dataclass(frozen=True, slots=True)
class Chunk:
    """One passage of a document.

    Attributes:
        source: the document's name.
        ordinal: its place among the document's chunks, from 0.
        start, end: its span in Document.text (for highlighting the passage later).
        text: Document.text[start:end].
        page: its page (PDF), else None.
        headings: the heading path it sits under, outermost first.
        header: a table's header row repeated above it (CSV), else None; not part of `text`.
        tokens: its size by the count function (header included).
    """

    source: str
    ordinal: int
    start: int
    end: int
    text: str
    page: int | None
    headings: tuple[str, ...]
    header: str | None
    tokens: int

    @property
    def context(self) -> str:
        """What situates the passage: its heading path and header row (indexed beside its text)."""
        lines = [" › ".join(self.headings)] if self.headings else []
        if self.header:
            lines.append(self.header)
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class _Piece:
    start: int
    end: int
    tokens: int
    block: Block


def chunk_document(document: Document, budget: int = DEFAULT_BUDGET, overlap: int = DEFAULT_OVERLAP,
                   count: TokenCounter = estimate_tokens) -> Iterator[Chunk]:
    """The chunks of `document`, in order; lazily, so a caller can insert them in batches."""
    if budget < 8:
        raise ValueError(f"a chunk budget of {budget} tokens is too small to hold a sentence")
    overlap = max(0, min(overlap, budget // 2))
    current: list[_Piece] = []
    used = 0
    ordinal = 0

    def emit(pieces: list[_Piece]) -> Chunk:
        nonlocal ordinal
        first, last = pieces[0], pieces[-1]
        body = next((p.block for p in pieces if not p.block.is_heading), last.block)
        chunk = Chunk(document.name, ordinal, first.start, last.end, document.text[first.start:last.end],
                      first.block.page, body.headings, first.block.header,
                      sum(p.tokens for p in pieces) + (count(first.block.header) if first.block.header else 0))
        ordinal += 1
        return chunk

    for block in document.blocks:
        header_cost = count(block.header) if block.header else 0
        for piece in _pieces(document, block, budget - header_cost, count):
            if current and _starts_anew(current, piece):
                yield emit(current)
                current, used = [], 0
            elif current and used + piece.tokens + header_cost > budget:
                yield emit(current)
                current = _tail(current, overlap, budget - piece.tokens - header_cost)
                used = sum(p.tokens for p in current)
            current.append(piece)
            used += piece.tokens
    if current:
        yield emit(current)


def _starts_anew(current: list[_Piece], piece: _Piece) -> bool:
    """A piece starts a new chunk, without overlap: on another page, under another header row, or a heading
    (unless the chunk so far holds only headings: "Part II" then "Chapter 3" belong with what follows)."""
    last = current[-1].block
    if piece.block.page != last.page or piece.block.header != last.header:
        return True
    return piece.block.is_heading and not all(p.block.is_heading for p in current)


def _tail(pieces: list[_Piece], overlap: int, room: int) -> list[_Piece]:
    """The last pieces of a chunk that fit in `overlap` tokens (and in the room the next piece leaves)."""
    kept: list[_Piece] = []
    total = 0
    for piece in reversed(pieces[1:]):
        if piece.block.is_heading or total + piece.tokens > min(overlap, room):
            break
        kept.append(piece)
        total += piece.tokens
    return kept[::-1]


def _pieces(document: Document, block: Block, budget: int, count: TokenCounter) -> Iterator[_Piece]:
    """A block as pieces of at most `budget` tokens: whole if it fits, else split (lines, words, anywhere)."""
    budget = max(budget, 1)
    yield from (_Piece(start, end, tokens, block)
                for start, end, tokens in _split(document.text, block.start, block.end, budget, count, 0))


def _split(text: str, start: int, end: int, budget: int, count: TokenCounter,
           level: int) -> Iterator[tuple[int, int, int]]:
    """Spans of text[start:end] of at most `budget` tokens each: the whole if it fits, else its units of the
    `level`-th kind (lines, then words) one by one, each split further if it does not fit; at the last
    level, runs of characters. Units are not packed here: the chunker packs them, so overlap can be a few
    lines of a long block rather than none."""
    tokens = count(text[start:end])
    if tokens <= budget:
        yield start, end, tokens
        return
    if level == len(_SPLITS):
        step = max(1, (end - start) * budget // (tokens + 1))
        for at in range(start, end, step):
            stop = min(at + step, end)
            yield at, stop, count(text[at:stop])
        return
    at = start
    for cut in [match.start() for match in _SPLITS[level].finditer(text, start, end)] + [end]:
        if cut > at:
            yield from _split(text, at, cut, budget, count, level + 1)
            at = cut
