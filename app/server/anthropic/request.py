"""A Messages API request (POST /v1/messages, and /v1/messages/count_tokens) checked into the engine's
ChatMessage / SamplingParams / ReplyShape.

Every top-level field is honoured, accepted because it changes nothing here (identifiers, cache hints: the
prefix cache is always on), or refused with a 400 naming it. Tools go through the OpenAI API's checks
(shape_params.py) in OpenAI's shape, so a schema the grammar cannot follow is refused the same way, named
by Anthropic's field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from app.server.anthropic.content import chat_messages
from app.server.errors import ApiError, bad_param
from app.server.image_parts import ImageFetch
from app.server.shape_params import parse_shape
from app.services.chat_defaults import DEFAULT_TEMPERATURE, DEFAULT_TOP_P
from engine.protocol import ChatMessage, ModelInfo, ReplyShape, SamplingParams

MAX_STOP_SEQUENCES = 16
MAX_STOP_LENGTH = 256
_COUNT_HONOURED = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking", "output_config"})
_CREATE_HONOURED = _COUNT_HONOURED | {"max_tokens", "stop_sequences", "stream", "temperature", "top_p", "top_k"}
# Identifiers and hints that change nothing in a reply here: accepted whatever their value.
# context_management asks the server to clear old tool results or thinking once a conversation grows past a
# threshold; here nothing is cleared, and a conversation that outgrows the context is a 400 that says so
# (Claude Code sends it with every request).
NO_EFFECT = frozenset({"metadata", "cache_control", "service_tier", "inference_geo", "workspace_id",
                       "user_profile_id", "context_management"})
_TOOL_FIELDS = frozenset({"type", "name", "description", "input_schema", "cache_control"})
_CHOICES = {"auto": "auto", "any": "required", "none": "none"}
# output_config.effort: how thorough Claude should be. A local model has no such dial beyond its thinking,
# which `thinking` sets: accepted (Claude Code sends it with every request) and changes nothing here.
EFFORTS = ("low", "medium", "high", "xhigh", "max")


@dataclass(slots=True, frozen=True)
class MessagesRequest:
    """One checked request.

    Attributes:
        max_tokens: as asked; `sampling.max_tokens` is it capped at the model's context (a reply that fills
            the context first ends with stop_reason model_context_window_exceeded).
        show_thinking: False where `thinking.display` is "omitted": thinking blocks come back empty.
    """

    model: str
    messages: tuple[ChatMessage, ...]
    sampling: SamplingParams
    shape: ReplyShape
    stream: bool = False
    max_tokens: int = 0
    show_thinking: bool = True


def parse_request(body: Any, model: ModelInfo, fetch: ImageFetch | None = None, count: bool = False) -> MessagesRequest:
    """A request checked for `model`; `count`: a count_tokens request (no sampling fields). `fetch` fetches image
    URLs (None: they are refused)."""
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    honoured = _COUNT_HONOURED if count else _CREATE_HONOURED
    for name, value in body.items():
        if name not in honoured and name not in NO_EFFECT and value is not None:
            raise bad_param(name, f"{name}: not supported here.")
    name = body.get("model")
    if not isinstance(name, str) or not name:
        raise bad_param("model", "'model' must be the name of a served model (see GET /v1/models).")
    max_tokens = 0 if count else _max_tokens(body.get("max_tokens"))
    reasoning, budget, shown = _thinking(body.get("thinking"), max_tokens)
    shape = replace(_tools_shape(body, model, _output_format(body.get("output_config"))),
                    reasoning=reasoning, think_budget=budget)  # type: ignore[arg-type]
    messages = chat_messages(body, model, fetch)
    if count:
        return MessagesRequest(name, messages, SamplingParams(), shape)
    sampling = SamplingParams(
        temperature=_number(body, "temperature", DEFAULT_TEMPERATURE, 0.0, 1.0),
        top_p=_top_p(body.get("top_p")),
        top_k=_top_k(body.get("top_k")),
        max_tokens=min(max_tokens, model.n_ctx),
        stop=_stop_sequences(body.get("stop_sequences")),
    )
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise bad_param("stream", "'stream' must be a boolean.")
    return MessagesRequest(name, messages, sampling, shape, bool(stream), max_tokens, shown)


def _max_tokens(value: Any) -> int:
    if value is None:
        raise bad_param("max_tokens", "max_tokens: required (the most tokens the reply may have).")
    if not _is_int(value) or value < 1:
        raise bad_param("max_tokens", "'max_tokens' must be an integer of at least 1.")
    return value


def _thinking(value: Any, max_tokens: int) -> tuple[str, int | None, bool]:
    """The reply's reasoning switch, its budget, and whether its text is shown. No `thinking`: none, as with
    Anthropic's models that do not think unless asked."""
    if value is None:
        return "off", None, True
    kind = value.get("type") if isinstance(value, dict) else None
    if kind not in ("enabled", "disabled", "adaptive"):
        raise bad_param("thinking", "'thinking' must be {\"type\": \"enabled\", \"budget_tokens\": N}, "
                                    "{\"type\": \"disabled\"} or {\"type\": \"adaptive\"}.")
    allowed = {"type", "budget_tokens", "display"} if kind == "enabled" else {"type", "display"}
    for key in value:
        if key not in allowed:
            raise bad_param(f"thinking.{key}", f"thinking.{key}: not supported here with type '{kind}'.")
    display = value.get("display")
    if display not in (None, "summarized", "omitted"):
        raise bad_param("thinking.display", "'thinking.display' must be summarized or omitted.")
    shown = display != "omitted"
    if kind == "disabled":
        return "off", None, shown
    if kind == "adaptive":  # the model decides: as its template thinks by default
        return "auto", None, shown
    budget = value.get("budget_tokens")
    if not _is_int(budget) or budget < 1 or (max_tokens and budget >= max_tokens):
        raise bad_param("thinking.budget_tokens", "'thinking.budget_tokens' must be an integer from 1 to less "
                                                  "than max_tokens.")
    return "on", budget, shown


def _output_format(value: Any) -> dict | None:
    """output_config's JSON schema as OpenAI's response_format (None: free text). Its `effort` and `task_budget`
    (advisory on Anthropic's side too) are checked and change nothing here."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad_param("output_config", "'output_config' must be an object.")
    for key in value:
        if key not in ("effort", "format", "task_budget"):
            raise bad_param(f"output_config.{key}", f"output_config.{key}: not supported here.")
    if value.get("effort") not in (None, *EFFORTS):
        raise bad_param("output_config.effort", f"'output_config.effort' must be one of {', '.join(EFFORTS)}.")
    form = value.get("format")
    if form is None:
        return None
    if (not isinstance(form, dict) or form.get("type") != "json_schema" or set(form) - {"type", "schema"}
            or not isinstance(form.get("schema"), dict)):
        raise bad_param("output_config.format", "'output_config.format' must be {\"type\": \"json_schema\", "
                                                "\"schema\": {...}}.")
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": form["schema"]}}


def _tools_shape(body: dict, model: ModelInfo, response_format: dict | None = None) -> ReplyShape:
    """`tools`, `tool_choice` and the output's schema in OpenAI's shape, through the OpenAI API's checks."""
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise bad_param("tools", "'tools' must be an array of tools.")
    functions = [_function(tool, f"tools[{i}]") for i, tool in enumerate(tools or [])]
    choice, parallel = _tool_choice(body.get("tool_choice"), bool(functions))
    openai_body = {"tools": functions or None, "tool_choice": choice, "parallel_tool_calls": parallel,
                   "response_format": response_format}
    try:
        return parse_shape(openai_body, model)
    except ApiError as error:
        raise _renamed(error) from None


def _function(tool: Any, param: str) -> dict:
    if not isinstance(tool, dict):
        raise bad_param(param, f"'{param}' must be a tool: an object with 'name' and 'input_schema'.")
    kind = tool.get("type")
    if kind not in (None, "custom"):
        raise bad_param(f"{param}.type", f"{param}.type: '{kind}' is not supported here (Anthropic's server "
                                         "tools run on Anthropic's servers; give a custom tool instead).")
    for key, value in tool.items():
        if key not in _TOOL_FIELDS and not (key in ("strict", "defer_loading") and value in (None, False)):
            raise bad_param(f"{param}.{key}", f"{param}.{key}: not supported here.")
    schema = tool.get("input_schema")
    if not isinstance(schema, dict):
        raise bad_param(f"{param}.input_schema", f"'{param}.input_schema' must be a JSON schema object.")
    function = {"name": tool.get("name"), "parameters": schema}
    if tool.get("description") is not None:
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _tool_choice(value: Any, has_tools: bool) -> tuple[Any, bool | None]:
    """OpenAI's tool_choice and parallel_tool_calls for Anthropic's tool_choice."""
    if value is None:
        return None, None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind not in ("auto", "any", "tool", "none"):
        raise bad_param("tool_choice", "'tool_choice' must be {\"type\": auto, any, tool or none}.")
    allowed = {"type"} | ({"disable_parallel_tool_use"} if kind != "none" else set()) | (
        {"name"} if kind == "tool" else set())
    for key in value:
        if key not in allowed:
            raise bad_param(f"tool_choice.{key}", f"tool_choice.{key}: not supported here with type '{kind}'.")
    if kind in ("any", "tool") and not has_tools:
        raise bad_param("tool_choice", f"tool_choice '{kind}' needs 'tools'.")
    disable = value.get("disable_parallel_tool_use")
    if disable is not None and not isinstance(disable, bool):
        raise bad_param("tool_choice.disable_parallel_tool_use", "'tool_choice.disable_parallel_tool_use' must be "
                                                                 "a boolean.")
    parallel = None if disable is None else not disable
    if kind == "tool":
        name = value.get("name")
        if not isinstance(name, str) or not name:
            raise bad_param("tool_choice.name", "'tool_choice.name' must name one of the tools.")
        return {"type": "function", "function": {"name": name}}, parallel
    return _CHOICES[kind], parallel


# OpenAI's names of a tool's fields, as Anthropic's requests call them.
_OPENAI_NAMES = ((re.compile(r"response_format\.json_schema\.schema"), "output_config.format.schema"),
                 (re.compile(r"response_format"), "output_config.format"),
                 (re.compile(r"(tools\[\d+\])\.function\.parameters"), r"\1.input_schema"),
                 (re.compile(r"(tools\[\d+\])\.function\.(name|description)"), r"\1.\2"),
                 (re.compile(r"tool_choice 'required'"), "tool_choice 'any'"))


def _renamed(error: ApiError) -> ApiError:
    """An error of the OpenAI API's checks, naming Anthropic's fields."""
    def rename(text: str) -> str:
        for pattern, name in _OPENAI_NAMES:
            text = pattern.sub(name, text)
        return text
    param = rename(error.param) if error.param else None
    return ApiError(error.status, rename(error.message), error.type, param, error.code)


def _stop_sequences(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if (not isinstance(value, list) or len(value) > MAX_STOP_SEQUENCES
            or not all(isinstance(s, str) and 0 < len(s) <= MAX_STOP_LENGTH for s in value)):
        raise bad_param("stop_sequences", f"'stop_sequences' must be up to {MAX_STOP_SEQUENCES} non-empty strings "
                                          f"of at most {MAX_STOP_LENGTH} characters.")
    return tuple(value)


def _number(body: dict, name: str, default: float, low: float, high: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise bad_param(name, f"'{name}' must be a number from {low:g} to {high:g}.")
    return float(value)


def _top_p(value: Any) -> float:
    if value is None:
        return DEFAULT_TOP_P
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise bad_param("top_p", "'top_p' must be a number above 0 and at most 1.")
    return float(value)


def _top_k(value: Any) -> int:
    if value is None:
        return SamplingParams().top_k
    if not _is_int(value) or value < 0:
        raise bad_param("top_k", "'top_k' must be an integer of at least 0 (0: no top-k cut).")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
