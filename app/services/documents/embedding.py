"""A document index's chunks embedded: the ones without a vector, a batch at a time, by one embedding model.

Run after a folder is indexed (new chunks have no vector yet) and again whenever: it embeds only what is
missing, so a cancelled run goes on where it stopped. When the index's vectors came from another model, or
the model's dimension changed, they are all dropped first and made again, and the report says so. Each batch
commits on its own: a cancel keeps what was embedded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from app.services.documents.index.store import DocumentIndex
from app.services.documents.indexing import CancelFlag

# Chunks read, embedded and committed together.
BATCH = 64


class TextEmbedder(Protocol):
    """What embeds (embedder.Embedder): `key` names its model; `embed` gives one row per text."""

    key: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class EmbedProgress:
    done: int  # chunks with a vector now
    total: int


@dataclass(frozen=True, slots=True)
class EmbedReport:
    """What embedding an index did: chunks embedded now, whether another model's vectors were dropped first,
    and whether it was cancelled before the end."""

    embedded: int
    rebuilt: bool
    cancelled: bool = False
    model: str = ""


def embed_index(index: DocumentIndex, embedder: TextEmbedder, *, progress: Callable[[EmbedProgress], None] | None = None,
                cancel: CancelFlag | None = None, batch: int = BATCH) -> EmbedReport:
    """Embed every chunk of `index` that has no vector, with `embedder`'s model."""
    rebuilt = False
    known = index.vector_model()
    if known is not None and known[0] != embedder.key:  # another model: its vectors do not compare
        rebuilt = index.use_vector_model(embedder.key, known[1]) or rebuilt
    embedded = 0
    while True:
        if cancel is not None and cancel.is_set():
            return EmbedReport(embedded, rebuilt, True, embedder.key)
        todo = index.chunks_without_vectors(batch)
        if not todo:
            return EmbedReport(embedded, rebuilt, False, embedder.key)
        matrix = embedder.embed([text for _, text in todo])
        # The first batch says the dimension; a model file replaced by one of another width rebuilds here.
        rebuilt = index.use_vector_model(embedder.key, int(matrix.shape[1])) or rebuilt
        index.put_vectors([chunk_id for chunk_id, _ in todo], matrix)
        embedded += len(todo)
        if progress is not None:
            with_vectors, total = index.vector_counts()
            progress(EmbedProgress(with_vectors, total))
