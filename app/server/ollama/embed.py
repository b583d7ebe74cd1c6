"""Ollama's /api/embed (and its older /api/embeddings): vectors through the same path as /v1/embeddings
(app/server/embeddings/service.py), in Ollama's shapes: `input` a string or a list of them, `truncate` true
unless asked otherwise (an input past the model's context is cut, as Ollama does), `keep_alive`; durations in
nanoseconds. /api/embeddings takes one `prompt` and answers one `embedding`, not normalized (as Ollama's was)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.server.embeddings.params import parse_inputs
from app.server.embeddings.service import embed_with
from app.server.errors import ApiError, bad_param
from app.server.keep_alive import parse_keep_alive
from app.server.model_router import ModelRouter
from app.server.ollama.errors import ollama_error
from app.server.ollama.names import requested_name
from app.server.request_json import load_request_json

_NS = 1_000_000_000


class OllamaEmbed:
    def __init__(self, router: ModelRouter):
        self.router = router

    async def embed(self, request: Request) -> Response:
        try:
            body = _object(load_request_json(await request.body()))
            name = requested_name(body)
            inputs = parse_inputs(body.get("input"))
            truncate = _flag(body, "truncate", True)
            if body.get("dimensions") is not None:
                raise bad_param("dimensions", "'dimensions' is not supported: this server gives each model's "
                                              "full vectors.")
            result = await embed_with(self.router, name, inputs, normalize=True, truncate=truncate,
                                      keep_alive=parse_keep_alive(body.get("keep_alive")))
        except ApiError as error:
            return ollama_error(error)
        answer = result.embeddings
        return JSONResponse({
            "model": name, "embeddings": [answer.floats(i) for i in range(len(answer.vectors))],
            "total_duration": int(result.total_s * _NS), "load_duration": int(result.load_s * _NS),
            "prompt_eval_count": sum(answer.tokens),
        })

    async def embeddings(self, request: Request) -> Response:
        try:
            body = _object(load_request_json(await request.body()))
            name = requested_name(body)
            prompt = body.get("prompt")
            if not isinstance(prompt, str):
                raise bad_param("prompt", "'prompt' must be the text to embed.")
            result = await embed_with(self.router, name, (prompt,), normalize=False, truncate=True,
                                      keep_alive=parse_keep_alive(body.get("keep_alive")))
        except ApiError as error:
            return ollama_error(error)
        return JSONResponse({"embedding": result.embeddings.floats(0)})


def _object(body: Any) -> dict:
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    return body


def _flag(body: dict, field: str, default: bool) -> bool:
    value = body.get(field)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad_param(field, f"'{field}' must be true or false.")
    return value
