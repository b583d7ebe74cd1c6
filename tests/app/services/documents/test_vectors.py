"""Chunk embeddings in the document index: the ranking they give, a model or dimension change rebuilding them,
a removed chunk taking its vector along, damaged rows passed over."""

from __future__ import annotations

import numpy as np
import pytest

from app.services.documents.chunking import chunk_document
from app.services.documents.document import Block, Document
from app.services.documents.index.store import DocumentIndex


def document(name: str, paragraphs: list[str]) -> Document:
    text = "\n\n".join(paragraphs)
    blocks, at = [], 0
    for paragraph in paragraphs:
        blocks.append(Block(at, at + len(paragraph)))
        at += len(paragraph) + 2
    return Document(name, "text", text, tuple(blocks))


@pytest.fixture
def index(tmp_path):
    index = DocumentIndex(tmp_path / "index.sqlite3")
    for n, words in enumerate(["alpha beta", "gamma delta", "epsilon zeta"]):
        doc = document(f"d{n}.txt", [words])
        with index.transaction():
            index.put_document(f"{n:064x}", doc, chunk_document(doc, 64))
            index.link_source(f"/docs/d{n}.txt", f"{n:064x}", 1, 1)
    yield index
    index.close()


def ids_and_texts(index):
    return index.chunks_without_vectors(100)


def test_the_nearest_vectors_rank_first_and_fuse_with_the_words(index):
    (a, _), (b, _), (c, _) = ids_and_texts(index)
    assert not index.use_vector_model("m:1", 3)
    index.put_vectors([a, b, c], np.array([[1, 0, 0], [0, 2, 0], [0, 0, 5]], dtype=np.float32))
    assert index.vector_counts() == (3, 3) and index.chunks_without_vectors(10) == []
    assert index.vector_ranking(np.array([0.1, 0.2, 0.9]), 3) == [c, b, a]
    assert index.vector_ranking(np.array([0.1, 0.2, 0.9]), 1) == [c]
    assert index.vector_ranking(np.array([1.0, 0.0]), 3) == []  # another dimension: no ranking
    # Words find nothing for this question; the vectors still bring the nearest passage.
    hits = index.search("nothing matches these words", 2, vector_ranking=index.vector_ranking(np.array([0, 1, 0]), 3))
    assert [h.chunk_id for h in hits] == [b, a]  # b nearest; a and c tie, a first (by id)


def test_another_model_or_dimension_drops_the_vectors(index):
    (a, _), (b, _), _ = ids_and_texts(index)
    index.use_vector_model("m:1", 3)
    index.put_vectors([a, b], np.eye(3, dtype=np.float32)[:2])
    assert not index.use_vector_model("m:1", 3)  # the same: kept
    assert index.use_vector_model("m:1", 4)  # wider: dropped, said
    assert index.vector_counts() == (0, 3) and index.vector_model() == ("m:1", 4)
    index.put_vectors([a], np.ones((1, 4), dtype=np.float32))
    assert index.use_vector_model("other:2", 4) and index.vector_counts() == (0, 3)


def test_a_removed_document_takes_its_vectors_and_a_damaged_row_is_passed_over(index):
    (a, _), (b, _), (c, _) = ids_and_texts(index)
    index.use_vector_model("m:1", 3)
    index.put_vectors([a, b, c], np.eye(3, dtype=np.float32))
    assert index.remove("/docs/d0.txt")
    assert index.vector_counts() == (2, 2)
    index._db.execute("UPDATE vectors SET vector = x'00' WHERE chunk_id = ?", (b,))
    assert index.vector_ranking(np.array([0, 1, 0]), 3) == [c]
