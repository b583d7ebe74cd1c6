"""PDF through pypdf, page by page: every block carries its page number, so every chunk does. Headings come
from the PDF's outline (its bookmarks) where it has one; a page gets the path of the last bookmark at or
before it.

Hostile PDFs are refused before their pages are parsed: an encrypted one (tried with the empty password
that viewers use for "owner-only" protection, never asking the user for one), one whose page tree declares
more than MAX_PDF_PAGES pages, one whose trailer declares more than MAX_PDF_OBJECTS objects. pypdf caps
every stream's decompressed size itself (75 MB). A page without a text layer (a scan) is named in the
warnings, not left silently empty.
"""

from __future__ import annotations

import logging
from typing import Any, BinaryIO

from pypdf import PasswordType, PdfReader
from pypdf.generic import Destination

from app.services.documents.document import Document, DocumentBuilder
from app.services.documents.errors import DamagedDocument, DocumentBomb, EncryptedDocument
from app.services.documents.formats.plain import add_paragraphs
from app.services.documents.limits import DocumentLimits

log = logging.getLogger(__name__)


def extract(name: str, file: BinaryIO, limits: DocumentLimits) -> Document:
    reader = _open(name, file)
    _check_encryption(name, reader)
    pages = _check_size(name, reader, limits)
    builder = DocumentBuilder(name, "pdf", limits.max_text_chars, pages=pages)
    outline = _outline_by_page(reader, builder)
    blank: list[int] = []
    for number in range(1, pages + 1):
        if number in outline:
            builder.enter(outline[number], number)
        try:
            text = reader.pages[number - 1].extract_text()
        except Exception as exc:  # noqa: BLE001 - pypdf raises many kinds on a damaged page; one bad page is a warning
            builder.warnings.append(f"page {number} could not be read ({type(exc).__name__}: {exc})")
            continue
        if not text.strip():
            blank.append(number)
            continue
        add_paragraphs(builder, text, number)
        if builder.full:
            break
    if blank:
        builder.warnings.insert(0, f"no text layer: {_pages_in_words(blank)} (scanned images? Tailor "
                                   "reads no text there; run OCR on the PDF first)")
    return builder.build()


def _open(name: str, file: BinaryIO) -> PdfReader:
    try:
        return PdfReader(file, strict=False)
    except Exception as exc:  # noqa: BLE001 - pypdf's errors on garbage are of many kinds; all mean damaged
        raise DamagedDocument(name, f"is not a readable PDF ({type(exc).__name__}: {exc})") from None


def _check_encryption(name: str, reader: PdfReader) -> None:
    if not reader.is_encrypted:
        return
    try:
        opened = reader.decrypt("") != PasswordType.NOT_DECRYPTED
    except Exception:  # noqa: BLE001 - an unknown cipher, or AES without the `cryptography` package
        opened = False
    if not opened:
        raise EncryptedDocument(name, "is encrypted (password-protected); Tailor does not read encrypted PDFs: "
                                      "save a copy without the password and add that instead")


def _check_size(name: str, reader: PdfReader, limits: DocumentLimits) -> int:
    """The page count, from the page tree's /Count (before any page is read); DocumentBomb past a cap."""
    objects = _as_int(reader.trailer.get("/Size"))
    if objects > limits.max_pdf_objects:
        raise DocumentBomb(name, f"declares {objects:,} objects; Tailor reads PDFs of up to "
                                 f"{limits.max_pdf_objects:,} (MAX_PDF_OBJECTS)",
                           cap="MAX_PDF_OBJECTS", limit=limits.max_pdf_objects)
    try:
        pages = _as_int(reader.root_object["/Pages"].get_object().get("/Count"))
    except Exception as exc:  # noqa: BLE001 - a missing or broken catalog
        raise DamagedDocument(name, f"has no readable page tree ({type(exc).__name__}: {exc})") from None
    if pages > limits.max_pdf_pages:
        raise DocumentBomb(name, f"declares {pages:,} pages; Tailor reads PDFs of up to "
                                 f"{limits.max_pdf_pages:,} pages (MAX_PDF_PAGES)",
                           cap="MAX_PDF_PAGES", limit=limits.max_pdf_pages)
    try:
        return len(reader.pages)  # walks the tree: the real count, never more than it declared
    except Exception as exc:  # noqa: BLE001
        raise DamagedDocument(name, f"has a damaged page tree ({type(exc).__name__}: {exc})") from None


def _as_int(value: Any) -> int:
    try:
        return int(value.get_object() if hasattr(value, "get_object") else value or 0)
    except (TypeError, ValueError):
        return 0


def _outline_by_page(reader: PdfReader, builder: DocumentBuilder) -> dict[int, tuple[str, ...]]:
    """{page number: heading path} for each page a bookmark starts on (its deepest one wins)."""
    found: dict[int, tuple[str, ...]] = {}

    def walk(items: list[Any], path: tuple[str, ...]) -> None:
        last: tuple[str, ...] = path
        for item in items:
            if isinstance(item, list):
                walk(item, last)
            elif isinstance(item, Destination):
                last = (*path, str(item.title or "").strip())
                page = reader.get_destination_page_number(item)
                if page is not None and page >= 0:
                    found[page + 1] = last

    try:
        walk(reader.outline, ())
    except Exception as exc:  # noqa: BLE001 - a damaged outline costs the headings, not the text
        builder.warnings.append(f"its bookmarks could not be read ({type(exc).__name__}); pages have no headings")
        log.debug("outline of %s", builder.name, exc_info=True)
    return found


def _pages_in_words(pages: list[int]) -> str:
    """[3] -> "page 3"; [3, 5, 6, 7] -> "pages 3, 5–7"."""
    runs: list[list[int]] = []
    for page in pages:
        if runs and page == runs[-1][-1] + 1:
            runs[-1].append(page)
        else:
            runs.append([page])
    words = ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}–{run[-1]}" for run in runs)
    return f"page {words}" if len(pages) == 1 else f"pages {words}"
