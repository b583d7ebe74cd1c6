"""A Responses API request body, checked into the engine's ChatMessage / SamplingParams / ReplyShape.

Every bad field is a 400 naming it, in the Responses API's terms (`tools[0].parameters`,
`text.format.schema`). The reply's shape (tools, tool_choice, parallel_tool_calls, the JSON schema,
the reasoning effort) is the chat API's: the fields are checked here for their Responses form, then
handed to shape_params.py in chat's form, so both APIs follow one set of rules (which templates take
tools, which schemas a grammar can follow); a refusal from there is renamed into this API's fields.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.server.errors import ApiError, bad_param
from app.server.image_parts import ImageFetch
from app.server.responses.fields import check_fields
from app.server.responses.input_items import input_messages, with_tool_names
from app.server.responses.tool_list import ToolList, tool_list
from app.server.shape_params import parse_shape
from app.services.chat_defaults import DEFAULT_TEMPERATURE, DEFAULT_TOP_P
from engine.protocol import ChatMessage, ModelInfo, ReplyShape, SamplingParams

# Responses API effort -> the chat API's reasoning_effort (which has no xhigh or max: the most it has).
_EFFORT = {"none": "none", "minimal": "minimal", "low": "low", "medium": "medium", "high": "high",
           "xhigh": "high", "max": "high"}
_SUMMARY = (None, "auto", "concise", "detailed")
# A previous response's conversation: its turns, or ApiError 404 naming the field.
History = Callable[[str], tuple[ChatMessage, ...]]


@dataclass(slots=True, frozen=True)
class ResponsesRequest:
    """One checked request.

    Attributes:
        model: The model it names.
        messages: What the model is given: the instructions (a system turn), then `conversation`.
        conversation: The previous response's turns, then this input's (what a follow-up continues).
        sampling: Temperature, top_p and the output cap.
        shape: Tools, tool choice, the answer's JSON schema, the reasoning effort.
        stream: Whether the reply is sent as events.
        store: Whether the finished response is kept.
        echo: The request's fields the Response object repeats (instructions, tools, text, ...).
        encrypted_reasoning: Reasoning items carry `encrypted_content` (include: reasoning.encrypted_content).
        tools: The tools the model is offered, and how a call's name maps back to a namespace.
    """

    model: str
    messages: tuple[ChatMessage, ...]
    conversation: tuple[ChatMessage, ...]
    sampling: SamplingParams
    shape: ReplyShape
    stream: bool
    store: bool
    echo: dict[str, Any] = field(default_factory=dict)
    encrypted_reasoning: bool = False  # include: reasoning.encrypted_content (Codex CLI asks with store: false)
    tools: ToolList = field(default_factory=ToolList)


# What clients that keep no state on the server (Codex CLI, with store: false) ask for, to send the model's
# reasoning back with the next turn. This server sends no reasoning back to the model (input_items.py), so the
# content is the reasoning's own text in base64: opaque to the client, as the API has it, and not encrypted.
ENCRYPTED_REASONING = "reasoning.encrypted_content"


def parse_request(body: Any, model: ModelInfo, history: History, fetch: ImageFetch | None = None) -> ResponsesRequest:
    """The request checked against the loaded `model`; `history` finds a previous response's turns, `fetch`
    fetches image URLs (None: they are refused)."""
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    check_fields(body)
    name = body.get("model")
    if not isinstance(name, str) or not name:
        raise bad_param("model", "'model' must be the name of a served model (see GET /v1/models).")
    if "input" not in body or body["input"] is None:
        raise bad_param("input", "'input' is required: a string or an array of input items.")
    new_turns = input_messages(body["input"], fetch)
    instructions = _optional(body, "instructions", str)
    n_ctx = model.n_ctx
    sampling = _sampling(body, n_ctx)
    include = _optional(body, "include", list) or []
    for i, wanted in enumerate(include):
        if wanted != ENCRYPTED_REASONING:
            raise bad_param(f"include[{i}]", f"'include' cannot give {wanted!r} here: this server adds only "
                                             f"'{ENCRYPTED_REASONING}' (no log probabilities, image URLs or tool results).")
    stream = _optional(body, "stream", bool) or False
    store = _optional(body, "store", bool)
    tools = tool_list(body.get("tools"))
    shape, echo = _shape(body, model, tools)
    if not model.vision and any(m.media for m in new_turns):
        raise ApiError(400, f"The model '{model.name}' cannot see images: it was loaded without a projector "
                            "(start `tailor serve` with a vision model and its --mmproj).", param="input",
                       code="model_not_multimodal")
    previous = _optional(body, "previous_response_id", str)
    # Last: a 404 for the previous response says every field passed.
    conversation = with_tool_names((*(history(previous) if previous is not None else ()), *new_turns))
    if len(conversation) > n_ctx:
        raise ApiError(400, f"The conversation has {len(conversation)} turns; a context of {n_ctx} tokens cannot "
                            "hold them.", param="input", code="context_length_exceeded")
    system = (ChatMessage("system", instructions),) if instructions else ()
    echo.update(instructions=instructions, previous_response_id=previous, temperature=sampling.temperature,
                top_p=sampling.top_p, max_output_tokens=body.get("max_output_tokens"), store=store is not False,
                metadata=body.get("metadata") if isinstance(body.get("metadata"), dict) else {},
                user=body.get("user") if isinstance(body.get("user"), str) else None)
    return ResponsesRequest(name, (*system, *conversation), conversation, sampling, shape, stream, store is not False,
                            echo, ENCRYPTED_REASONING in include, tools)


def _sampling(body: dict, n_ctx: int) -> SamplingParams:
    max_tokens = body.get("max_output_tokens")
    if max_tokens is None:
        max_tokens = n_ctx  # until the context is full or the model stops
    elif not _is_int(max_tokens) or not 1 <= max_tokens <= n_ctx:
        raise bad_param("max_output_tokens", f"'max_output_tokens' must be an integer from 1 to {n_ctx} "
                                             "(the model's context).")
    temperature = _number(body, "temperature", DEFAULT_TEMPERATURE, 0.0, 2.0)
    top_p = _number(body, "top_p", DEFAULT_TOP_P, 0.0, 1.0)
    if top_p == 0.0:
        raise bad_param("top_p", "'top_p' must be above 0 and at most 1.")
    return SamplingParams(temperature=temperature, top_p=top_p, max_tokens=max_tokens)


def _shape(body: dict, model: ModelInfo, offered: ToolList) -> tuple[ReplyShape, dict[str, Any]]:
    """The reply's shape, and the fields as the Response object repeats them."""
    tools = offered.functions
    choice = _tool_choice(body.get("tool_choice"))
    parallel = _optional(body, "parallel_tool_calls", bool)
    text_format = _text(body.get("text"))
    effort, summary = _reasoning(body.get("reasoning"))
    chat_body: dict[str, Any] = {
        "tools": [{"type": "function", "function": {k: v for k, v in t.items() if k != "type"}} for t in tools] or None,
        "tool_choice": {"type": "function", "function": {"name": choice["name"]}} if isinstance(choice, dict)
        else choice,
        "parallel_tool_calls": parallel,
        "response_format": _response_format(text_format),
        "reasoning_effort": _EFFORT[effort] if effort is not None else None,
    }
    try:
        shape = parse_shape(chat_body, model)
    except ApiError as error:
        raise _renamed(error, offered.params) from None
    echo_tools = [{"type": "function", "name": t["name"], "description": t.get("description"),
                   "parameters": t.get("parameters"), "strict": t.get("strict") is not False} for t in tools]
    echo = {"tools": echo_tools, "tool_choice": choice if choice is not None else "auto",
            "parallel_tool_calls": parallel is not False, "text": {"format": text_format or {"type": "text"}},
            "reasoning": {"effort": effort, "summary": summary}}
    return shape, echo


def _tool_choice(value: Any) -> str | dict | None:
    if value is None or value in ("none", "auto", "required"):
        return value
    if isinstance(value, dict) and value.get("type") == "function":
        if not isinstance(value.get("name"), str):
            raise bad_param("tool_choice.name", "'tool_choice.name' must name one of the functions in 'tools'.")
        return {"type": "function", "name": value["name"]}
    raise bad_param("tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", "
                                   "\"name\": ...} (this server has no built-in or MCP tools, nor allowed_tools).")


def _text(value: Any) -> dict | None:
    """`text.format`, checked for its shape (json_schema's schema is checked by shape_params)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad_param("text", "'text' must be an object: {\"format\": {...}}.")
    for key in value:
        if key not in ("format", "verbosity"):
            raise bad_param(f"text.{key}", f"'text.{key}' is not a field this server knows.")
    if value.get("verbosity") not in (None, "medium"):
        raise bad_param("text.verbosity", "This server cannot make the model more or less verbose: "
                                          "'text.verbosity' must be medium.")
    fmt = value.get("format")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind in ("text", "json_object"):
        return {"type": kind}
    if kind != "json_schema":
        raise bad_param("text.format", "'text.format' must be of type text, json_object or json_schema.")
    for key, kind_of, what in (("name", str, "a string"), ("description", str, "a string"), ("strict", bool,
                                                                                            "a boolean")):
        if fmt.get(key) is not None and not isinstance(fmt[key], kind_of):
            raise bad_param(f"text.format.{key}", f"'text.format.{key}' must be {what}.")
    if not isinstance(fmt.get("schema"), dict):
        raise bad_param("text.format.schema", "'text.format.schema' must be a JSON schema object.")
    return {k: fmt[k] for k in ("type", "name", "description", "schema", "strict") if fmt.get(k) is not None}


def _response_format(fmt: dict | None) -> dict | None:
    """`text.format` as chat's `response_format`."""
    if fmt is None or fmt["type"] != "json_schema":
        return fmt
    return {"type": "json_schema", "json_schema": {k: v for k, v in fmt.items() if k != "type"}}


def _reasoning(value: Any) -> tuple[str | None, str | None]:
    """`reasoning.effort` and `reasoning.summary` (the latter changes nothing: the whole reasoning comes as the
    reasoning item's content, never summarized)."""
    if value is None:
        return None, None
    if not isinstance(value, dict):
        raise bad_param("reasoning", "'reasoning' must be an object: {\"effort\": ...}.")
    effort = value.get("effort")
    if effort is not None and effort not in _EFFORT:
        raise bad_param("reasoning.effort", "'reasoning.effort' must be none, minimal, low, medium, high, xhigh "
                                            "or max.")
    for key in ("summary", "generate_summary"):
        if value.get(key) not in _SUMMARY:
            raise bad_param(f"reasoning.{key}", f"'reasoning.{key}' must be auto, concise or detailed.")
    if value.get("context") not in (None, "auto", "current_turn"):
        raise bad_param("reasoning.context", "Earlier turns' reasoning is never sent back to the model here: "
                                             "'reasoning.context' must be auto or current_turn.")
    if value.get("mode") not in (None, "standard"):
        raise bad_param("reasoning.mode", "'reasoning.mode' must be standard.")
    for key in value:
        if key not in ("effort", "summary", "generate_summary", "context", "mode"):
            raise bad_param(f"reasoning.{key}", f"'reasoning.{key}' is not a field this server knows.")
    return effort, value.get("summary") or value.get("generate_summary")


_CHAT_TOOL = re.compile(r"tools\[(\d+)\]\.function")


def _renamed(error: ApiError, params: tuple[str, ...] = ()) -> ApiError:
    """A refusal of the chat API's shape rules, in the Responses API's field names (`params`: where each of
    the chat API's tools was in the request)."""
    def rename(text: str) -> str:
        text = _CHAT_TOOL.sub(lambda m: params[int(m[1])] if int(m[1]) < len(params) else f"tools[{m[1]}]", text)
        text = text.replace("response_format.json_schema", "text.format").replace("response_format", "text.format")
        return text.replace("reasoning_effort", "reasoning.effort")

    param = rename(error.param) if error.param is not None else None
    return ApiError(error.status, rename(error.message), error.type, param, error.code)


def _number(body: dict, name: str, default: float, low: float, high: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise bad_param(name, f"'{name}' must be a number from {low:g} to {high:g}.")
    return float(value)


def _optional(body: dict, name: str, kind: type) -> Any:
    value = body.get(name)
    if value is not None and not isinstance(value, kind):
        raise bad_param(name, f"'{name}' must be a {'string' if kind is str else kind.__name__}.")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
