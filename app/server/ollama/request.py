"""The bodies of POST /api/chat and /api/generate, checked into what the engine takes.

What every request says is read first (`Basics`: the model's name, keep_alive, stream, whether it only
loads the model); the rest is checked against the model it reaches (`parse_chat`, `parse_generate`).
Fields Ollama has and this server cannot honour are a 400 naming them when set (logprobs, a generate's
template, suffix or context); fields Ollama does not have are ignored, as Ollama ignores them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from app.server.errors import ApiError, bad_param
from app.server.keep_alive import parse_keep_alive
from app.server.ollama.images import images_field
from app.server.ollama.messages import chat_messages
from app.server.ollama.names import requested_name
from app.server.ollama.options import parse_options
from app.server.shape_params import parse_shape
from engine.protocol import ChatMessage, ModelInfo, ReplyShape, SamplingParams
from engine.structured.json_schema_grammar import SchemaError, check_schema

_THINK = {True: "on", False: "off", "low": "low", "medium": "medium", "high": "high", "max": "high"}


@dataclass(slots=True, frozen=True)
class Basics:
    """What a request says before its model is known.

    Attributes:
        name: The model, as the client named it (echoed in the reply).
        keep_alive: Seconds to keep the model loaded after the reply (keep_alive.py's meaning).
        stream: NDJSON lines (Ollama's default) rather than one object.
        load_only: No messages (chat) or no prompt (generate): load the model (keep_alive 0: unload it).
    """

    name: str
    keep_alive: float | None
    stream: bool
    load_only: bool


@dataclass(slots=True, frozen=True)
class OllamaParams:
    """One checked request: chat `messages`, or a raw `prompt` (generate's `raw`)."""

    messages: tuple[ChatMessage, ...]
    prompt: str | None
    sampling: SamplingParams
    shape: ReplyShape
    no_effect: tuple[str, ...] = ()


def basics(body: Any, chat: bool) -> Basics:
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    name = requested_name(body)
    keep_alive = parse_keep_alive(body.get("keep_alive"))
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise bad_param("stream", "'stream' must be a boolean.")
    if chat:
        messages = body.get("messages")
        load_only = messages is None or messages == []
    else:
        load_only = body.get("prompt") in (None, "") and not body.get("images")
    return Basics(name, keep_alive, stream is not False, load_only)


def parse_chat(body: dict, info: ModelInfo, name: str) -> OllamaParams:
    """A chat request for the model `info` describes (`name`: as the client named it)."""
    messages = chat_messages(body.get("messages"))
    _check_vision(messages, info, name)
    options = parse_options(body.get("options"), info.n_ctx)
    shape = _shape(body, info, name, chat=True)
    return OllamaParams(messages, None, options.sampling, shape, options.no_effect)


def parse_generate(body: dict, info: ModelInfo, name: str) -> OllamaParams:
    """A generate request: the prompt as a user turn under the model's chat template (and `system` before
    it), or with `raw` the prompt as it is."""
    prompt = body.get("prompt")
    prompt = "" if prompt is None else prompt
    if not isinstance(prompt, str):
        raise bad_param("prompt", "'prompt' must be a string.")
    for field, what in (("system", "a string"), ("template", "a string"), ("suffix", "a string")):
        if body.get(field) is not None and not isinstance(body[field], str):
            raise bad_param(field, f"'{field}' must be {what}.")
    raw = body.get("raw")
    if raw is not None and not isinstance(raw, bool):
        raise bad_param("raw", "'raw' must be a boolean.")
    if body.get("template"):
        raise bad_param("template", "A request's own 'template' is not supported: Tailor renders the model's chat "
                                    "template (send 'raw': true with the prompt already formatted instead).")
    if body.get("suffix"):
        raise bad_param("suffix", "'suffix' (fill in the middle) is not supported by this server.")
    if body.get("context"):
        raise bad_param("context", "'context' (token ids of an earlier reply) is not supported by this server: "
                                   "send the conversation to /api/chat instead.")
    if raw and body.get("system"):
        raise bad_param("system", "raw mode does not support template, system, or context")
    media = images_field(body.get("images"), "images")
    options = parse_options(body.get("options"), info.n_ctx)
    shape = _shape(body, info, name, chat=False)
    if raw:
        if media:
            raise bad_param("images", "Images need the chat template: send them without 'raw'.")
        return OllamaParams((), prompt, options.sampling, shape, options.no_effect)
    system = [ChatMessage("system", body["system"])] if body.get("system") else []
    messages = (*system, ChatMessage("user", prompt, media=media))
    _check_vision(messages, info, name)
    return OllamaParams(messages, None, options.sampling, shape, options.no_effect)


def _check_vision(messages: tuple[ChatMessage, ...], info: ModelInfo, name: str) -> None:
    if not info.vision and any(m.media for m in messages):
        raise ApiError(400, f"'{name}' cannot see images: it was loaded without a projector (start `tailor serve` "
                            "with a vision model and its --mmproj).", param="images", code="model_not_multimodal")


def _shape(body: dict, info: ModelInfo, name: str, chat: bool) -> ReplyShape:
    for field in ("logprobs", "top_logprobs"):
        if body.get(field) not in (None, False, 0):
            raise bad_param(field, "Log probabilities are not supported by this server.")
    reasoning = _think(body.get("think"), info, name)
    schema = _format(body.get("format"))
    tools = body.get("tools") if chat else None
    choice = _tool_choice(body) if chat else None
    if tools in (None, []):
        if choice not in (None, "auto", "none"):
            raise bad_param("tool_choice", f"tool_choice {json.dumps(choice)} needs 'tools'.")
        return ReplyShape(reasoning=reasoning, json_schema=schema)  # type: ignore[arg-type]
    if info.tool_format is None:
        raise ApiError(400, f'"{name}" does not support tools', param="tools", code="tools_not_supported")
    if schema is not None:
        raise bad_param("format", "'format' and 'tools' cannot be combined on this server: send one or the other.")
    if isinstance(tools, list):  # Ollama's tools may leave out "type": it is always "function"
        tools = [{"type": "function", **t} if isinstance(t, dict) and "type" not in t else t for t in tools]
    shape = parse_shape({"tools": tools, "tool_choice": choice}, info)
    return replace(shape, reasoning=reasoning)  # type: ignore[arg-type]


def _tool_choice(body: dict) -> Any:
    """Tailor's `tool_choice` (Ollama has none): OpenAI's values, at the top of the body or in `options` (where
    the official ollama client can send it); a function's name alone names that function."""
    options = body.get("options")
    choice = body.get("tool_choice")
    if choice is None and isinstance(options, dict):
        choice = options.get("tool_choice")
    if isinstance(choice, str) and choice not in ("auto", "none", "required"):
        return {"type": "function", "function": {"name": choice}}
    return choice


def _think(value: Any, info: ModelInfo, name: str) -> str:
    if value is None:
        return "auto"  # the template's own default: a thinking model thinks, as Ollama's do
    if not (isinstance(value, bool) or isinstance(value, str) and value in _THINK):
        raise bad_param("think", "'think' must be true, false, \"low\", \"medium\" or \"high\".")
    if value is not False and info.reasoning_format is None:
        raise ApiError(400, f'"{name}" does not support thinking', param="think", code="thinking_not_supported")
    return _THINK[value]


def _format(value: Any) -> str | None:
    if value in (None, ""):
        return None
    if value == "json":
        return json.dumps({"type": "object"})
    if not isinstance(value, dict):
        raise bad_param("format", "'format' must be \"json\" or a JSON schema object.")
    try:
        check_schema(value)
    except SchemaError as exc:
        raise ApiError(400, f"format: {exc}", param="format", code="unsupported_schema") from None
    return json.dumps(value)
