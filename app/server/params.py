"""Request bodies of /v1/chat/completions and /v1/completions, checked into plain dataclasses.

Every bad field becomes an ApiError (400) naming the field: the engine only ever sees
values it can honour. What each field of OpenAI's API does here is field_policy.py's table (a
field this server cannot honour is refused, never dropped); the fields that shape a chat's reply
(tools, response_format, reasoning_effort) are shape_params.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from app.server.audio_parts import audio_part, check_clips
from app.server.errors import ApiError, bad_param
from app.server.field_policy import check_fields
from app.server.file_parts import Attached, file_part, with_documents
from app.server.image_parts import ImageFetch, image_part, images_of
from app.server.shape_params import message_tool_calls, parse_shape, tool_message_id
from app.services.chat_defaults import DEFAULT_TEMPERATURE, DEFAULT_TOP_P
from engine.protocol import ChatMessage, Media, ModelInfo, ReplyShape, SamplingParams

MAX_STOP_STRINGS = 4
MAX_STOP_LENGTH = 256
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


@dataclass(slots=True, frozen=True)
class CompletionParams:
    """One checked request: either chat `messages` or a raw `prompt`."""

    model: str
    messages: tuple[ChatMessage, ...]
    prompt: str | None
    sampling: SamplingParams
    stream: bool
    include_usage: bool
    echo: bool = False
    shape: ReplyShape = ReplyShape()


def parse_chat(body: Any, model: ModelInfo, fetch_image: ImageFetch | None = None) -> CompletionParams:
    """A chat request checked; `fetch_image` fetches image URLs (None: they are refused)."""
    body = _object(body)
    check_fields(body, chat=True)
    n_ctx = model.n_ctx
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_param("messages", "'messages' must be a non-empty array of messages.")
    if len(messages) > n_ctx:
        # Every template spends at least a token per message: this cannot fit, and rendering a
        # conversation this long could outlast the template's time limit (a 500) first.
        raise ApiError(
            400, f"The conversation has {len(messages)} messages; a context of {n_ctx} tokens cannot hold them.",
            param="messages", code="context_length_exceeded",
        )
    attached: list[Attached] = []
    parsed = _named_tool_turns([_message(m, i, model, fetch_image, attached) for i, m in enumerate(messages)])
    if not model.vision and any(media.kind == "image" for m in parsed for media in m.media):
        raise ApiError(400, f"The model '{model.name}' cannot see images: it was loaded without a projector "
                            "(start `tailor serve` with a vision model and its --mmproj).", param="messages",
                       code="model_not_multimodal")
    shape = parse_shape(body, model)
    params = _common(body, n_ctx, messages=parsed, prompt=None, shape=shape)
    if not attached:
        return params
    asked = body.get("max_completion_tokens") or body.get("max_tokens")
    return replace(params, messages=with_documents(params.messages, attached, n_ctx,
                                                   params.sampling.max_tokens if asked else None))


def parse_completion(body: Any, model: ModelInfo) -> CompletionParams:
    body = _object(body)
    check_fields(body, chat=False)
    n_ctx = model.n_ctx
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, list):
        raise bad_param("prompt", "Only one text prompt per request is supported (no batches or token ids).")
    if not isinstance(prompt, str) or not prompt:
        raise bad_param("prompt", "'prompt' must be a non-empty string.")
    for name in ("suffix", "logprobs"):
        if body.get(name) is not None:
            raise bad_param(name, f"'{name}' is not supported by this server.")
    if not _is_one(body.get("best_of")):
        raise bad_param("best_of", "'best_of' must be 1.")
    echo = _optional(body, "echo", bool, False)
    return _common(body, n_ctx, messages=(), prompt=prompt, echo=echo)


def _common(body: dict, n_ctx: int, *, messages: tuple[ChatMessage, ...], prompt: str | None,
            echo: bool = False, shape: ReplyShape | None = None) -> CompletionParams:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad_param("model", "'model' must be the name of a served model (see GET /v1/models).")
    if not _is_one(body.get("n")):
        raise bad_param("n", "'n' must be 1: this server writes one choice per request.")
    for name in ("logprobs", "top_logprobs"):
        if body.get(name) not in (None, False, 0):
            raise bad_param(name, "Log probabilities are not supported by this server.")
    # max_completion_tokens replaces max_tokens; a null one is absent (the other still counts).
    param = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = body.get(param)
    if max_tokens is None:
        max_tokens = n_ctx  # until the context is full or the model stops
    elif not _is_int(max_tokens) or not 1 <= max_tokens <= n_ctx:
        raise bad_param(param, f"'{param}' must be an integer from 1 to {n_ctx} (the model's context).")
    temperature = _number(body, "temperature", DEFAULT_TEMPERATURE, 0.0, 2.0)
    top_p = _number(body, "top_p", DEFAULT_TOP_P, 0.0, 1.0)
    if top_p == 0.0:
        raise bad_param("top_p", "'top_p' must be above 0 and at most 1.")
    seed = body.get("seed")
    if seed is not None and not _is_int(seed):
        raise bad_param("seed", "'seed' must be an integer.")
    stream = _optional(body, "stream", bool, False)
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise bad_param("stream_options", "'stream_options' must be an object.")
    include_usage = _optional(options or {}, "include_usage", bool, False, "stream_options.include_usage")
    sampling = SamplingParams(
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        seed=None if seed is None else seed % (1 << 32),  # llama.cpp takes a 32-bit seed
        stop=_stop(body.get("stop")),
    )
    return CompletionParams(model, messages, prompt, sampling, stream, stream and include_usage, echo,
                            shape or ReplyShape())


def _object(body: Any) -> dict:
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    return body


def _message(item: Any, index: int, model: ModelInfo, fetch_image: ImageFetch | None = None,
             attached: list[Attached] | None = None) -> ChatMessage:
    """One message checked; the documents of its `file` parts are added to `attached` (with its index)."""
    param = f"messages[{index}]"
    if not isinstance(item, dict):
        raise bad_param(param, f"'{param}' must be an object with 'role' and 'content'.")
    role = item.get("role")
    role = _ROLES.get(role) if isinstance(role, str) else None
    if role is None:
        raise bad_param(f"{param}.role", f"'{param}.role' must be system, developer, user, assistant or tool.")
    content = item.get("content")
    if content is None and role == "assistant":
        content = ""
    media: tuple[Media, ...] = ()
    if isinstance(content, list):
        texts, images, clips, documents = [], [], [], []
        check_clips(content, f"{param}.content")
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif kind in ("image_url", "input_audio", "file") and role != "user":
                what = {"image_url": "Images go", "input_audio": "Audio goes", "file": "Files go"}[kind]
                raise bad_param(f"{param}.content[{j}]", f"{what} in user messages.")
            elif kind == "image_url":
                images.append(image_part(part, f"{param}.content[{j}]", fetch_image))
            elif kind == "input_audio":
                clips.append(audio_part(part, f"{param}.content[{j}]", model))
            elif kind == "file":
                documents.append(file_part(part, f"{param}.content[{j}]"))
            else:
                raise bad_param(f"{param}.content[{j}]", "Content parts must be text, image_url, input_audio or "
                                                         "file parts.")
        content = "".join(texts)
        media = images_of(images, f"{param}.content") + tuple(clips)  # the images, then the clips
        if documents and attached is not None:
            attached.append(Attached(index, tuple(documents)))
    if not isinstance(content, str):
        raise bad_param(f"{param}.content", f"'{param}.content' must be a string or an array of content parts.")
    name = item.get("name")
    if name is not None and not isinstance(name, str):
        raise bad_param(f"{param}.name", f"'{param}.name' must be a string.")
    if role == "tool":
        return ChatMessage("tool", content, tool_call_id=tool_message_id(item, param), name=name)
    calls = message_tool_calls(item, param) if role == "assistant" else ()
    return ChatMessage(role, content, calls, media=media)  # type: ignore[arg-type]


def _named_tool_turns(messages: list[ChatMessage]) -> tuple[ChatMessage, ...]:
    """Tool answers with the name of the function they answer (OpenAI's need only the call's id; some
    templates write the name), taken from the assistant turn that made the call."""
    names = {call.id: call.name for m in messages for call in m.tool_calls}
    return tuple(replace(m, name=names.get(m.tool_call_id or "")) if m.role == "tool" and m.name is None else m
                 for m in messages)


def _stop(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if (
        not isinstance(stops, list)
        or len(stops) > MAX_STOP_STRINGS
        or not all(isinstance(s, str) and 0 < len(s) <= MAX_STOP_LENGTH for s in stops)
    ):
        raise bad_param(
            "stop", f"'stop' must be a string or up to {MAX_STOP_STRINGS} non-empty strings "
            f"of at most {MAX_STOP_LENGTH} characters."
        )
    return tuple(stops)


def _number(body: dict, name: str, default: float, low: float, high: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise bad_param(name, f"'{name}' must be a number from {low:g} to {high:g}.")
    return float(value)


def _optional(body: dict, name: str, kind: type, default: Any, param: str | None = None) -> Any:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise bad_param(param or name, f"'{param or name}' must be a {kind.__name__}.")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_one(value: Any) -> bool:
    """Absent, or the integer 1 (n, best_of): one choice per request."""
    return value is None or (_is_int(value) and value == 1)
