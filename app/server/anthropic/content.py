"""Anthropic's `system` and `messages` as the engine's ChatMessages.

A message's content is a string or a list of blocks. A user turn takes text, image (base64, or a URL where
the server fetches image URLs) and tool_result blocks; an assistant turn text, tool_use, and the thinking and
redacted_thinking blocks of earlier replies (taken, not sent again: the engine's templates drop past
reasoning). Each tool_result becomes a turn of its own (the engine's role "tool"), before the rest of its user
turn; consecutive turns of one role are merged into one, as Anthropic does. Any other block type, a block in
the wrong role or a field of a block this server does not know is a 400 naming it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from app.server.errors import ApiError, bad_param
from app.server.image_parts import ImageFetch
from app.services.media.errors import MediaRefused
from app.services.media.intake import image_from_bytes
from app.services.media.limits import MAX_FILE_BYTES, check_image_count
from engine.protocol import ChatMessage, Media, ModelInfo, ToolCall
from models.download.request import DownloadError

IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
# The base64 of the largest image file taken (4 characters per 3 bytes), with room for line breaks.
_MAX_BASE64_CHARS = (MAX_FILE_BYTES + 2) // 3 * 4 + 1024
# What each block may hold; `cache_control` changes nothing here (the prefix cache is always on).
_FIELDS = {
    "text": {"type", "text", "cache_control", "citations"},
    "image": {"type", "source", "cache_control"},
    "tool_use": {"type", "id", "name", "input", "cache_control"},
    "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control"},
    "thinking": {"type", "thinking", "signature"},
    "redacted_thinking": {"type", "data"},
}
_ROLE_BLOCKS = {"user": ("text", "image", "tool_result"), "assistant": ("text", "tool_use", "thinking",
                "redacted_thinking"), "system": ("text",)}
# A tool's error, as the model reads it: the engine's tool turn has no flag for it.
ERROR_PREFIX = "Error: "


def chat_messages(body: dict, model: ModelInfo, fetch: ImageFetch | None = None) -> tuple[ChatMessage, ...]:
    """The request's `system` and `messages` as the conversation the engine renders."""
    turns: list[ChatMessage] = []
    system = body.get("system")
    if system is not None:
        text = _text_of(system, "system")
        if text:
            turns.append(ChatMessage("system", text))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_param("messages", "'messages' must be a non-empty array of messages.")
    if len(messages) > model.n_ctx:
        # Every template spends at least a token per message: this cannot fit, and rendering it could outlast
        # the template's time limit first.
        raise ApiError(400, f"The conversation has {len(messages)} messages; a context of {model.n_ctx} tokens "
                            "cannot hold them.", param="messages", code="context_length_exceeded")
    for i, message in enumerate(messages):
        turns.extend(_message(message, f"messages[{i}]", fetch))
    if turns[-1].role == "assistant":
        raise bad_param(f"messages[{len(messages) - 1}]", f"messages[{len(messages) - 1}]: this server does not "
                        "continue a partial assistant turn (prefill): end the messages with a user turn.")
    if not model.vision and any(m.media for m in turns):
        raise ApiError(400, f"The model '{model.name}' cannot see images: it was loaded without a projector "
                            "(start `tailor serve` with a vision model and its --mmproj).", param="messages",
                       code="model_not_multimodal")
    return _merged(_named_results(turns))


def has_images(body: Any) -> bool:
    """Whether a request carries an image block (decoding it then runs off the event loop)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    return isinstance(messages, list) and any(
        isinstance(m, dict) and isinstance(m.get("content"), list)
        and any(isinstance(b, dict) and b.get("type") == "image" for b in m["content"]) for m in messages)


def _message(item: Any, param: str, fetch: ImageFetch | None) -> list[ChatMessage]:
    if not isinstance(item, dict):
        raise bad_param(param, f"'{param}' must be an object with 'role' and 'content'.")
    for key in item:
        if key not in ("role", "content"):
            raise bad_param(f"{param}.{key}", f"{param}.{key}: not a field of a message here.")
    role = item.get("role")
    if role not in _ROLE_BLOCKS:
        raise bad_param(f"{param}.role", f"'{param}.role' must be user or assistant.")
    content = item.get("content")
    if isinstance(content, str):
        return [ChatMessage(role, content)]
    if not isinstance(content, list):
        raise bad_param(f"{param}.content", f"'{param}.content' must be a string or an array of content blocks.")
    if role == "system":
        return [ChatMessage("system", _text_of(content, f"{param}.content", "a system turn"))]
    texts: list[str] = []
    images: list[Media] = []
    calls: list[ToolCall] = []
    results: list[ChatMessage] = []
    for j, block in enumerate(content):
        where = f"{param}.content[{j}]"
        kind = _block_type(block, where, role)
        if kind == "text":
            texts.append(block["text"])
        elif kind == "image":
            images.append(_image(block, where, fetch))
        elif kind == "tool_use":
            calls.append(_tool_use(block, where))
        elif kind == "tool_result":
            results.append(_tool_result(block, where))
        # thinking and redacted_thinking: the model's own past reasoning, not rendered again
    if role == "assistant":
        return [ChatMessage("assistant", "".join(texts), tuple(calls))]
    try:
        check_image_count(images)
    except MediaRefused as exc:
        raise bad_param(f"{param}.content", f"{exc}.") from None
    rest = [ChatMessage("user", "\n\n".join(texts), media=tuple(images))] if texts or images else []
    return results + rest


def _block_type(block: Any, where: str, role: str) -> str:
    """A block's type, checked with its fields for the role it is in."""
    kind = block.get("type") if isinstance(block, dict) else None
    if not isinstance(kind, str):
        raise bad_param(where, f"'{where}' must be a content block with a 'type'.")
    if kind not in _FIELDS:
        raise bad_param(f"{where}.type", f"{where}.type: '{kind}' is not supported here.")
    if kind not in _ROLE_BLOCKS[role]:
        raise bad_param(f"{where}.type", f"{where}.type: a '{kind}' block does not go in a {role} turn.")
    for key, value in block.items():
        if key not in _FIELDS[kind]:
            raise bad_param(f"{where}.{key}", f"{where}.{key}: not a field of a '{kind}' block here.")
        if key == "citations" and value:
            raise bad_param(f"{where}.citations", f"{where}.citations: citations are not supported here.")
    if kind == "text" and not isinstance(block.get("text"), str):
        raise bad_param(f"{where}.text", f"'{where}.text' must be a string.")
    return kind


def _text_of(value: Any, param: str, holder: str = "a system prompt") -> str:
    """A string, or the text of a list of text blocks (a system prompt, a tool's result), joined."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise bad_param(param, f"'{param}' must be a string or an array of text blocks.")
    texts = []
    for j, block in enumerate(value):
        where = f"{param}[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if isinstance(kind, str) and kind != "text":
            raise bad_param(f"{where}.type", f"{where}.type: '{kind}' is not supported here ({holder} takes "
                                             "text blocks).")
        _block_type(block, where, "system")
        texts.append(block["text"])
    return "\n\n".join(texts)


def _tool_use(block: dict, where: str) -> ToolCall:
    call_id, name, arguments = block.get("id"), block.get("name"), block.get("input")
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise bad_param(where, f"'{where}' must have an 'id' and a 'name'.")
    if not isinstance(arguments, dict):
        raise bad_param(f"{where}.input", f"'{where}.input' must be an object.")
    return ToolCall(call_id, name, json.dumps(arguments, ensure_ascii=False))


def _tool_result(block: dict, where: str) -> ChatMessage:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise bad_param(f"{where}.tool_use_id", f"'{where}.tool_use_id' must name the tool_use this answers.")
    content = block.get("content")
    text = "" if content is None else _text_of(content, f"{where}.content", "a tool_result")
    is_error = block.get("is_error")
    if is_error is not None and not isinstance(is_error, bool):
        raise bad_param(f"{where}.is_error", f"'{where}.is_error' must be a boolean.")
    return ChatMessage("tool", ERROR_PREFIX + text if is_error else text, tool_call_id=call_id)


def _image(block: dict, where: str, fetch: ImageFetch | None) -> Media:
    source = block.get("source")
    kind = source.get("type") if isinstance(source, dict) else None
    if kind == "base64":
        return _decoded(_base64(source, where), where)
    if kind == "url":
        url = source.get("url")
        if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
            raise bad_param(f"{where}.source.url", f"'{where}.source.url' must be an http(s) URL.")
        if fetch is None:
            raise bad_param(f"{where}.source", f"{where}.source: this server fetches no image URLs: send the "
                                               "image as a base64 source, or start it with --allow-image-urls.")
        try:
            return _decoded(fetch(url), where)
        except DownloadError as exc:
            raise bad_param(f"{where}.source", f"The image could not be fetched: {exc.message}.") from None
    if isinstance(kind, str):
        raise bad_param(f"{where}.source.type", f"{where}.source.type: '{kind}' is not supported here "
                                                "(base64, or url where the server fetches image URLs).")
    raise bad_param(f"{where}.source", f"'{where}.source' must be an object with a 'type'.")


def _base64(source: dict, where: str) -> bytes:
    for key in source:
        if key not in ("type", "media_type", "data"):
            raise bad_param(f"{where}.source.{key}", f"{where}.source.{key}: not a field of a base64 source here.")
    if source.get("media_type") not in IMAGE_TYPES:
        raise bad_param(f"{where}.source.media_type", f"'{where}.source.media_type' must be one of "
                                                      f"{', '.join(IMAGE_TYPES)}.")
    data = source.get("data")
    if not isinstance(data, str):
        raise bad_param(f"{where}.source.data", f"'{where}.source.data' must be the image's base64.")
    if len(data) > _MAX_BASE64_CHARS:
        raise bad_param(f"{where}.source.data", f"The image is over {MAX_FILE_BYTES // 1_000_000} MB.")
    try:
        return base64.b64decode("".join(data.split()), validate=True)
    except (binascii.Error, ValueError):
        raise bad_param(f"{where}.source.data", "The image's base64 is malformed.") from None


def _decoded(data: bytes, where: str) -> Media:
    """The image through the same intake as the window's and the OpenAI API's (app/services/media)."""
    try:
        return image_from_bytes(data, name=f"The image of {where}").as_media()
    except MediaRefused as exc:
        raise bad_param(f"{where}.source", f"{exc}.") from None


def _named_results(turns: list[ChatMessage]) -> list[ChatMessage]:
    """Tool turns with the name of the tool they answer (some templates write it), from the call's turn."""
    names = {call.id: call.name for m in turns for call in m.tool_calls}
    return [replace(m, name=names.get(m.tool_call_id or "")) if m.role == "tool" else m for m in turns]


def _merged(turns: list[ChatMessage]) -> tuple[ChatMessage, ...]:
    """Consecutive user turns, or assistant turns, as one (Anthropic combines them so)."""
    out: list[ChatMessage] = []
    join: dict[str, Callable[[ChatMessage, ChatMessage], ChatMessage]] = {
        "user": lambda a, b: replace(a, content="\n\n".join(t for t in (a.content, b.content) if t),
                                     media=a.media + b.media),
        "assistant": lambda a, b: replace(a, content=a.content + b.content, tool_calls=a.tool_calls + b.tool_calls),
    }
    for turn in turns:
        if out and out[-1].role == turn.role and turn.role in join:
            out[-1] = join[turn.role](out[-1], turn)
        else:
            out.append(turn)
    return tuple(out)
