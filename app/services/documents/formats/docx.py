"""Word documents through python-docx: paragraphs in order, those styled "Title" or "Heading N" as
headings, tables row by row (cells joined by " | ") where they stand in the text.

A DOCX is a zip, and so can be a zip bomb: before python-docx unpacks anything, the zip's central
directory (its table of contents, at the end of the file) is read and the sizes its members declare are
summed; past MAX_UNZIPPED_BYTES, or with more than MAX_ZIP_MEMBERS members, it is refused. A member that
unpacks to more than it declares fails zipfile's CRC check instead of growing, so the declared sum holds.
python-docx parses the XML with entity resolution off (no billion laughs, no external entities).
"""

from __future__ import annotations

import re
import zipfile
from typing import BinaryIO

import docx
from docx.table import Table

from app.services.documents.document import Document, DocumentBuilder
from app.services.documents.errors import DamagedDocument, DocumentBomb
from app.services.documents.limits import DocumentLimits
from models.units import human_size

_HEADING_STYLE = re.compile(r"heading ([1-9])", re.IGNORECASE)


def extract(name: str, file: BinaryIO, limits: DocumentLimits) -> Document:
    check_zip(name, file, limits)
    file.seek(0)
    try:
        word = docx.Document(file)
    except Exception as exc:  # noqa: BLE001 - python-docx and lxml raise many kinds on a damaged file
        raise DamagedDocument(name, f"is not a readable Word document ({type(exc).__name__}: {exc})") from None
    builder = DocumentBuilder(name, "docx", limits.max_text_chars)
    for item in word.iter_inner_content():
        if isinstance(item, Table):
            for row in item.rows:
                # A merged cell comes back once per grid column it spans: keep it once (by its XML element,
                # not its text, so two cells that both say "0" stay two).
                cells = {cell._tc: " ".join(cell.text.split()) for cell in row.cells}
                builder.paragraph(" | ".join(cells.values()))
        else:
            level = _heading_level(item.style.name if item.style is not None else "")
            if level is not None:
                builder.heading(level, item.text)
            else:
                builder.paragraph(item.text)
        if builder.full:
            break
    return builder.build()


def _heading_level(style: str) -> int | None:
    """0 for "Title" (above every heading), N for "Heading N"; None for a body style."""
    if style.strip().lower() == "title":
        return 0
    match = _HEADING_STYLE.fullmatch(style.strip())
    return int(match.group(1)) if match else None


def check_zip(name: str, file: BinaryIO, limits: DocumentLimits) -> None:
    """Refuse a zip whose central directory declares too many members or bytes, before unpacking any.

    Raises:
        DamagedDocument: not a zip.
        DocumentBomb: past MAX_ZIP_MEMBERS or MAX_UNZIPPED_BYTES.
    """
    file.seek(0)
    try:
        with zipfile.ZipFile(file) as archive:  # reads the central directory only
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise DamagedDocument(name, f"is not a Word document (not a zip: {exc})") from None
    if len(members) > limits.max_zip_members:
        raise DocumentBomb(name, f"is a zip of {len(members):,} members; Tailor reads DOCX files of up to "
                                 f"{limits.max_zip_members:,} (MAX_ZIP_MEMBERS)",
                           cap="MAX_ZIP_MEMBERS", limit=limits.max_zip_members)
    unzipped = sum(member.file_size for member in members)
    if unzipped > limits.max_unzipped_bytes:
        raise DocumentBomb(name, f"unpacks to {human_size(unzipped)}; Tailor reads DOCX files that unpack to "
                                 f"at most {human_size(limits.max_unzipped_bytes)} (MAX_UNZIPPED_BYTES): "
                                 "a zip bomb?",
                           cap="MAX_UNZIPPED_BYTES", limit=limits.max_unzipped_bytes)
