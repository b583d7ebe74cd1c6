"""Embedding an index's passages with a real embedding model (a tiny BERT with random weights, loaded by the real
engine): every passage gets a vector, a second run embeds nothing, another model's width rebuilds them, and a
question finds by meaning what its words do not."""

from __future__ import annotations

import pytest

from app.services.documents.embedder import Embedder, embedding_models, model_key
from app.services.documents.embedding import embed_index
from app.services.documents.index.store import DocumentIndex
from app.services.documents.indexing import index_folder
from app.services.documents.semantic import QuestionEmbedders
from models.library import ModelStore
from tests.fixtures.tiny_bert import BertSpec, write_tiny_bert
from tests.fixtures.tiny_gguf import borrow_tokenizer

PASSAGE = "Lanterns glow softly above the quiet harbour wall at dusk"


@pytest.fixture
def folder(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "harbour.txt").write_text(f"{PASSAGE}\n")
    (folder / "market.txt").write_text("Fish are sold early at the market before the boats go out again\n")
    (folder / "school.txt").write_text("Pupils recite their tables every morning in the small school room\n")
    return folder


@pytest.fixture
def index(tmp_path, folder):
    index = DocumentIndex(tmp_path / "index.sqlite3")
    index_folder(index, folder)
    yield index
    index.close()


def test_every_passage_is_embedded_once_and_the_question_finds_it_by_meaning(index, tiny_bert, tmp_path):
    with Embedder(tiny_bert) as embedder:
        report = embed_index(index, embedder)
        assert (report.embedded, report.rebuilt, report.cancelled) == (3, False, False)
        assert index.vector_counts() == (3, 3) and index.vector_model() == (model_key(tiny_bert), 128)
        assert embed_index(index, embedder).embedded == 0  # nothing new
        # The passage's own text: its vector is the nearest (cosine 1) whatever the weights.
        ranking = index.vector_ranking(embedder.embed([PASSAGE])[0])
    assert index.search(PASSAGE, 1, vector_ranking=ranking)[0].text.strip() == PASSAGE


def test_a_model_of_another_width_rebuilds_the_vectors_and_says_so(index, tiny_bert, starter_model, tmp_path):
    wider = write_tiny_bert(tmp_path / "wider-bert.gguf", borrow_tokenizer(starter_model), BertSpec(n_embd=192))
    with Embedder(tiny_bert) as embedder:
        embed_index(index, embedder)
    with Embedder(wider) as embedder:
        report = embed_index(index, embedder)
    assert (report.embedded, report.rebuilt) == (3, True)
    assert index.vector_model() == (model_key(wider), 192) and index.vector_counts() == (3, 3)


def test_questions_are_embedded_with_the_librarys_model_of_the_index(index, tiny_bert, tmp_path):
    store = ModelStore(tmp_path / "data")
    store.import_gguf(tiny_bert)
    assert embedding_models(store) == [tiny_bert]
    questions = QuestionEmbedders(lambda: embedding_models(store))
    try:
        assert questions.ranking(index, PASSAGE) == (None, None)  # no vectors yet: words alone, nothing to say
        with Embedder(tiny_bert) as embedder:
            embed_index(index, embedder)
        ranking, why = questions.ranking(index, PASSAGE)
        assert why is None and len(ranking) == 3
        assert index.search("", 1, vector_ranking=ranking)[0].text.strip() == PASSAGE
    finally:
        questions.close()
    gone = QuestionEmbedders(lambda: [])
    ranking, why = gone.ranking(index, PASSAGE)
    assert ranking is None and "tiny-bert.gguf) is not in your library" in why


def test_a_chat_model_is_no_embedding_model_of_the_library(tmp_path, starter_model):
    store = ModelStore(tmp_path / "data")
    store.import_gguf(starter_model)
    assert embedding_models(store) == []
