"""The SQLite index: BM25 search over FTS5, documents keyed by content hash, removal, safe queries, and the
seam where a vector ranking is fused in."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from app.services.documents.index.fts_query import match_expression
from app.services.documents.index.fusion import reciprocal_rank_fusion
from app.services.documents.index.store import DocumentIndex
from app.services.documents.indexing import index_file
from tests.app.services.documents import makers

FACT = "The coolant pump of the Zorbulon reactor is painted teal, unlike every other pump on site."


@pytest.fixture
def index(tmp_path: Path):
    with DocumentIndex(tmp_path / "documents.db") as index:
        yield index


def _fts_rows(index: DocumentIndex) -> int:
    with sqlite3.connect(index.path) as db:
        return db.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'committee'").fetchone()[0]


def test_a_fact_on_page_37_of_60_is_found_first_with_its_page(tmp_path: Path, index: DocumentIndex) -> None:
    pages = {37: f"{makers.filler(37, 80)} {FACT} {makers.filler(38, 80)}",
             # distractors: the same words without the fact
             12: f"{makers.filler(12, 80)} The pump room was painted last spring. {makers.filler(13, 40)}",
             50: f"{makers.filler(50, 80)} Reactor coolant levels are checked daily. {makers.filler(51, 40)}"}
    path = makers.pdf_with_pages(tmp_path / "site-manual.pdf", pages, 60)
    outcome = index_file(index, path)
    assert outcome.status == "indexed" and outcome.chunks >= 60
    hits = index.search("What colour is the coolant pump of the Zorbulon reactor painted?", k=5)
    assert hits[0].page == 37 and "painted teal" in hits[0].text
    assert hits[0].source == str(path) and hits[0].name == "site-manual.pdf" and hits[0].kind == "pdf"
    assert {hit.page for hit in hits[1:]} >= {12, 50} and hits[0].score > max(hit.score for hit in hits[1:])


def test_hits_carry_headings_and_offsets_into_the_extracted_text(tmp_path: Path, index: DocumentIndex) -> None:
    from app.services.documents.extract import extract_document

    path = makers.word_document(tmp_path / "manual.docx")
    index_file(index, path)
    [hit] = index.search("boil stream", k=1)
    assert hit.headings == ("Field Manual", "Setting up camp", "Water")
    assert extract_document(path).text[hit.start:hit.end] == hit.text


def test_a_file_is_reindexed_only_when_its_bytes_change(tmp_path: Path, index: DocumentIndex) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("first version mentions apricots")
    assert index_file(index, path).status == "indexed"
    os.utime(path, ns=(1, 1))  # touched: the hash decides
    assert index_file(index, path, listed=path.stat()).status == "unchanged"
    assert index_file(index, path, listed=path.stat()).status == "unchanged"  # size and mtime as known
    path.write_text("second version mentions blueberries")
    assert index_file(index, path, listed=path.stat()).status == "indexed"
    assert index.search("apricots") == [] and len(index.search("blueberries")) == 1
    assert index.counts() == (1, 1)


def test_copies_share_one_document_and_removing_one_keeps_the_other(tmp_path: Path, index: DocumentIndex) -> None:
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("the committee met")
    second.write_text("the committee met")
    assert index_file(index, first).status == "indexed"
    assert index_file(index, second).status == "linked"
    assert index.counts() == (1, 1)
    assert index.remove(str(first.absolute()))
    assert [hit.source for hit in index.search("committee")] == [str(second.absolute())]
    assert index.remove(str(second.absolute()))
    assert index.counts() == (0, 0) and index.search("committee") == [] and _fts_rows(index) == 0
    assert not index.remove(str(second.absolute()))


@pytest.mark.parametrize("query", [
    '"unbalanced quote', "pump AND OR NOT", "NEAR(pump reactor, 2)", "pump*", "*", "text:pump", "(pump",
    "pump)", "^pump", "+pump -reactor", "'single' \"double\"", "", "   ", "?!", "über_pump", "a" * 10_000,
])
def test_any_query_a_person_types_is_searched_never_a_syntax_error(index: DocumentIndex, tmp_path: Path,
                                                                  query: str) -> None:
    path = tmp_path / "n.txt"
    path.write_text("pump reactor notes")
    index_file(index, path)
    hits = index.search(query)
    assert all(hit.name == "n.txt" for hit in hits)


def test_the_query_is_quoted_words_joined_by_or() -> None:
    assert match_expression('What is "NEAR" (the pump*)?') == '"near" OR "pump"'
    assert match_expression("The Who") == '"the" OR "who"'  # nothing but function words: kept
    assert match_expression(":*()") is None


def test_a_vector_ranking_is_fused_with_the_keyword_one(tmp_path: Path, index: DocumentIndex) -> None:
    for name, text in (("a.txt", "pump pump pump"), ("b.txt", "pump"), ("c.txt", "unrelated words")):
        (tmp_path / name).write_text(text)
        index_file(index, tmp_path / name)
    keyword = index.search("pump")
    assert [hit.name for hit in keyword] == ["a.txt", "b.txt"]
    by_name = {hit.name: hit.chunk_id for hit in keyword}
    c_id = next(h.chunk_id for h in index.search("unrelated"))
    fused = index.search("pump", vector_ranking=[by_name["b.txt"], c_id, 999_999])
    assert [hit.name for hit in fused] == ["b.txt", "a.txt", "c.txt"]  # 999_999 is no chunk: dropped


def test_reciprocal_rank_fusion_rewards_agreement() -> None:
    fused = reciprocal_rank_fusion([["x", "y"], ["y", "z"]])
    assert [item for item, _ in fused] == ["y", "x", "z"]
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)


def test_a_newer_index_file_is_refused(tmp_path: Path) -> None:
    from app.services.documents.index.schema import IndexVersionError

    path = tmp_path / "future.db"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version=99")
    with pytest.raises(IndexVersionError, match="version 99"):
        DocumentIndex(path)
