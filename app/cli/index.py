"""`tailor index FOLDER --name NAME`: a folder's documents into a knowledge index under Tailor's data folder
(app/services/documents/knowledge.py), for `tailor chat --knowledge NAME`.

Progress goes to stderr after each file. Ctrl+C sets the cancel flag the indexer looks at before each file:
the file being read finishes (each file commits whole or not at all), the run stops there, keeps what it
indexed, and exits 130; a second Ctrl+C interrupts at once (the open file's transaction rolls back).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from app.cli.errors import CliError
from app.services.documents.embedder import Embedder, EmbedderError, embedding_models
from app.services.documents.embedding import EmbedReport, embed_index
from app.services.documents.indexing import FolderReport, Progress, index_folder
from app.services.documents.knowledge import KnowledgeError, create_knowledge
from app.services.paths import AppPaths
from models.library import ModelStore


def add_index_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("index", help="index a folder's documents for `tailor chat --knowledge NAME`")
    parser.add_argument("folder", type=Path, help="the folder (links in it are not followed)")
    parser.add_argument("--name", required=True, help="the knowledge index's name (made, or brought up to date)")
    parser.add_argument("--embedding-model", type=Path, metavar="GGUF",
                        help="embed the passages with this embedding model, to find them by meaning too (default: "
                             "the first embedding model of your library, if there is one)")
    parser.add_argument("--no-embeddings", action="store_true", help="index the words only")
    parser.set_defaults(func=run_index)


def run_index(args: argparse.Namespace) -> int:
    folder: Path = args.folder
    if not folder.is_dir():
        raise CliError(f"{folder} is not a folder")
    try:
        index = create_knowledge(AppPaths.default().data_dir, args.name)
    except KnowledgeError as exc:
        raise CliError(str(exc)) from None
    cancel = threading.Event()

    def on_interrupt(_signum: int, _frame: object) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        cancel.set()
        print("\ntailor: stopping after this file (Ctrl+C again to stop now)", file=sys.stderr)

    model = None if args.no_embeddings else (args.embedding_model or _library_embedding_model())
    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        with index:
            report = index_folder(index, folder, progress=_show_progress, cancel=cancel)
            embedded = _embed(index, model, cancel) if model is not None and not report.cancelled else None
            documents, chunks = index.counts()
    finally:
        signal.signal(signal.SIGINT, previous)
    sys.stderr.write("\n")
    for skipped in report.skipped:
        print(f"tailor: skipped {skipped.path}: {skipped.reason}", file=sys.stderr)
    print(f"tailor: {_summary(report, args.name)}; the index holds {documents:,} documents in {chunks:,} passages",
          file=sys.stderr)
    if embedded is not None:
        again = " (another model's vectors were made again)" if embedded.rebuilt else ""
        print(f"tailor: {embedded.embedded:,} passages embedded with {model.name}{again}", file=sys.stderr)
    elif model is None and not args.no_embeddings:
        print("tailor: passages are found by their words; an embedding model in your library (a bge-small or "
              "nomic-embed-text GGUF) would find them by meaning too", file=sys.stderr)
    return 130 if report.cancelled or (embedded is not None and embedded.cancelled) else 0


def _library_embedding_model() -> Path | None:
    found = embedding_models(ModelStore(AppPaths.default().data_dir))
    return found[0] if found else None


def _embed(index, model: Path, cancel: threading.Event) -> EmbedReport:
    """The index's passages without a vector embedded by `model` (CliError when it cannot load or embed)."""
    try:
        with Embedder(model, AppPaths.default().engine_log) as embedder:
            report = embed_index(index, embedder, cancel=cancel, progress=lambda p: sys.stderr.write(
                f"\rembedding {p.done:,}/{p.total:,} passages"))
    except (EmbedderError, OSError) as exc:
        raise CliError(f"the words are indexed; embedding stopped: {exc}") from None
    sys.stderr.write("\n")
    return report


def _show_progress(progress: Progress) -> None:
    sys.stderr.write(f"\rindexing {progress.files_done:,}/{progress.files_total:,} files · "
                     f"{progress.bytes_done / 1e6:,.1f}/{progress.bytes_total / 1e6:,.1f} MB")
    sys.stderr.flush()


def _summary(report: FolderReport, name: str) -> str:
    done = (f"{len(report.indexed):,} files indexed ({report.chunks:,} passages), {report.unchanged:,} unchanged, "
            f"{len(report.removed):,} removed, {len(report.skipped):,} skipped")
    return f"cancelled: {done} kept in {name!r}" if report.cancelled else f"{name!r}: {done}"
