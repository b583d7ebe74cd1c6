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
from app.services.documents.indexing import FolderReport, Progress, index_folder
from app.services.documents.knowledge import KnowledgeError, create_knowledge
from app.services.paths import AppPaths


def add_index_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("index", help="index a folder's documents for `tailor chat --knowledge NAME`")
    parser.add_argument("folder", type=Path, help="the folder (links in it are not followed)")
    parser.add_argument("--name", required=True, help="the knowledge index's name (made, or brought up to date)")
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

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        with index:
            report = index_folder(index, folder, progress=_show_progress, cancel=cancel)
            documents, chunks = index.counts()
    finally:
        signal.signal(signal.SIGINT, previous)
    sys.stderr.write("\n")
    for skipped in report.skipped:
        print(f"tailor: skipped {skipped.path}: {skipped.reason}", file=sys.stderr)
    print(f"tailor: {_summary(report, args.name)}; the index holds {documents:,} documents in {chunks:,} passages",
          file=sys.stderr)
    return 130 if report.cancelled else 0


def _show_progress(progress: Progress) -> None:
    sys.stderr.write(f"\rindexing {progress.files_done:,}/{progress.files_total:,} files · "
                     f"{progress.bytes_done / 1e6:,.1f}/{progress.bytes_total / 1e6:,.1f} MB")
    sys.stderr.flush()


def _summary(report: FolderReport, name: str) -> str:
    done = (f"{len(report.indexed):,} files indexed ({report.chunks:,} passages), {report.unchanged:,} unchanged, "
            f"{len(report.removed):,} removed, {len(report.skipped):,} skipped")
    return f"cancelled: {done} kept in {name!r}" if report.cancelled else f"{name!r}: {done}"
