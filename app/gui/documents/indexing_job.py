"""A folder indexed into a knowledge index in a process of its own (app/services/documents/index_process.py),
its progress reported to the GUI thread.

A folder of thousands of files takes minutes; the child does the work, so the window never waits on the GIL
for it. Each file's progress crosses to the GUI thread as a queued signal, and Cancel sets the flag the
indexer looks at before each file: what was indexed is kept.
"""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.services.documents.embedding import EmbedProgress
from app.services.documents.index_process import IndexOutcome, IndexProcess
from app.services.documents.indexing import FolderReport, Progress


def name_for_folder(folder: Path) -> str:
    """A knowledge name made of a folder's name: letters, digits, '.', '-' and '_', at most 64 characters."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", folder.name).strip("-.")[:64]
    return name or "knowledge"


def progress_line(progress: Progress | EmbedProgress) -> str:
    if isinstance(progress, EmbedProgress):
        return f"embedding passages: {progress.done:,} of {progress.total:,}"
    return (f"{progress.files_done:,} of {progress.files_total:,} files · "
            f"{progress.bytes_done / 1e6:,.1f} of {progress.bytes_total / 1e6:,.1f} MB")


def report_line(outcome: IndexOutcome, name: str) -> str:
    report: FolderReport = outcome.report
    done = (f"{len(report.indexed):,} files indexed ({report.chunks:,} passages), {report.unchanged:,} unchanged, "
            f"{len(report.removed):,} removed, {len(report.skipped):,} skipped")
    line = f"Cancelled: {done}; kept in “{name}”." if report.cancelled else f"“{name}”: {done}."
    embedded = outcome.embedded
    if embedded is not None:
        model = embedded.model.rsplit(":", 1)[0]
        again = f" (the passages of another model were made again with {model})" if embedded.rebuilt else ""
        stopped = ", cancelled before the end: the rest next time" if embedded.cancelled else ""
        line += f" {embedded.embedded:,} passages embedded with {model}{again}{stopped}."
    if outcome.embed_problem:
        line += f" Passages are found by their words only: {outcome.embed_problem}."
    return line


class IndexingJob(QObject):
    """Index `folder` (or a list of files) into the knowledge index `name` under `data_dir`, then embed its new
    passages with `embed_model` (None: words only); start() returns at once.

    Signals:
        progress(object): a Progress after each file, then an EmbedProgress after each batch embedded.
        finished(object): the IndexOutcome (cancelled or not).
        failed(str): why the run stopped (the index could not be made or written: a full disk...).
    """

    progress = Signal(object)
    finished = Signal(object)
    failed = Signal(str)

    def __init__(self, data_dir: Path, name: str, folder: Path | list[Path], parent: QObject | None = None,
                 embed_model: Path | None = None):
        super().__init__(parent)
        self.data_dir, self.name, self.folder = data_dir, name, folder
        self._process = IndexProcess(data_dir, name, folder, lambda p: self._say("progress", p),
                                     lambda r: self._say("finished", r),
                                     lambda why: self._say("failed", f"Indexing stopped: {why}"),
                                     embed_model=embed_model)

    def start(self) -> None:
        self._process.start()

    def cancel(self) -> None:
        """Stop after the file being read (each file commits whole or not at all)."""
        self._process.cancel()

    def wait(self, timeout_s: float = 30.0) -> bool:
        """Wait for the indexing to end (a closing window, a test); whether it did."""
        return self._process.wait(timeout_s)

    @property
    def running(self) -> bool:
        return self._process.running

    def _say(self, signal: str, value: object) -> None:
        """Emit on this object's `signal` (from the reader thread: queued to the receivers' thread); when the
        object is gone (its window closed), stop after this file."""
        try:
            getattr(self, signal).emit(value)
        except RuntimeError:  # the C++ object was deleted with its parent
            self._process.cancel()
