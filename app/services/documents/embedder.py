"""Embeddings for documents: an embedding model of the library, loaded in an engine process of its own.

The vectors come from llama.cpp's embedding path in the engine (EmbedRequest; the server's /v1/embeddings
uses the same), batched, each scaled to unit length. The engine is a process of its own beside the chat's,
with the embedding model alone (a few tens of MB), so the chat model stays loaded and replies go on.

`embedding_models` lists the library's GGUF files whose header says embedding model (a BERT-family encoder,
or a file with a pooling type); `model_key` is what the index records of the model its vectors come from
(the file's name and size: the same file under another folder is the same model, a new quantization not).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from app.services.library_models import models_on_disk
from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from engine.client import EngineClient
from engine.interface import EngineNotRunning
from engine.protocol import Embeddings, Error, Event, Loaded
from models.formats.embedding_models import is_embedding_model
from models.formats.gguf_header import read_gguf_header
from models.library import ModelStore

LOAD_TIMEOUT_S = 120.0
EMBED_TIMEOUT_S = 300.0
# Inputs per EmbedRequest: the engine batches them into its context a ubatch at a time.
BATCH = 32


class EmbedderError(RuntimeError):
    """The embedding model could not be loaded, or could not embed: one line saying why."""


def embedding_models(store: ModelStore) -> list[Path]:
    """The library's GGUF files that are embedding models (headers read per file: run it off the GUI thread)."""
    found = []
    for model in models_on_disk(store):
        path = Path(model.path)
        if path.suffix.lower() != ".gguf":
            continue
        try:
            if is_embedding_model(read_gguf_header(path).metadata):
                found.append(path)
        except Exception:  # a damaged or unreadable file is not an embedding model; the library shows it
            continue
    return found


def model_key(path: Path) -> str:
    """What the index records of the model its vectors come from."""
    return f"{path.name}:{path.stat().st_size}"


class Embedder:
    """An embedding model loaded in an engine process; `embed` from one thread at a time; `close` ends it.

    Raises (from start and embed): EmbedderError, one line.
    """

    def __init__(self, path: Path, log_path: Path | None = None):
        self.path = Path(path)
        self.key = model_key(self.path)
        self._client = EngineClient(log_path=log_path)
        self._lock = threading.Lock()
        self.dim = 0

    def start(self) -> Embedder:
        request = LoadPlanner().plan_load(str(self.path), LoadSettings()).request
        self._client.start()
        self._client.load(request)
        while True:
            event = self._client.next_event(LOAD_TIMEOUT_S)
            if event is None:
                self.close()
                raise EmbedderError(f"{self.path.name} did not load within {LOAD_TIMEOUT_S:.0f} s")
            if isinstance(event, Loaded):
                return self
            if isinstance(event, Error):
                self.close()
                raise EmbedderError(f"{self.path.name} could not be loaded: {event.message}")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit vector per text, as rows (texts too long for the model are cut to what it embeds)."""
        rows = []
        with self._lock:
            for start in range(0, len(texts), BATCH):
                rows.extend(self._batch(texts[start:start + BATCH]))
        matrix = np.vstack(rows) if rows else np.empty((0, self.dim), dtype=np.float32)
        self.dim = matrix.shape[1] if matrix.size else self.dim
        return matrix

    def _batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        answer: list[Event] = []
        done = threading.Event()

        def on_event(event: Event) -> None:
            answer.append(event)
            done.set()

        try:
            self._client.embed(list(texts), normalize=True, truncate=True, on_event=on_event)
        except EngineNotRunning as exc:
            raise EmbedderError(f"the embedding engine is not running ({exc})") from None
        if not done.wait(EMBED_TIMEOUT_S):
            raise EmbedderError(f"{self.path.name} did not embed {len(texts)} passages within {EMBED_TIMEOUT_S:.0f} s")
        event = answer[0]
        if isinstance(event, Error):
            raise EmbedderError(f"{self.path.name} could not embed: {event.message}")
        assert isinstance(event, Embeddings)
        return [np.frombuffer(v, dtype="<f4").astype(np.float32) for v in event.vectors]

    def close(self) -> None:
        self._client.shutdown()

    def __enter__(self) -> Embedder:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
