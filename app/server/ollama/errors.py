"""Errors in Ollama's shape: `{"error": "message"}` with the status Ollama uses (404: no such model)."""

from __future__ import annotations

import json

from starlette.responses import Response

from app.server.errors import ApiError


def error_body(message: str) -> bytes:
    # ASCII-escaped: a message quoting the client's text can never fail to encode.
    return json.dumps({"error": message}).encode("utf-8")


def ollama_error(error: ApiError) -> Response:
    """The response for an error, in Ollama's shape."""
    return Response(error_body(error.message), status_code=error.status, media_type="application/json")


def model_required() -> ApiError:
    return ApiError(400, "model is required", param="model")


def model_not_found(name: str, served: list[str]) -> ApiError:
    """Ollama's 404 for a model name, with what this server has instead."""
    have = ", ".join(served[:8]) + (", ..." if len(served) > 8 else "")
    where = f"this server has {have} (GET /api/tags)" if served else "this server has no model loaded"
    return ApiError(404, f"model '{name}' not found: {where}", param="model", code="model_not_found")
