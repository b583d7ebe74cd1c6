"""Embedding through the model router: what every API of the server that embeds calls.

    result = await embed_with(router, name, inputs)        # ApiError: 404, 400, 503...
    result.model, result.embeddings.vectors, result.embeddings.tokens

OpenAI's /v1/embeddings (route.py) and Ollama's /api/embed (its `input`, a string or a list of them, parsed by
params.parse_inputs(body.get("input")); `truncate`, true by default there; `keep_alive`) share it. The model is
leased for the request and released when it ends, however it ends.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from app.server.errors import ApiError, from_engine
from app.server.model_router import ModelRouter
from engine.protocol import Embeddings, Error


@dataclass(slots=True, frozen=True)
class EmbedResult:
    """The vectors of one request, and what answered it.

    Attributes:
        model: The id of the model that embedded (the lease's).
        embeddings: The engine's answer: a vector per input, in order, and each input's tokens.
        total_s: Seconds from the request to its answer, a wait for the model's load included.
        load_s: Of those, seconds spent waiting for the model (to load, or for a turn).
    """

    model: str
    embeddings: Embeddings
    total_s: float
    load_s: float


async def embed_with(router: ModelRouter, name: str | None, inputs: Sequence[str | Sequence[int]], *,
                     normalize: bool = True, truncate: bool = False,
                     keep_alive: float | None = None) -> EmbedResult:
    """One vector per input from the model `name` names (None: the one loaded).

    Raises:
        ApiError: the router's (404 no such model, 503 cannot load it...), or the engine's refusal as a status
            (400 an input too long, naming it; 400 a model that cannot embed; 503 busy or gone).
    """
    t0 = time.perf_counter()
    lease = await router.acquire(name, keep_alive)
    try:
        t_leased = time.perf_counter()
        answer = await lease.port.embed(inputs, normalize, truncate)
        if isinstance(answer, Error):
            raise _refusal(answer)
        return EmbedResult(lease.id, answer, time.perf_counter() - t0, t_leased - t0)
    finally:
        lease.release()


def _refusal(error: Error) -> ApiError:
    api = from_engine(error)
    if error.kind in ("context_overflow", "bad_request"):
        api.param = "input"
    return api
