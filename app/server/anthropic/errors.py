"""Errors in Anthropic's envelope: `{"type": "error", "error": {"type", "message"}}`, with Anthropic's status.

The server's ApiError (OpenAI's shape) is written here as Anthropic's clients read it: the error's type follows
from its status (400 invalid_request_error, 401 authentication_error, 403 permission_error, 404
not_found_error, 413 request_too_large, 429 rate_limit_error, 500 api_error); a busy server is 529
overloaded_error, as Anthropic's own (its SDKs retry it); any other 5xx keeps its status as an api_error.
"""

from __future__ import annotations

import json

from starlette.responses import Response

from app.server.errors import ApiError

# Anthropic's routes: the Guard answers their refusals (a key, a body size) in this envelope too.
PATH_PREFIX = "/v1/messages"
OVERLOADED = 529
_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error"}


def status_and_body(error: ApiError) -> tuple[int, dict]:
    """The HTTP status and the body of `error` in Anthropic's envelope (which has no `param`: the message
    names the field)."""
    if error.code == "server_busy":
        return OVERLOADED, _body("overloaded_error", error.message)
    kind = _TYPES.get(error.status) or ("api_error" if error.status >= 500 else "invalid_request_error")
    message = error.message
    if error.param and error.param not in message:
        message = f"{error.param}: {message}"
    return error.status, _body(kind, message)


def body_bytes(error: ApiError) -> tuple[int, bytes]:
    """The status and the encoded body (non-ASCII escaped: a message quoting the client's text always encodes)."""
    status, body = status_and_body(error)
    return status, json.dumps(body).encode("utf-8")


def error_response(error: ApiError) -> Response:
    status, body = body_bytes(error)
    return Response(body, status_code=status, media_type="application/json")


def _body(kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}
