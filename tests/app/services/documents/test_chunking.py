"""Documents cut into chunks along their structure, within a token budget, with offsets, pages, heading
paths and overlap."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.services.documents.chunking import chunk_document, estimate_tokens
from app.services.documents.document import DocumentBuilder
from app.services.documents.extract import extract_document
from tests.app.services.documents import makers


def _document(build) -> object:
    builder = DocumentBuilder("doc.txt", "text", 10_000_000)
    build(builder)
    return builder.build()


def _words(count: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(count))


def test_every_chunk_is_its_span_of_the_text_and_within_the_budget() -> None:
    document = _document(lambda b: [b.paragraph(_words(40, f"p{n}_")) for n in range(30)])
    chunks = list(chunk_document(document, budget=200, overlap=0))
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.text == document.text[chunk.start:chunk.end]
        assert chunk.tokens <= 200 and estimate_tokens(chunk.text) <= 200 + 2 * 6  # separators uncounted
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert chunks[0].start == 0 and chunks[-1].end == len(document.text)


def test_a_heading_starts_a_chunk_and_its_path_goes_with_it() -> None:
    def build(b: DocumentBuilder) -> None:
        b.heading(1, "Part I")
        b.heading(2, "Chapter 1")
        b.paragraph("alpha text")
        b.heading(2, "Chapter 2")
        b.paragraph("bravo text")

    document = _document(build)
    chunks = list(chunk_document(document))
    assert [(c.text, c.headings) for c in chunks] == [
        ("Part I\n\nChapter 1\n\nalpha text", ("Part I", "Chapter 1")),
        ("Chapter 2\n\nbravo text", ("Part I", "Chapter 2")),
    ]
    assert chunks[1].context == "Part I › Chapter 2"


def test_chunks_never_span_pages(tmp_path: Path) -> None:
    document = extract_document(makers.pdf_with_pages(tmp_path / "p.pdf", {}, 4))
    chunks = list(chunk_document(document, budget=10_000))
    assert [c.page for c in chunks] == [1, 2, 3, 4]


def test_consecutive_chunks_of_a_section_overlap_by_whole_lines() -> None:
    text = "\n".join(_words(10, f"l{n}_") for n in range(60))
    document = _document(lambda b: b.paragraph(text))
    chunks = list(chunk_document(document, budget=120, overlap=30))
    assert len(chunks) > 3
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert after.start < before.end  # they share text
        assert before.text.endswith(document.text[after.start:before.end])
        assert estimate_tokens(document.text[after.start:before.end]) <= 30 + 2


def test_a_line_longer_than_the_budget_is_split_at_spaces_then_anywhere() -> None:
    document = _document(lambda b: b.paragraph(_words(500, "w") + " " + "x" * 3000))
    chunks = list(chunk_document(document, budget=64, overlap=0))
    assert all(c.tokens <= 64 for c in chunks)
    assert "".join(document.text[c.start:c.end] for c in chunks) == document.text


def test_a_token_count_function_of_the_callers_is_used() -> None:
    document = _document(lambda b: [b.paragraph(_words(10, f"p{n}_")) for n in range(20)])
    words = lambda text: len(text.split())  # noqa: E731 - a stand-in for a tokenizer
    chunks = list(chunk_document(document, budget=25, overlap=0, count=words))
    assert all(words(c.text) <= 25 for c in chunks) and {words(c.text) for c in chunks} == {20}


def test_a_csv_header_is_repeated_with_every_chunk_of_rows(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    path.write_text("city,population\n" + "".join(f"town{n},{n * 100}\n" for n in range(400)))
    chunks = list(chunk_document(extract_document(path), budget=100, overlap=0))
    assert len(chunks) > 5
    assert {c.header for c in chunks} == {"city | population"}
    assert all("city | population" in c.context and "city" not in c.text for c in chunks)


def test_a_budget_too_small_for_a_sentence_is_refused() -> None:
    with pytest.raises(ValueError, match="too small"):
        list(chunk_document(_document(lambda b: b.paragraph("x")), budget=4))


def test_a_5_mb_log_is_chunked_whole_in_seconds(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    with path.open("w") as log:
        for n in range(85_000):
            log.write(f"2026-12-04T10:{n // 3600 % 60:02d}:{n % 60:02d} INFO worker-{n % 16} request {n} "
                      "served in 12 ms\n")
    assert path.stat().st_size > 5_000_000
    started = time.perf_counter()
    document = extract_document(path)
    chunks = list(chunk_document(document))
    elapsed = time.perf_counter() - started
    assert chunks[-1].end == len(document.text) and "request 84999 " in chunks[-1].text
    assert all(c.tokens <= 384 for c in chunks)
    assert elapsed < 20  # about 1 s on a CI core; quadratic cutting would take minutes
