"""What a document may be to be read: each cap one named constant, gathered in DocumentLimits so a caller
(or a test) may pass others. A cap is checked as early as the file allows: the size by stat before any
read, a DOCX's unpacked size from its zip directory before anything is unpacked, a PDF's pages and objects
from its trailer and page tree before any page is parsed."""

from __future__ import annotations

from dataclasses import dataclass

# The largest file taken, checked on its stat before it is opened for reading. Text is what is kept of
# a document, so even a 2 GB PDF of scans yields little; past that it is nearly always a disk image,
# a database or a video with a wrong name.
MAX_FILE_BYTES = 2_000_000_000

# The most characters of text one document yields. 50 million characters is some 12 million tokens,
# hundreds of times what any context holds, so retrieval still has far more than it needs; it bounds
# what one file costs in memory (the text and its blocks are held while the file is chunked). A document
# longer than that is read up to the cap and says so in its warnings.
MAX_TEXT_CHARS = 50_000_000

# A PDF's pages, read from its page tree's /Count before any page is parsed. The longest real books and
# manuals run to a few thousand pages; a bomb declares millions.
MAX_PDF_PAGES = 10_000

# A PDF's objects, read from its trailer's /Size (the cross-reference table's length). A 10,000-page
# book with its fonts and images has a few hundred thousand; pypdf keeps a Python object for each one
# it resolves, so millions are refused before any is read. (Each stream's decompressed size is capped by
# pypdf itself, at 75 MB.)
MAX_PDF_OBJECTS = 2_000_000

# A DOCX (a zip) unpacked: the sum of its members' sizes, as its central directory declares them, before
# anything is unpacked. A 500-page report with its styles is a few MB of XML; images are not read. A
# member that unpacks to more than it declares fails its CRC check in zipfile, so the declared sum holds.
MAX_UNZIPPED_BYTES = 200_000_000

# A DOCX's members: a real one has a few dozen (parts, relations, media); a zip of 100,000 tiny entries
# is another kind of bomb (each costs a directory entry and a parse).
MAX_ZIP_MEMBERS = 10_000

# How much of a text file is looked at to tell text from binary, and the share of bytes that may be
# invalid UTF-8 there before the file is taken for binary (a few stray Latin-1 bytes are replaced).
SNIFF_BYTES = 65_536
MAX_INVALID_UTF8_SHARE = 0.02


# The most documents one message carries in the window: each is held as text until it is sent, and past a
# few dozen a folder is better kept as a chat's knowledge (an index) than attached.
MAX_DOCUMENTS_PER_MESSAGE = 32


@dataclass(frozen=True, slots=True)
class DocumentLimits:
    """The caps one read applies (the module's constants unless a caller passes others)."""

    max_file_bytes: int = MAX_FILE_BYTES
    max_text_chars: int = MAX_TEXT_CHARS
    max_pdf_pages: int = MAX_PDF_PAGES
    max_pdf_objects: int = MAX_PDF_OBJECTS
    max_unzipped_bytes: int = MAX_UNZIPPED_BYTES
    max_zip_members: int = MAX_ZIP_MEMBERS


DEFAULT_LIMITS = DocumentLimits()
