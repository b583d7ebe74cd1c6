"""Errors in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}` with a 4xx/5xx status."""

from __future__ import annotations

import json
from dataclasses import dataclass

from engine.chat_template import REFUSED
from engine.protocol import Error

# Engine error kinds as HTTP statuses: the client's fault is a 4xx, the server's a 5xx.
_ENGINE_STATUS = {
    "context_overflow": (400, "invalid_request_error", "context_length_exceeded"),
    "bad_request": (400, "invalid_request_error", None),
    "no_model": (503, "server_error", "model_not_loaded"),
    "engine_died": (503, "server_error", "engine_unavailable"),
    "invalid_model": (503, "server_error", "model_not_loaded"),
    "template": (500, "server_error", "chat_template_failed"),
    "internal": (500, "server_error", None),
    "busy": (503, "server_error", "server_busy"),
}


@dataclass
class ApiError(Exception):
    """A request the server answers with an error body instead of a completion."""

    status: int
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def body_bytes(self) -> bytes:
        return json.dumps(self.body()).encode("utf-8")


def bad_param(param: str, message: str) -> ApiError:
    return ApiError(400, message, param=param, code="invalid_value")


def from_engine(error: Error) -> ApiError:
    """The HTTP error for an engine `Error` event."""
    if error.kind == "template" and error.message.startswith(REFUSED):
        # The model's template turned the conversation away (roles out of order, a system
        # message it does not take): the client can fix that.
        return ApiError(400, error.message, "invalid_request_error", "messages", "chat_template_refused")
    status, kind, code = _ENGINE_STATUS.get(error.kind, (500, "server_error", None))
    return ApiError(status, error.message, kind, None, code)
