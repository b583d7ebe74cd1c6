"""Which model answers a request: the contract every API of the server goes through.

A request names a model (`model` in OpenAI's, Anthropic's and Ollama's bodies). The router resolves the
name, makes sure the model is loaded (a server with a library loads it on demand: model_pool.py), and
lends it for the length of one reply: a `Lease` holds the model's EnginePort and ModelInfo, and while any
lease of a model is out, that model is not unloaded. Every API handler does

    lease = await router.acquire(name, keep_alive)   # ApiError: 404 unknown name, 503 cannot load...
    try:
        ... lease.port.generate(...) ...             # the engine path every API shares
    finally:
        lease.release()                              # idempotent; a stream releases when it ends

`keep_alive` is Ollama's, in seconds once parsed (keep_alive.py): None the server's default, 0 unload
after this reply, negative never. `SingleModel` is the router of a server with one engine and the model
it has (the window's server, `tailor serve --model`): a request naming another model is a 404.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from app.server.engine_port import EnginePort, model_id
from app.server.errors import ApiError
from engine.protocol import ChatMessage, Done, Error, Event, ModelInfo, ReplyShape, SamplingParams


@dataclass(slots=True, frozen=True)
class ServedModel:
    """A model the server can answer with (GET /v1/models, Ollama's /api/tags).

    Attributes:
        id: The name it is listed by and answers to (first of `names`).
        names: Every name a request may use for it: its id, then short aliases.
        path: Its file (a GGUF) or folder (a checkpoint).
        size_bytes: Its weights on disk.
        format: "gguf", "awq", "gptq", "fp8" or "safetensors".
        quant: Its quantization ("Q4_K_M"), where the name or header says.
        family: Its architecture ("llama", "qwen3"), where known.
        modified: When its file last changed (seconds since the epoch).
        loaded: It is loaded now.
        fit: How it fits this machine, in a few words ("fits fully on GPU", "too large"); None unplanned.
        context: The context it is (or would be) loaded with; 0 unknown.
    """

    id: str
    names: tuple[str, ...]
    path: str
    size_bytes: int
    format: str = "gguf"
    quant: str | None = None
    family: str | None = None
    modified: float = 0.0
    loaded: bool = False
    fit: str | None = None
    context: int = 0


@dataclass(slots=True, frozen=True)
class LoadedModel:
    """A model loaded now (Ollama's /api/ps, `tailor ps`).

    Attributes:
        model: What it is.
        info: What the engine said when it loaded.
        memory_bytes: What it takes, per device ("cpu", "cuda:0"): the plan's forecast.
        busy: Replies running or waiting on it now.
        idle_s: Seconds since its last reply ended; 0 while busy.
        expires_in_s: Seconds until it is unloaded when idle; None: never.
    """

    model: ServedModel
    info: ModelInfo
    memory_bytes: dict[str, int] = field(default_factory=dict)
    busy: int = 0
    idle_s: float = 0.0
    expires_in_s: float | None = None


@dataclass(slots=True, eq=False)
class Lease:
    """A model lent to one reply: its port, what it is, and the name it was asked by."""

    id: str
    info: ModelInfo
    port: EnginePort
    _on_release: Callable[[], None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def release(self) -> None:
        """The reply ended (or never started); a second call does nothing."""
        with self._lock:
            done, self._on_release = self._on_release, None
        if done is not None:
            done()

    async def generate(self, messages: Sequence[ChatMessage], sampling: SamplingParams, prompt: str | None = None,
                       shape: ReplyShape | None = None, api: str = "") -> AsyncIterator[Event]:
        """The port's `generate`, with the lease returned as the reply's last event (Done or Error) arrives:
        before the API turns it into its closing chunks, so a client that has read a reply to its end never
        finds the model still busy with it."""
        events = self.port.generate(messages, sampling, prompt, shape, api=api)
        try:
            async for event in events:
                if isinstance(event, Done | Error):
                    self.release()
                yield event
        finally:
            await events.aclose()


class ModelRouter(Protocol):
    def listing(self) -> list[ServedModel]:
        """Every model a request may name, loaded ones first."""

    def loaded(self) -> list[LoadedModel]:
        """The models loaded now."""

    def stand_in(self, name: str | None) -> ModelInfo | None:
        """The model a request naming `name` would reach, where that is known without loading anything (its
        fields are checked against it before the name is: a 400 names a field before a 404 names the model);
        None where it is not."""

    async def acquire(self, name: str | None, keep_alive: float | None = None) -> Lease:
        """The model `name` names (None or "": the one loaded, where there is one), loaded if need be.

        Raises:
            ApiError: 404 no such model; 400 its file is gone or cannot be loaded; 503 it does not fit
                beside the models in use, or the engine is gone.
        """

    def shutdown(self) -> None:
        """The server stopped: stop what the router started (its engines)."""


class SingleModel:
    """The router of a server with one engine and the model loaded in it (none while it loads)."""

    def __init__(self, port: EnginePort):
        self.port = port

    def _served(self, info: ModelInfo) -> ServedModel:
        return ServedModel(model_id(info), self.port.model_ids(), info.path, info.size_bytes,
                           "gguf" if info.path.lower().endswith(".gguf") else "safetensors",
                           family=info.architecture, loaded=True, context=info.n_ctx)

    def listing(self) -> list[ServedModel]:
        info = self.port.model
        return [self._served(info)] if info is not None else []

    def loaded(self) -> list[LoadedModel]:
        info = self.port.model
        if info is None:
            return []
        busy = len(self.port.active) + self.port.waiting
        return [LoadedModel(self._served(info), info, busy=busy)]

    def stand_in(self, name: str | None) -> ModelInfo | None:
        return self.port.model  # the one model, whatever the name: its fields are checked first, as ever

    def shutdown(self) -> None:
        pass  # the engine is its owner's (the window's, `tailor serve`'s)

    async def acquire(self, name: str | None, keep_alive: float | None = None) -> Lease:
        info = self.port.model
        if info is None:
            raise ApiError(503, "No model is loaded.", "server_error", None, "model_not_loaded")
        ids = self.port.model_ids()
        if name and name not in ids:
            raise ApiError(404, f"The model '{name}' does not exist here; this server has '{ids[0]}' "
                                "(GET /v1/models).", "invalid_request_error", "model", "model_not_found")
        return Lease(ids[0], info, self.port)
