"""A draft model for the GGUF engine: a tiny GGUF with the starter's vocabulary drafts, the starter
verifies. Greedy replies stay identical; a draft of another vocabulary (one token differs) or one
that is not smaller is refused by name; its memory is a part of its own."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from engine.backend import BackendError
from engine.gguf.backend import GgufBackend
from engine.protocol import ChatMessage, LoadRequest, SamplingParams
from models.plan.load_options import SpeculativeOptions
from tests.engine.helpers import reply
from tests.fixtures.tiny_families import padded_tokenizer
from tests.fixtures.tiny_gguf import TinySpec, Tokenizer, borrow_tokenizer, write_tiny_llama

PROMPT = [ChatMessage("user", "Name three colours of the rainbow.")]
GREEDY = SamplingParams(temperature=0.0, max_tokens=48)


@pytest.fixture(scope="module")
def drafts(starter_model: Path, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("drafts")
    tokenizer = borrow_tokenizer(starter_model)
    other = replace(tokenizer, tokens=[*tokenizer.tokens[:500], "xyzzy", *tokenizer.tokens[501:]])
    # The same tokens, padded (as converters pad to the embedding's size, Qwen2.5 0.5B vs 7B) or cut short
    cut = set(tokenizer.tokens[-64:])
    shorter = Tokenizer(tokenizer.tokens[:-64], tokenizer.token_types[:-64],
                        [m for m in tokenizer.merges if m.replace(" ", "", 1) not in cut])
    return {
        "tiny": write_tiny_llama(folder / "tiny-draft.gguf", TinySpec(n_layers=2), tokenizer),
        "other-vocab": write_tiny_llama(folder / "other-vocab.gguf", TinySpec(n_layers=2), other),
        "padded": write_tiny_llama(folder / "padded.gguf", TinySpec(n_layers=2),
                                   padded_tokenizer(tokenizer, len(tokenizer.tokens) + 128)),
        "too-padded": write_tiny_llama(folder / "too-padded.gguf", TinySpec(n_layers=2),
                                       padded_tokenizer(tokenizer, len(tokenizer.tokens) + 129)),
        "shorter": write_tiny_llama(folder / "shorter.gguf", TinySpec(n_layers=2), shorter),
    }


def _load(backend: GgufBackend, starter_model: Path, mode: str, draft: Path | str | None = None) -> None:
    backend.load(LoadRequest(str(starter_model), n_ctx=2048, n_threads=2, prefix_cache_bytes=0,
                             speculation=SpeculativeOptions(mode, str(draft) if draft else None)))


def test_greedy_replies_are_the_same_with_a_draft_model(backend, starter_model, drafts):
    _load(backend, starter_model, "off")
    plain = reply(backend, PROMPT, GREEDY)
    _load(backend, starter_model, "draft", drafts["tiny"])
    drafted = reply(backend, PROMPT, GREEDY)
    assert drafted.text == plain.text and drafted.stats.gen_tokens == plain.stats.gen_tokens
    assert drafted.stats.draft_acceptance is not None  # it drafted (random weights: few are kept)
    again = reply(backend, [*PROMPT, ChatMessage("assistant", drafted.text), ChatMessage("user", "And two more?")],
                  GREEDY)
    assert again.text.strip() and again.stats.cached_tokens > 0  # the next turn, the draft's cache caught up


def test_the_draft_models_memory_is_a_part_of_its_own(backend, starter_model, drafts):
    _load(backend, starter_model, "off")
    alone = backend.memory().device("cpu")
    _load(backend, starter_model, "draft", drafts["tiny"])
    both = backend.memory().device("cpu")
    assert alone.draft_bytes == 0 and both.draft_bytes > 0
    # The model's own parts are what they were without it.
    assert (both.weights_bytes, both.kv_allocated_bytes) == (alone.weights_bytes, alone.kv_allocated_bytes)


def test_a_draft_with_another_vocabulary_is_refused_by_name(backend, starter_model, drafts):
    with pytest.raises(BackendError, match="other-vocab.gguf cannot draft for this model: token 500 is b'xyzzy'"):
        _load(backend, starter_model, "draft", drafts["other-vocab"])
    with pytest.raises(BackendError, match="No model is loaded"):  # nothing half-loaded stays
        reply(backend, PROMPT, GREEDY)


def test_a_draft_that_is_not_smaller_is_refused(backend, starter_model):
    with pytest.raises(BackendError, match="not smaller than the model"):
        _load(backend, starter_model, "draft", starter_model)


def test_bad_draft_files_are_refused_clearly(backend, starter_model, tmp_path):
    with pytest.raises(BackendError, match="needs the draft's GGUF file"):
        _load(backend, starter_model, "draft")
    with pytest.raises(BackendError, match="The draft model"):
        _load(backend, starter_model, "draft", tmp_path / "missing.gguf")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all" * 10)
    with pytest.raises(BackendError, match="The draft model"):
        _load(backend, starter_model, "draft", junk)


def test_auto_with_a_draft_file_drafts_with_it(backend, starter_model, drafts):
    _load(backend, starter_model, "auto", drafts["tiny"])
    assert backend.memory().device("cpu").draft_bytes > 0
    assert reply(backend, PROMPT, GREEDY).text.strip()


def test_auto_loads_without_a_draft_that_does_not_fit_and_says_why(backend, starter_model, drafts):
    info = backend.load(LoadRequest(str(starter_model), n_ctx=2048, n_threads=2, prefix_cache_bytes=0,
                                    speculation=SpeculativeOptions("auto", str(drafts["other-vocab"]))))
    assert "cannot draft for this model" in info.notice and "Drafting from the conversation only" in info.notice
    assert backend.memory().device("cpu").draft_bytes == 0
    assert reply(backend, PROMPT, GREEDY).text.strip()


def test_a_draft_whose_vocabulary_is_padded_or_shorter_drafts_and_changes_nothing(backend, starter_model, drafts):
    """Up to 128 tokens apart, the rest the same (llama.cpp's rule): a padded draft's guesses past the model's
    vocabulary are dropped, and a conversation holding a token the shorter draft lacks is not drafted from."""
    _load(backend, starter_model, "off")
    n_vocab = backend._llama.n_vocab

    def asking(word: str) -> list[ChatMessage]:
        return [ChatMessage("user", f"Repeat this word:{word} and name three colours.")]

    # A word the model writes as one of its last 64 tokens (the shorter draft's vocabulary lacks them)
    words = (t.replace("Ġ", " ") for t in borrow_tokenizer(starter_model).tokens[-64:] if t.startswith("Ġ"))
    prompt = next(asking(w) for w in words if max(backend._tokenize(backend._template.render(asking(w)))) >= n_vocab - 64)
    plain = reply(backend, prompt, GREEDY)
    for name in ("padded", "shorter"):
        _load(backend, starter_model, "draft", drafts[name])
        drafted = reply(backend, prompt, GREEDY)
        assert drafted.text == plain.text, name


def test_a_draft_more_than_128_tokens_longer_is_refused_by_name(backend, starter_model, drafts):
    with pytest.raises(BackendError, match=r"too-padded.gguf cannot draft for this model: it has 49,281 tokens, "
                                           r"the model 49,152 \(at most 128 apart, for padding\)"):
        _load(backend, starter_model, "draft", drafts["too-padded"])


def test_an_embedding_model_is_refused_as_a_draft_before_llama_cpp_aborts_on_it(backend, starter_model, tiny_bert):
    with pytest.raises(BackendError, match="tiny-bert.gguf cannot draft: it is an embedding model"):
        _load(backend, starter_model, "draft", tiny_bert)
