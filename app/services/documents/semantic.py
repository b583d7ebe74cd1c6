"""Questions embedded for a knowledge index's search by meaning: with the model its passages were embedded
with, found in the library by the key the index recorded (embedder.model_key), started in an engine process
when first needed and kept for the next question (a few hundred milliseconds to start; milliseconds a
question after). Without that model the search is by words alone, and the caller is told why, once.

Not thread-safe: one caller's pool thread at a time (the window's Sending step runs one job at a time).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.services.documents.embedder import Embedder, EmbedderError, model_key
from app.services.documents.index.store import FUSION_DEPTH, DocumentIndex


class QuestionEmbedders:
    """Embedding engines by model key.

    Args:
        find_models: the library's embedding models (embedder.embedding_models), asked when a key is new.
        log_path: where their engines log.
    """

    def __init__(self, find_models: Callable[[], list[Path]], log_path: Path | None = None):
        self._find_models, self._log_path = find_models, log_path
        self._started: dict[str, Embedder] = {}

    def ranking(self, index: DocumentIndex, question: str, k: int = FUSION_DEPTH) -> tuple[list[int] | None, str | None]:
        """(chunk ids nearest the question, or None for words alone; why words alone, or None)."""
        known = index.vector_model()
        if known is None:
            return None, None
        key = known[0]
        try:
            embedder = self._embedder(key)
        except (EmbedderError, OSError) as exc:
            return None, f"searching by words only: {exc}"
        if embedder is None:
            return None, (f"searching by words only: the embedding model the knowledge was embedded with "
                          f"({key.rsplit(':', 1)[0]}) is not in your library")
        try:
            vector = embedder.embed([question])[0]
        except EmbedderError as exc:
            self._started.pop(key, None)
            embedder.close()
            return None, f"searching by words only: {exc}"
        return index.vector_ranking(vector, k), None

    def _embedder(self, key: str) -> Embedder | None:
        if key in self._started:
            return self._started[key]
        for path in self._find_models():
            if model_key(path) == key:
                embedder = self._started[key] = Embedder(path, self._log_path).start()
                return embedder
        return None

    def close(self) -> None:
        for embedder in self._started.values():
            embedder.close()
        self._started.clear()
