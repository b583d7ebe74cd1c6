"""Embedding requests on the GGUF engine: inputs tokenized and checked, packed into batches, vectors normalized.

A job evaluates one batch per step of the host's loop, so replies running beside it go on between its batches
and a cancel ends it between two. A batch is consecutive inputs, each its own sequence, together at most one
ubatch of tokens (an encoder takes a batch in one ubatch or aborts; pooling needs each input whole in one) and
at most the context's sequences. An input longer than that is refused before anything runs, naming it.
"""

from __future__ import annotations

import logging
import math
import sys
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from engine.backend import BackendError
from engine.protocol import Embeddings, EmbedRequest
from models.formats.embedding_models import POOLING_MEAN, POOLING_NONE, is_embedding_model, pooling_type
from models.formats.gguf_header import read_gguf_header

log = logging.getLogger(__name__)


class BatchEmbedder(Protocol):
    """What a job needs of llama.cpp (engine/gguf/llama_embed.py's LlamaEmbedder)."""

    n_ubatch: int
    n_seq: int

    def run(self, inputs: Sequence[Sequence[int]]) -> list[bytes]: ...


def embedding_load(path: Path, asked: bool, n_ctx: int) -> tuple[int | None, int]:
    """How a GGUF file loads, from its header: the context of a load for embeddings only (`asked`, or the file
    is an embedding model): `n_ctx`, at most the trained length (past it an input has no learned position);
    None for a chat load. And how it pools: the header's pooling type, else the mean of its hidden states."""
    try:
        header = read_gguf_header(path)
    except (ValueError, OSError) as exc:  # llama.cpp reads it next, and says what is wrong
        log.info("no header read of %s: %s", path.name, exc)
        header = None
    meta = header.metadata if header is not None else {}
    pooling = pooling_type(meta)
    pooling = POOLING_MEAN if pooling in (None, POOLING_NONE) else pooling
    if not (asked or is_embedding_model(meta)):
        return None, pooling
    trained = header.n_ctx_train if header is not None else None
    return (min(n_ctx, trained) if isinstance(trained, int) and trained > 0 else n_ctx), pooling


def input_tokens(inputs: Sequence[str | Sequence[int]], tokenize: Callable[[str], list[int]], n_vocab: int,
                 limit: int, model: str, truncate: bool = False) -> list[list[int]]:
    """Each input's tokens: text tokenized by `tokenize`, token ids checked against the vocabulary; with
    `truncate`, an input longer than `limit` tokens is cut to its first `limit`.

    Raises:
        BackendError: "bad_request" for an empty input or a token id the model does not have;
            "context_overflow" for an input longer than `limit` tokens. Each names the input by index.
    """
    out = []
    for i, item in enumerate(inputs):
        tokens = tokenize(item) if isinstance(item, str) else list(item)
        if not tokens:
            raise BackendError("bad_request", f"Input {i} is empty: there is nothing to embed.")
        if not isinstance(item, str):
            bad = next((t for t in tokens if not 0 <= t < n_vocab), None)
            if bad is not None:
                raise BackendError("bad_request", f"Input {i} holds the token id {bad}, which {model} does not have "
                                                  f"(its vocabulary is 0 to {n_vocab - 1}).")
        if len(tokens) > limit and truncate:
            tokens = tokens[:limit]
        elif len(tokens) > limit:
            raise BackendError("context_overflow", f"Input {i} is {len(tokens):,} tokens long; {model} embeds at "
                                                   f"most {limit:,} tokens an input. Split it into shorter pieces.")
        out.append(tokens)
    return out


def pack(lengths: Sequence[int], max_tokens: int, max_inputs: int) -> list[range]:
    """Consecutive inputs (their indexes) per batch: at most `max_inputs`, `max_tokens` together (each input
    fits alone: input_tokens checked)."""
    batches, start, tokens = [], 0, 0
    for i, n in enumerate(lengths):
        if i > start and (tokens + n > max_tokens or i - start >= max_inputs):
            batches.append(range(start, i))
            start, tokens = i, 0
        tokens += n
    if start < len(lengths):
        batches.append(range(start, len(lengths)))
    return batches


def normalized(vector: bytes) -> bytes:
    """The float32 vector scaled to length 1 (a zero vector as it is)."""
    values = array("f", vector)
    norm = math.hypot(*values)
    if norm == 0.0 or not math.isfinite(norm):
        return vector
    return array("f", (v / norm for v in values)).tobytes()


def little_endian(vector: bytes) -> bytes:
    """float32 bytes in the machine's order as the Embeddings event carries them: little-endian."""
    if sys.byteorder == "little":
        return vector
    values = array("f", vector)
    values.byteswap()
    return values.tobytes()


class GgufEmbedJob:
    """One EmbedRequest under way: `step()` embeds the next batch, and answers with Embeddings after the last."""

    def __init__(self, request: EmbedRequest, tokens: list[list[int]], embedder: BatchEmbedder):
        self._request, self._tokens, self._embedder = request, tokens, embedder
        self._batches = pack([len(t) for t in tokens], embedder.n_ubatch, embedder.n_seq)
        self._vectors: list[bytes] = []
        self._next = 0  # the batch the next step runs

    @property
    def batches(self) -> int:
        return len(self._batches)

    def step(self) -> Embeddings | None:
        batch = self._batches[self._next]
        try:
            vectors = self._embedder.run([self._tokens[i] for i in batch])
        except (RuntimeError, ValueError) as exc:  # LlamaError is a RuntimeError
            raise BackendError("internal", f"Embedding inputs {batch.start}-{batch.stop - 1} failed: {exc}") from None
        self._next += 1
        if self._request.normalize:
            vectors = [normalized(v) for v in vectors]
        self._vectors.extend(little_endian(v) for v in vectors)
        if self._next < len(self._batches):
            return None
        return Embeddings(self._request.request_id, tuple(self._vectors), tuple(len(t) for t in self._tokens))
