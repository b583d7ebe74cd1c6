"""A document as extracted: its whole text, and the blocks of structure that text is made of.

Every extractor (formats/) writes through a DocumentBuilder: headings, paragraphs, table rows and pages go
in, in reading order, and each becomes a Block that knows its character span in `Document.text`, its page
(PDF) and the headings it sits under. The chunker cuts along those blocks, and a chunk's offsets are
offsets into `Document.text`, so a later view can highlight the exact passage an answer came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Between two blocks in Document.text: a blank line, so the text reads as paragraphs when shown whole.
BLOCK_SEPARATOR = "\n\n"


@dataclass(frozen=True, slots=True)
class Block:
    """One unit of structure: a heading, a paragraph, a page's text, a table row, a code block.

    Attributes:
        start, end: its span in Document.text (text[start:end] is its text).
        page: 1-based page number for PDFs; None where a format has no pages.
        headings: the heading path it sits under, outermost first (a heading's own path ends with itself).
        is_heading: it is a heading (the chunker starts a new chunk at one).
        header: text to repeat at the top of every chunk cut from this block (a CSV's header row), or None.
    """

    start: int
    end: int
    page: int | None = None
    headings: tuple[str, ...] = ()
    is_heading: bool = False
    header: str | None = None


@dataclass(frozen=True, slots=True)
class Document:
    """The text of one file and its structure.

    Attributes:
        name: the file's name.
        kind: "text", "code", "markdown", "html", "pdf", "docx" or "csv".
        text: everything extracted, blocks separated by a blank line.
        blocks: the structure of `text`, in reading order.
        pages: how many pages (PDF), else None.
        warnings: what was not read or read imperfectly, one line each ("no text layer: page 3").
    """

    name: str
    kind: str
    text: str
    blocks: tuple[Block, ...]
    pages: int | None = None
    warnings: tuple[str, ...] = ()

    def block_text(self, block: Block) -> str:
        return self.text[block.start:block.end]


@dataclass(slots=True)
class DocumentBuilder:
    """Collects an extractor's headings and paragraphs into a Document, keeping the heading path.

    Text past `max_chars` is dropped with one warning, so a runaway extractor cannot exhaust memory.
    """

    name: str
    kind: str
    max_chars: int
    pages: int | None = None
    warnings: list[str] = field(default_factory=list)
    _parts: list[str] = field(default_factory=list)
    _blocks: list[Block] = field(default_factory=list)
    _size: int = 0
    _headings: list[tuple[int, str]] = field(default_factory=list)  # (level, title), outermost first
    _full: bool = False

    @property
    def full(self) -> bool:
        """No more text fits (MAX_TEXT_CHARS reached): extractors may stop early."""
        return self._full

    @property
    def empty(self) -> bool:
        """No block was added yet."""
        return not self._blocks

    def heading(self, level: int, title: str, page: int | None = None) -> None:
        """A heading of `level` (1 outermost): it closes every open heading at its level or deeper."""
        title = " ".join(title.split())
        if not title:
            return
        while self._headings and self._headings[-1][0] >= level:
            self._headings.pop()
        self._headings.append((level, title))
        self._add(title, page, is_heading=True)

    def enter(self, path: tuple[str, ...], page: int | None = None) -> None:
        """Make `path` the heading path (a PDF bookmark's): the headings it shares with the open ones stay
        open, the rest are added as heading blocks at levels 1, 2, ... by their place in the path."""
        shared = 0
        while (shared < min(len(path), len(self._headings))
               and self._headings[shared] == (shared + 1, path[shared])):
            shared += 1
        del self._headings[shared:]
        for level, title in enumerate(path[shared:], start=shared + 1):
            self.heading(level, title, page)

    def paragraph(self, text: str, page: int | None = None, header: str | None = None) -> None:
        """A block of body text (blank text is skipped), under the current headings."""
        text = text.strip("\n")
        if text.strip():
            self._add(text, page, header=header)

    def _add(self, text: str, page: int | None, *, is_heading: bool = False, header: str | None = None) -> None:
        if self._full:
            return
        start = self._size + (len(BLOCK_SEPARATOR) if self._parts else 0)
        room = self.max_chars - start
        if len(text) > room:
            self._full = True
            self.warnings.append(f"only the first {self.max_chars:,} characters were read (MAX_TEXT_CHARS)")
            if room <= 0:
                return
            text = text[:room]
        if self._parts:
            self._parts.append(BLOCK_SEPARATOR)
        self._parts.append(text)
        self._size = start + len(text)
        headings = tuple(title for _, title in self._headings)
        self._blocks.append(Block(start, self._size, page, headings, is_heading, header))

    def build(self) -> Document:
        return Document(self.name, self.kind, "".join(self._parts), tuple(self._blocks), self.pages,
                        tuple(dict.fromkeys(self.warnings)))
