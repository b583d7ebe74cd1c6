"""Files into the index: one file, or a folder streamed one file at a time.

A file is opened once (files.py), hashed, and read from that same descriptor, so the content indexed is
the content hashed. A path whose size and mtime are as the index last saw them is skipped unhashed; one
whose bytes are already indexed (a copy) is linked to them without being read again. A document's chunks
flow from the chunker into the database in batches (DocumentIndex.put_document), inside one transaction
per file.

A folder is listed first (paths and stats only, for the totals the progress reports), then read one file
at a time: only one file's text and its structure are ever in memory. Progress is reported after each file;
the cancel flag is looked at before each, and a cancelled run keeps every file it finished. Files that
left the folder, or can no longer be read, leave the index.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from app.services.documents.chunking import (
    DEFAULT_BUDGET,
    DEFAULT_OVERLAP,
    TokenCounter,
    chunk_document,
    estimate_tokens,
)
from app.services.documents.errors import DocumentRefused
from app.services.documents.extract import extract_open, kind_or_refuse
from app.services.documents.files import open_document, sha256_of
from app.services.documents.index.store import DocumentIndex
from app.services.documents.limits import DEFAULT_LIMITS, DocumentLimits
from app.services.documents.walk import Listed, Skipped, walk_folder


class CancelFlag(Protocol):
    """What a cancel flag is: threading.Event is one."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class ChunkSettings:
    """How documents are cut: the token budget and overlap, and the function that counts tokens."""

    budget: int = DEFAULT_BUDGET
    overlap: int = DEFAULT_OVERLAP
    count: TokenCounter = estimate_tokens


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a folder's indexing stands, after each file."""

    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int
    current: str


@dataclass(frozen=True, slots=True)
class FileOutcome:
    """What became of one file: "indexed", "linked" (a copy of indexed content) or "unchanged"."""

    source: str
    status: str
    chunks: int = 0
    warnings: tuple[str, ...] = ()


@dataclass(slots=True)
class FolderReport:
    """What indexing a folder did."""

    indexed: list[FileOutcome] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    cancelled: bool = False

    @property
    def chunks(self) -> int:
        return sum(outcome.chunks for outcome in self.indexed)


def index_file(index: DocumentIndex, path: Path, *, limits: DocumentLimits = DEFAULT_LIMITS,
               settings: ChunkSettings = ChunkSettings(), kind: str | None = None,
               listed: os.stat_result | None = None) -> FileOutcome:
    """Bring the index up to date with the file at `path` (its absolute path is its source).

    Raises:
        DocumentRefused: the file cannot be read (errors.py); the index is left as it was.
    """
    source = str(Path(path).absolute())
    kind = kind or kind_or_refuse(path.name)
    known = index.source_state(source)
    if listed is not None and known is not None and (known.size, known.mtime_ns) == (
            listed.st_size, listed.st_mtime_ns):
        return FileOutcome(source, "unchanged")
    with open_document(path, limits, listed=listed) as file:
        info = os.fstat(file.fileno())
        sha256 = sha256_of(file)
        if known is not None and known.sha256 == sha256:
            with index.transaction():
                index.link_source(source, sha256, info.st_size, info.st_mtime_ns)  # touched, not changed
            return FileOutcome(source, "unchanged")
        if index.has_content(sha256):
            with index.transaction():
                index.link_source(source, sha256, info.st_size, info.st_mtime_ns)
            return FileOutcome(source, "linked")
        document = extract_open(path.name, kind, file, limits)
    chunks = chunk_document(document, settings.budget, settings.overlap, settings.count)
    with index.transaction():
        count = index.put_document(sha256, document, chunks)
        index.link_source(source, sha256, info.st_size, info.st_mtime_ns)
    return FileOutcome(source, "indexed", count, document.warnings)


def index_files(index: DocumentIndex, paths: list[Path], *, limits: DocumentLimits = DEFAULT_LIMITS,
                settings: ChunkSettings = ChunkSettings(), progress: Callable[[Progress], None] | None = None,
                cancel: CancelFlag | None = None) -> FolderReport:
    """Bring the index up to date with each of these files (a chat's knowledge made of several files, not a
    folder): one refused is skipped and named; the index's other sources stay."""
    report = FolderReport()
    sizes = []
    for path in paths:
        try:
            sizes.append(path.stat().st_size)
        except OSError:
            sizes.append(0)
    bytes_done = 0
    for done, (path, size) in enumerate(zip(paths, sizes, strict=True)):
        if cancel is not None and cancel.is_set():
            report.cancelled = True
            return report
        try:
            outcome = index_file(index, path, limits=limits, settings=settings)
        except DocumentRefused as exc:
            report.skipped.append(Skipped(path, exc.problem))
        else:
            if outcome.status == "unchanged":
                report.unchanged += 1
            else:
                report.indexed.append(outcome)
        bytes_done += size
        if progress is not None:
            progress(Progress(done + 1, len(paths), bytes_done, sum(sizes), str(path)))
    return report


def index_folder(index: DocumentIndex, root: Path, *, limits: DocumentLimits = DEFAULT_LIMITS,
                 settings: ChunkSettings = ChunkSettings(), progress: Callable[[Progress], None] | None = None,
                 cancel: CancelFlag | None = None) -> FolderReport:
    """Bring the index up to date with every document under `root` (links not followed: walk.py)."""
    root = Path(root).absolute()
    report = FolderReport()
    listed: list[Listed] = []
    for item in walk_folder(root):
        if isinstance(item, Skipped):
            report.skipped.append(item)
        else:
            listed.append(item)
    bytes_total = sum(item.info.st_size for item in listed)
    bytes_done = 0
    seen: set[str] = set()
    for done, item in enumerate(listed):
        if cancel is not None and cancel.is_set():
            report.cancelled = True
            return report
        source = str(item.path)
        try:
            outcome = index_file(index, item.path, limits=limits, settings=settings, kind=item.kind,
                                 listed=item.info)
        except DocumentRefused as exc:
            report.skipped.append(Skipped(item.path, exc.problem))
            if index.remove(source):  # indexed before, unreadable now: its old text must not answer
                report.removed.append(source)
        else:
            seen.add(source)
            if outcome.status == "unchanged":
                report.unchanged += 1
            else:
                report.indexed.append(outcome)
        bytes_done += item.info.st_size
        if progress is not None:
            progress(Progress(done + 1, len(listed), bytes_done, bytes_total, source))
    for source in index.sources(under=str(root)):
        if source not in seen and source not in report.removed and index.remove(source):
            report.removed.append(source)
    return report
