"""A folder indexed in a process of its own, for the window.

Indexing is Python work (pypdf's parser, the chunker, the text of 5 MB logs); on a thread beside the window
it contends for the GIL, and the window stalled up to 100 ms at a time (tests/bench/documents.py). In a child
process it takes none of the window's time: the child reads and writes the index and sends its progress
through a pipe; the parent's reader waits on the pipe, which releases the GIL. Cancel is a process-shared
event the indexer looks at before each file; what was indexed is kept (each file commits whole).

The child is started with the "spawn" method, as the engine is (engine/client.py), so it imports only what
indexing needs and works the same in the frozen app.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from app.services.documents.embedder import Embedder, EmbedderError
from app.services.documents.embedding import EmbedProgress, EmbedReport, embed_index
from app.services.documents.indexing import FolderReport, Progress, index_files, index_folder
from app.services.documents.knowledge import create_knowledge


@dataclass(frozen=True, slots=True)
class IndexOutcome:
    """What a run did: the folder's report; the embedding's (None: no embedding model, or the run was
    cancelled first); why embedding failed, if it did (the words' index stands all the same)."""

    report: FolderReport
    embedded: EmbedReport | None = None
    embed_problem: str | None = None


def _index_in_child(data_dir: str, name: str, sources: list[str], embed_model: str | None, out: Connection,
                    cancel) -> None:
    """The child's work: messages ("progress", Progress) and ("embedding", EmbedProgress), then
    ("finished", IndexOutcome) or ("failed", one line). `sources`: one folder, or files."""
    try:
        with create_knowledge(Path(data_dir), name) as index:
            paths = [Path(s) for s in sources]
            progress = lambda p: out.send(("progress", p))  # noqa: E731
            if len(paths) == 1 and paths[0].is_dir():
                report = index_folder(index, paths[0], progress=progress, cancel=cancel)
            else:
                report = index_files(index, paths, progress=progress, cancel=cancel)
            outcome = IndexOutcome(report)
            if embed_model is not None and not report.cancelled:
                outcome = _embed(index, Path(embed_model), report, out, cancel)
    except Exception as exc:  # the parent says it in one line; the child never dies with a traceback alone
        out.send(("failed", f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)))
    else:
        out.send(("finished", outcome))
    finally:
        out.close()


def _embed(index, model: Path, report: FolderReport, out: Connection, cancel) -> IndexOutcome:
    """The index's chunks without a vector embedded by `model` (in an engine process of this child's)."""
    try:
        with Embedder(model) as embedder:
            embedded = embed_index(index, embedder, progress=lambda p: out.send(("embedding", p)), cancel=cancel)
    except (EmbedderError, OSError) as exc:
        return IndexOutcome(report, None, str(exc))
    return IndexOutcome(report, embedded)


class IndexProcess:
    """Index `folder` (or a list of files) into the knowledge index `name` under `data_dir` in a child process,
    then embed its new passages with `embed_model` (None: words only).

    Args:
        on_progress: each Progress (files) and EmbedProgress (passages embedded).
        on_finished, on_failed: the IndexOutcome, or why the run stopped.
        All are called on the reader thread (the caller marshals them to its own).
    """

    def __init__(self, data_dir: Path, name: str, folder: Path | list[Path],
                 on_progress: Callable[[Progress | EmbedProgress], None],
                 on_finished: Callable[[IndexOutcome], None], on_failed: Callable[[str], None],
                 embed_model: Path | None = None):
        sources = [str(p) for p in folder] if isinstance(folder, list) else [str(folder)]
        self._args = (str(data_dir), name, sources, str(embed_model) if embed_model is not None else None)
        self._on_progress, self._on_finished, self._on_failed = on_progress, on_finished, on_failed
        self._context = multiprocessing.get_context("spawn")
        self._cancel = self._context.Event()
        self._process: multiprocessing.process.BaseProcess | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        read, write = self._context.Pipe(duplex=False)
        # Not a daemon: the child starts the embedding model's engine process itself, and a daemon may not have
        # children. A closing window cancels it (it stops after the file or batch at hand).
        process = self._process = self._context.Process(
            target=_index_in_child, args=(*self._args, write, self._cancel), name="tailor-indexer")
        process.start()
        write.close()  # the child's end: when the child is gone, the reader sees EOF
        self._reader = threading.Thread(target=self._read, args=(read,), name="indexer-reader", daemon=True)
        self._reader.start()

    def cancel(self) -> None:
        """Stop after the file being read."""
        self._cancel.set()

    def wait(self, timeout_s: float = 30.0) -> bool:
        """Wait for the child and its reader to end; whether they did."""
        for part in (self._reader, self._process):
            if part is not None:
                part.join(timeout_s)
        return not (self._reader is not None and self._reader.is_alive()) and not (
            self._process is not None and self._process.is_alive())

    @property
    def running(self) -> bool:
        return self._reader is not None and self._reader.is_alive()

    def _read(self, read: Connection) -> None:
        """Progress as it comes; the outcome once the child has exited, so a caller that waits for the run
        after its outcome (the dialog, on the GUI thread) never waits for the child's interpreter to end."""
        outcome: tuple[str, object] | None = None
        try:
            while True:
                try:
                    kind, value = read.recv()
                except EOFError:
                    break
                if kind in ("progress", "embedding"):
                    self._on_progress(value)
                else:
                    outcome = (kind, value)
        finally:
            read.close()
            process = self._process
            if process is not None:
                process.join(30.0)
        if outcome is None:  # killed, or out of memory: the pipe closed with nothing said
            code = process.exitcode if process is not None else None
            self._on_failed(f"the indexing process ended without finishing (exit code {code})")
        elif outcome[0] == "finished":
            self._on_finished(outcome[1])
        else:
            self._on_failed(str(outcome[1]))
