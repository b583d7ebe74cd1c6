"""EngineTokens: a text's tokens by the loaded model's tokenizer, through the engine process's token count,
against the same tokenizer read directly (llama.cpp, vocabulary only)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import llama_cpp
import pytest

from app.chat.engine_tokens import EngineTokens, TokenCountFailed
from app.server.own_engine import OwnEngine
from app.services.load_settings import LoadSettings
from tests.app.services.documents.makers import filler


@pytest.fixture(scope="module")
def engine(starter_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnEngine]:
    own = OwnEngine(log_path=tmp_path_factory.mktemp("logs") / "engine.log")
    own.load(starter_model, LoadSettings(n_ctx=1024))
    yield own
    own.shutdown()


def test_a_text_counts_as_the_model_tokenizes_it_whatever_its_length(engine: OwnEngine, starter_model: Path):
    vocab = llama_cpp.Llama(str(starter_model), vocab_only=True, verbose=False)
    tokens = EngineTokens(engine.client)
    # Longer than the 1,024-token context: a count is a tokenization, not a prompt that must fit.
    for text in ("Paris", "The lighthouse keeper's parrot is named Archimedes Quill.", filler(3, 2_000)):
        real = len(vocab.tokenize(text.encode(), add_bos=False, special=False))
        assert abs(tokens(text) - real) <= 1, text[:40]  # the template's markers cancel out
    assert tokens("") == 0


def test_an_engine_gone_is_a_failure_not_a_hang(starter_model: Path, tmp_path: Path):
    own = OwnEngine(log_path=tmp_path / "engine.log")
    own.load(starter_model, LoadSettings(n_ctx=512))
    tokens = EngineTokens(own.client, timeout=30)
    assert tokens("Paris") >= 1
    own.shutdown()
    with pytest.raises(TokenCountFailed, match="the engine could not count tokens"):
        tokens("Paris")
