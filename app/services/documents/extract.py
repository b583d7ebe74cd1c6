"""A path in, a Document out: the file checked and opened safely (files.py), its kind told by its extension,
the kind's extractor run. Folder indexing calls `extract_open` on a file it already opened and hashed, so
the bytes hashed are the bytes read."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from app.services.documents.document import Document
from app.services.documents.errors import UnsupportedFormat
from app.services.documents.files import open_document
from app.services.documents.limits import DEFAULT_LIMITS, DocumentLimits

# Extensions of source code and configuration, read as plain text with kind "code".
CODE_SUFFIXES = frozenset({
    ".py", ".pyi", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".cs", ".java", ".kt", ".kts", ".scala",
    ".go", ".rs", ".swift", ".m", ".mm", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".vue", ".svelte",
    ".rb", ".php", ".pl", ".pm", ".lua", ".r", ".jl", ".dart", ".ex", ".exs", ".erl", ".hs", ".ml", ".fs",
    ".clj", ".sh", ".bash", ".zsh", ".fish", ".ps1", ".bat", ".cmd", ".sql", ".css", ".scss", ".less",
    ".json", ".jsonl", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".conf", ".xml", ".proto", ".graphql",
    ".tf", ".nix", ".cmake", ".gradle", ".mk", ".dockerfile", ".ipynb",
})
TEXT_SUFFIXES = frozenset({".txt", ".text", ".log", ".rst", ".org", ".adoc", ".tex", ".srt", ".vtt", ""})
# Files named without an extension that are text by convention.
TEXT_NAMES = frozenset({"makefile", "dockerfile", "license", "readme", "changelog", "authors", "notice"})

KINDS = {
    **dict.fromkeys(TEXT_SUFFIXES, "text"),
    **dict.fromkeys(CODE_SUFFIXES, "code"),
    ".md": "markdown", ".markdown": "markdown", ".mdx": "markdown",
    ".html": "html", ".htm": "html", ".xhtml": "html",
    ".pdf": "pdf",
    ".docx": "docx",
    ".csv": "csv", ".tsv": "csv",
}


def kind_of_name(name: str) -> str | None:
    """The kind a file of this name is read as, or None for one Tailor does not read."""
    path = Path(name)
    if path.name.lower() in TEXT_NAMES:
        return "text"
    suffix = path.suffix.lower()
    if suffix == "" and path.name.startswith("."):
        return None  # a dotfile (.env, .bashrc) is configuration, not a document
    return KINDS.get(suffix)


def extract_document(path: Path, limits: DocumentLimits = DEFAULT_LIMITS) -> Document:
    """The Document of the file at `path`.

    Raises:
        DocumentRefused: one of its subclasses, naming the file and why (errors.py).
    """
    kind = kind_or_refuse(path.name)
    with open_document(path, limits) as file:
        return extract_open(path.name, kind, file, limits)


def extract_open(name: str, kind: str, file: BinaryIO, limits: DocumentLimits = DEFAULT_LIMITS) -> Document:
    """The Document of an opened file of a known kind (kind_of_name); the file is read from its start."""
    file.seek(0)
    # Each extractor is imported when a file of its kind is first read: pypdf, python-docx and lxml cost
    # their import time only to those who read a PDF or a DOCX. (Plain imports, so PyInstaller sees them.)
    if kind in ("text", "code"):
        from app.services.documents.formats import plain

        return plain.extract(name, file, limits, kind)
    if kind == "markdown":
        from app.services.documents.formats import markdown

        return markdown.extract(name, file, limits)
    if kind == "html":
        from app.services.documents.formats import html

        return html.extract(name, file, limits)
    if kind == "pdf":
        from app.services.documents.formats import pdf

        return pdf.extract(name, file, limits)
    if kind == "docx":
        from app.services.documents.formats import docx

        return docx.extract(name, file, limits)
    if kind == "csv":
        from app.services.documents.formats import csv_rows

        return csv_rows.extract(name, file, limits)
    raise ValueError(f"no extractor for the kind {kind!r}")


def kind_or_refuse(name: str) -> str:
    kind = kind_of_name(name)
    if kind is None:
        raise UnsupportedFormat(name, "is not a kind of document Tailor reads (text, Markdown, source code, "
                                      "HTML, PDF, DOCX, CSV)")
    return kind
