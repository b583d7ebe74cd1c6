"""Embeddings on the GGUF backend: a tiny BERT (an embedding model) and the starter model (a chat model, which
embeds in a context of its own beside the chat's). Random weights say nothing of quality: these check the
mechanics (widths, norms, determinism, batches, limits, and that a chat is unchanged by embedding beside it)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from engine.backend import BackendError
from engine.gguf.backend import GgufBackend
from engine.gguf.embedding import pack
from engine.protocol import ChatMessage, Embeddings, EmbedRequest, LoadRequest, SamplingParams
from tests.engine.helpers import reply

TEXTS = ["The cat sat on the mat.", "Embeddings turn text into vectors.", "Paris is the capital of France.",
         "def add(a, b):\n    return a + b", "Ein Satz auf Deutsch, mit Umlauten: äöü."]
GREEDY = SamplingParams(temperature=0.0, max_tokens=12)
FRANCE = (ChatMessage("user", "What is the capital of France?"),)


def embed(backend: GgufBackend, inputs, normalize: bool = True) -> Embeddings:
    """Run an EmbedRequest to its end, as the host does (a step per batch)."""
    job = backend.embed(EmbedRequest(7, tuple(inputs), normalize))
    while (answer := job.step()) is None:
        pass
    return answer


def vectors(answer: Embeddings) -> list[list[float]]:
    return [answer.floats(i) for i in range(len(answer.vectors))]


def norm(v: list[float]) -> float:
    return math.hypot(*v)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (norm(a) * norm(b))


def max_diff(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


def load(backend: GgufBackend, path: Path, **settings) -> None:
    backend.load(LoadRequest(str(path), **{"n_ctx": 2048, "prefix_cache_bytes": 0, **settings}))


def test_batches_are_consecutive_inputs_within_the_ubatch_and_the_sequences():
    assert pack([3, 3, 3], max_tokens=6, max_inputs=64) == [range(0, 2), range(2, 3)]
    assert pack([1] * 5, max_tokens=512, max_inputs=2) == [range(0, 2), range(2, 4), range(4, 5)]
    assert pack([6, 1], max_tokens=6, max_inputs=64) == [range(0, 1), range(1, 2)]
    assert pack([], max_tokens=6, max_inputs=64) == []


# ---------------------------------------------------------------- an embedding model (tiny BERT)


def test_an_embedding_model_loads_for_embeddings_with_no_kv_cache(backend: GgufBackend, tiny_bert: Path):
    load(backend, tiny_bert)  # not asked for: the file says it is one
    info = backend._info
    assert info.embeddings and info.architecture == "bert" and info.n_embd == 128
    assert info.n_ctx == 512  # the context asked for, capped at the trained length (learned positions)
    memory = backend.memory()
    assert sum(d.kv_allocated_bytes for d in memory.devices) == 0  # an encoder keeps no KV cache
    with pytest.raises(BackendError, match="embedding model") as refused:
        reply(backend, FRANCE, GREEDY)
    assert refused.value.kind == "bad_request"


def test_embedding_model_vectors(backend: GgufBackend, tiny_bert: Path):
    load(backend, tiny_bert)
    answer = embed(backend, [TEXTS[0], TEXTS[1], TEXTS[0]])
    got = vectors(answer)
    assert answer.dim == 128 and all(len(v) == 128 for v in got)
    assert max_diff(got[0], got[2]) < 1e-4  # the same text, the same vector (to float noise: other rows of a batch)
    assert embed(backend, [TEXTS[0], TEXTS[1], TEXTS[0]]).vectors == answer.vectors  # the same request: exactly
    assert max_diff(got[0], got[1]) > 1e-3  # different texts differ
    assert all(abs(norm(v) - 1.0) < 1e-5 for v in got)
    assert answer.tokens[0] == answer.tokens[2] and all(n > 3 for n in answer.tokens)
    raw = vectors(embed(backend, [TEXTS[0]], normalize=False))[0]
    assert abs(norm(raw) - 1.0) > 1e-3
    assert max_diff([x / norm(raw) for x in raw], got[0]) < 1e-5


def test_embedding_model_batch_equals_one_by_one(backend: GgufBackend, tiny_bert: Path):
    load(backend, tiny_bert)
    inputs = [f"{t} ({i})" for i, t in enumerate(TEXTS * 30)]  # 150 inputs of ~12 tokens: 4 batches or more
    assert backend.embed(EmbedRequest(1, tuple(inputs))).batches >= 4
    together = vectors(embed(backend, inputs))
    for i in (0, 1, 63, 64, 149):
        assert max_diff(together[i], vectors(embed(backend, [inputs[i]]))[0]) < 1e-4  # flash attention: f16 sums


def test_token_ids_embed_as_their_text(backend: GgufBackend, tiny_bert: Path):
    load(backend, tiny_bert)
    ids = backend._llama.tokenize(TEXTS[2].encode(), True, False)
    answer = embed(backend, [TEXTS[2], tuple(ids)])
    assert max_diff(answer.floats(0), answer.floats(1)) < 1e-4 and answer.tokens == (len(ids), len(ids))


def test_bad_inputs_are_refused_by_index_before_anything_runs(backend: GgufBackend, tiny_bert: Path):
    load(backend, tiny_bert)
    with pytest.raises(BackendError, match=r"Input 2 is \d+ tokens long; Tiny BERT embeds at most 512") as long:
        backend.embed(EmbedRequest(1, ("short", "short", "word " * 600)))
    assert long.value.kind == "context_overflow"
    with pytest.raises(BackendError, match="Input 1 holds the token id 999999") as bad_id:
        backend.embed(EmbedRequest(1, ((5, 6), (7, 999999))))
    assert bad_id.value.kind == "bad_request"
    with pytest.raises(BackendError, match="Input 0 is empty"):
        backend.embed(EmbedRequest(1, ("",)))
    with pytest.raises(BackendError, match="no inputs"):
        backend.embed(EmbedRequest(1, ()))


def test_truncate_cuts_a_long_input_to_what_the_model_embeds(backend: GgufBackend, tiny_bert: Path):
    load(backend, tiny_bert)
    job = backend.embed(EmbedRequest(1, ("word " * 600, "short"), truncate=True))
    while (answer := job.step()) is None:
        pass
    assert answer.tokens[0] == 512 and len(answer.vectors) == 2


def test_a_chat_model_can_be_loaded_for_embeddings_only(backend: GgufBackend, starter_model: Path):
    load(backend, starter_model, embeddings=True)
    assert backend._info.embeddings and backend._info.n_ctx == 2048
    answer = embed(backend, TEXTS[:2])
    assert answer.dim == 576 and answer.vectors[0] != answer.vectors[1]
    with pytest.raises(BackendError, match="embedding model"):
        reply(backend, FRANCE, GREEDY)


# ---------------------------------------------------------------- a chat model (the starter)


def test_a_chat_model_embeds_beside_its_chat(backend: GgufBackend, starter_model: Path):
    load(backend, starter_model)
    assert not backend._info.embeddings and backend._info.n_embd == 576
    before = reply(backend, FRANCE, GREEDY).text
    compute = sum(d.compute_bytes for d in backend.memory().devices)
    answer = embed(backend, [TEXTS[0], TEXTS[1], TEXTS[0]])
    got = vectors(answer)
    assert answer.dim == 576
    assert max_diff(got[0], got[2]) < 1e-4 and max_diff(got[0], got[1]) > 1e-3
    assert embed(backend, [TEXTS[0], TEXTS[1], TEXTS[0]]).vectors == answer.vectors
    assert all(abs(norm(v) - 1.0) < 1e-5 for v in got)
    # The embedding context's buffers are counted (as compute), and the chat's own cache is untouched.
    assert sum(d.compute_bytes for d in backend.memory().devices) > compute
    assert reply(backend, FRANCE, GREEDY).text == before


def test_a_chat_model_batch_equals_one_by_one(backend: GgufBackend, starter_model: Path):
    load(backend, starter_model)
    inputs = [f"{t} ({i})" for i, t in enumerate(TEXTS * 4)]
    together = vectors(embed(backend, inputs))
    for i in (0, 7, 19):
        # Not to the last bit: llama.cpp's sums over a batch of another size run in another order (measured:
        # 1 - cosine about 1.5e-5). Another text is far further: 1 - cosine above 1e-3.
        assert cosine(together[i], vectors(embed(backend, [inputs[i]]))[0]) > 0.9999
    assert cosine(together[0], together[1]) < 0.999


def test_a_chat_model_embeds_inputs_of_one_ubatch(backend: GgufBackend, starter_model: Path):
    load(backend, starter_model)
    with pytest.raises(BackendError, match=r"Input 1 is [\d,]+ tokens long; .* at most 512 tokens") as long:
        backend.embed(EmbedRequest(1, ("short", "word " * 700)))
    assert long.value.kind == "context_overflow"
    assert embed(backend, ["word " * 500]).tokens[0] <= 512

