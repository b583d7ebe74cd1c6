"""CSV and TSV: each row a block, its cells joined by " | ", and the header row carried by every block so
the chunker repeats it at the top of every chunk (a chunk of rows 900–950 still says which column is
which). The dialect (comma, semicolon, tab...) is sniffed from the first 64 KB. A field over the csv
module's limit (128 KB: a CSV that is no table) stops the reading there, with a warning; the limit is not
raised, as it is global to the process."""

from __future__ import annotations

import csv
import io
from typing import BinaryIO

from app.services.documents.document import Document, DocumentBuilder
from app.services.documents.limits import DocumentLimits
from app.services.documents.text import read_text

_SNIFF_CHARS = 65_536


def extract(name: str, file: BinaryIO, limits: DocumentLimits) -> Document:
    text, warnings = read_text(name, file, limits.max_text_chars)
    builder = DocumentBuilder(name, "csv", limits.max_text_chars, warnings=warnings)
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(text[:_SNIFF_CHARS], ",;\t|")
    except csv.Error:
        dialect = csv.excel_tab if name.lower().endswith(".tsv") else csv.excel
    rows = csv.reader(io.StringIO(text), dialect)
    header: str | None = None
    try:
        for row in rows:
            line = " | ".join(cell.strip() for cell in row)
            if not line.strip(" |"):
                continue
            if header is None:
                header = line
                continue
            builder.paragraph(line, header=header)
            if builder.full:
                break
    except csv.Error as exc:
        builder.warnings.append(f"stopped at line {rows.line_num}: {exc}")
    if header is not None and builder.empty:  # a header alone is still the file's content
        builder.paragraph(header)
    return builder.build()
