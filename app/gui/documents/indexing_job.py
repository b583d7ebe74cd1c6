"""A folder indexed into a knowledge index on a thread of its own, its progress reported to the GUI thread.

The indexer (app/services/documents/indexing.py) reads one file at a time and commits each whole; here it runs
on a Python thread (a folder of thousands of files takes minutes), each file's progress crosses to the GUI
thread as a queued signal, and Cancel sets the flag the indexer looks at before each file: what was indexed is
kept. The index is opened and closed on that thread (a SQLite connection stays on the thread that made it).
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.services.documents.indexing import FolderReport, Progress, index_folder
from app.services.documents.knowledge import create_knowledge


def name_for_folder(folder: Path) -> str:
    """A knowledge name made of a folder's name: letters, digits, '.', '-' and '_', at most 64 characters."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", folder.name).strip("-.")[:64]
    return name or "knowledge"


def progress_line(progress: Progress) -> str:
    return (f"{progress.files_done:,} of {progress.files_total:,} files · "
            f"{progress.bytes_done / 1e6:,.1f} of {progress.bytes_total / 1e6:,.1f} MB")


def report_line(report: FolderReport, name: str) -> str:
    done = (f"{len(report.indexed):,} files indexed ({report.chunks:,} passages), {report.unchanged:,} unchanged, "
            f"{len(report.removed):,} removed, {len(report.skipped):,} skipped")
    return f"Cancelled: {done}; kept in “{name}”." if report.cancelled else f"“{name}”: {done}."


class IndexingJob(QObject):
    """Index `folder` into the knowledge index `name` under `data_dir`; start() returns at once.

    Signals:
        progress(object): a Progress, after each file.
        finished(object): the FolderReport (cancelled or not).
        failed(str): why the run stopped (the index could not be made or written: a full disk...).
    """

    progress = Signal(object)
    finished = Signal(object)
    failed = Signal(str)

    def __init__(self, data_dir: Path, name: str, folder: Path, parent: QObject | None = None):
        super().__init__(parent)
        self.data_dir, self.name, self.folder = data_dir, name, folder
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"index {name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        """Stop after the file being read (each file commits whole or not at all)."""
        self._cancel.set()

    def wait(self, timeout_s: float = 30.0) -> bool:
        """Wait for the thread to end (a closing window, a test); whether it did."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        try:
            with create_knowledge(self.data_dir, self.name) as index:
                report = index_folder(index, self.folder, progress=lambda p: self._say("progress", p),
                                      cancel=self._cancel)
        except Exception as exc:  # any failure of the run is the user's to know, in one line; never a crash
            self._say("failed", f"Indexing {self.folder} stopped: {exc}")
            return
        self._say("finished", report)

    def _say(self, signal: str, value: object) -> None:
        """Emit on this object's `signal`; when the object is gone (its window closed), stop after this file."""
        try:
            getattr(self, signal).emit(value)
        except RuntimeError:  # the C++ object was deleted with its parent
            self._cancel.set()
