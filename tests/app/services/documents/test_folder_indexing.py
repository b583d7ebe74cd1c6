"""A folder indexed one file at a time: a source tree, progress, cancel, files that leave the folder."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from app.services.documents.index import store
from app.services.documents.index.store import DocumentIndex
from app.services.documents.indexing import Progress, index_folder


def _source_tree(root: Path) -> Path:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / ".git").mkdir()
    (root / "src" / "pkg" / "__init__.py").write_text('"""The package."""\n')
    (root / "src" / "pkg" / "parser.py").write_text(
        "def parse_invoice(text):\n    \"\"\"Read an invoice's total.\"\"\"\n    return text.split()[-1]\n")
    (root / "src" / "pkg" / "server.go").write_text("package main\n\nfunc serveHealthcheck() {}\n")
    (root / "docs" / "README.md").write_text("# Billing\n\nInvoices are parsed by parse_invoice.\n")
    (root / ".git" / "config").write_text("[core] secret")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    return root


def test_a_source_tree_is_indexed_and_searchable(tmp_path: Path) -> None:
    root = _source_tree(tmp_path / "project")
    seen: list[Progress] = []
    with DocumentIndex(tmp_path / "index.db") as index:
        report = index_folder(index, root, progress=seen.append)
        names = sorted(Path(outcome.source).name for outcome in report.indexed)
        assert names == ["README.md", "__init__.py", "parser.py", "server.go"]  # no .git, no image
        assert report.skipped == [] and not report.cancelled
        hits = index.search("where is the invoice total parsed?")
        assert {hit.name for hit in hits[:2]} == {"parser.py", "README.md"}
        assert index.search("serveHealthcheck")[0].kind == "code"
    total = sum(p.stat().st_size for p in (root / "src" / "pkg").iterdir()) + (root / "docs" / "README.md").stat().st_size
    assert [(p.files_done, p.files_total) for p in seen] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert seen[-1].bytes_done == seen[-1].bytes_total == total


def test_a_second_run_reads_nothing_unchanged_and_drops_what_left(tmp_path: Path) -> None:
    root = _source_tree(tmp_path / "project")
    with DocumentIndex(tmp_path / "index.db") as index:
        index_folder(index, root)
        (root / "src" / "pkg" / "server.go").unlink()
        report = index_folder(index, root)
        assert report.indexed == [] and report.unchanged == 3
        assert report.removed == [str(root / "src" / "pkg" / "server.go")]
        assert index.search("serveHealthcheck") == []


def test_cancel_stops_before_the_next_file_and_keeps_the_finished_ones(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    for number in range(5):
        (root / f"{number}.txt").write_text(f"note number{number}")
    cancel = threading.Event()

    def after_each(progress: Progress) -> None:
        if progress.files_done == 2:
            cancel.set()

    with DocumentIndex(tmp_path / "index.db") as index:
        report = index_folder(index, root, progress=after_each, cancel=cancel)
        assert report.cancelled and len(report.indexed) == 2
        assert index.counts() == (2, 2) and report.removed == []
        finished = index_folder(index, root)
        assert len(finished.indexed) == 3 and finished.unchanged == 2


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_in_the_folder_is_reported_not_opened(tmp_path: Path) -> None:
    root = tmp_path / "inbox"
    root.mkdir()
    os.mkfifo(root / "pipe.txt")
    (root / "real.txt").write_text("real words")
    with DocumentIndex(tmp_path / "index.db") as index:
        report = index_folder(index, root)
    assert [(s.path.name, s.reason) for s in report.skipped] == [
        ("pipe.txt", "is a FIFO (named pipe), not a document; it was not opened")]
    assert len(report.indexed) == 1


def test_a_file_that_turns_unreadable_leaves_the_index(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "log.txt").write_text("quartz appears here")
    with DocumentIndex(tmp_path / "index.db") as index:
        index_folder(index, root)
        (root / "log.txt").write_bytes(b"\x00\x01binary now")
        report = index_folder(index, root)
        assert report.removed == [str(root / "log.txt")] and index.search("quartz") == []
        assert "NUL bytes" in report.skipped[0].reason


def test_chunks_are_inserted_in_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "INSERT_BATCH", 10)
    root = tmp_path / "docs"
    root.mkdir()
    (root / "long.txt").write_text("\n\n".join(f"paragraph {n} " + "word " * 300 for n in range(35)))
    batches: list[int] = []
    real = store.DocumentIndex.put_document

    def spy(self, sha256, document, chunks):
        def counted():
            for number, chunk in enumerate(chunks, start=1):
                if number % 10 == 1:
                    batches.append(number)
                yield chunk
        return real(self, sha256, document, counted())

    monkeypatch.setattr(store.DocumentIndex, "put_document", spy)
    with DocumentIndex(tmp_path / "index.db") as index:
        [outcome] = index_folder(index, root).indexed
    assert outcome.chunks == 35 and batches == [1, 11, 21, 31]
