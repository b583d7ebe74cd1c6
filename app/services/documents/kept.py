"""A document attached to a message: read once, its text extracted and its original kept in the media store.

The file is opened once (safely: files.py), hashed, kept, and extracted from the same open file, so the
original kept is the very bytes whose text was read, whatever happens to the file afterwards. A file larger
than the store keeps (it refuses to read back anything larger) is sent as its text only, and said so; a store
that cannot be written (a full disk) likewise: the message loses nothing it says.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from app.services.documents.document import Document
from app.services.documents.extract import extract_open, kind_or_refuse
from app.services.documents.files import open_document
from app.services.documents.limits import DEFAULT_LIMITS, DocumentLimits
from app.services.history.records import FileRef
from app.services.media.errors import StoredMediaError
from app.services.media.sniff import DOCUMENT_FORMATS, DOCUMENT_SUFFIXES
from app.services.media.store import MediaStore


@dataclass(frozen=True, slots=True)
class KeptDocument:
    """What attaching a file gave: its document, its original in the store (None: not kept, `problem` says
    why)."""

    document: Document
    original: FileRef | None
    problem: str | None = None


def read_and_keep(path: Path, store: MediaStore | None, limits: DocumentLimits = DEFAULT_LIMITS) -> KeptDocument:
    """The document of the file at `path`, its original put into `store` (None: not kept).

    Raises:
        DocumentRefused: as extract_document does.
    """
    kind = kind_or_refuse(path.name)
    with open_document(path, limits) as file:
        original, problem = None, None
        if store is not None:
            size = os.fstat(file.fileno()).st_size
            fmt = DOCUMENT_FORMATS[kind]
            if size > store.max_bytes:
                problem = (f"its original ({size / 1e6:,.0f} MB) is larger than the history keeps "
                           f"({store.max_bytes / 1e6:,.0f} MB): the text sent is kept, not the file")
            else:
                try:
                    stored = store.put(file.read(), DOCUMENT_SUFFIXES[fmt])
                    original = FileRef(stored.sha256, fmt, path.name)
                except StoredMediaError as exc:
                    problem = f"its original could not be kept ({exc}): the text sent is kept"
        document = extract_open(path.name, kind, file, limits)
    return KeptDocument(document, original, problem)
