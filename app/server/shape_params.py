"""The fields of a chat request that shape its reply: tools and tool_choice, response_format,
reasoning_effort; and the tool parts of its messages (assistant tool_calls, role "tool").

Each is checked here into the engine's ReplyShape, or refused with a 400 naming the field: a schema
the grammar cannot follow is refused before the request queues, with the keyword and its place.
"""

from __future__ import annotations

import json
import re
from typing import Any

from app.server.errors import ApiError, bad_param
from engine.protocol import ModelInfo, ReplyShape, ToolCall
from engine.structured.json_schema_grammar import SchemaError, check_schema

NO_TOOL_SUPPORT = "This model's chat template has no tool support."
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_EFFORT = {"none": "off", "minimal": "off", "low": "low", "medium": "medium", "high": "high"}


def parse_shape(body: dict, model: ModelInfo) -> ReplyShape:
    """The reply's shape from the request's fields, for the loaded `model`."""
    tools = _tools(body.get("tools"))
    choice = _tool_choice(body.get("tool_choice"), tools)
    if tools and choice != "none" and model.tool_format is None:
        raise ApiError(400, NO_TOOL_SUPPORT, param="tools", code="tools_not_supported")
    if choice not in ("auto", "none"):
        for tool in tools if choice == "required" else [t for t in tools if t["function"]["name"] == choice]:
            _check(tool["function"].get("parameters") or {"type": "object"},
                   f"tools[{tools.index(tool)}].function.parameters")
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise bad_param("parallel_tool_calls", "'parallel_tool_calls' must be a boolean.")
    schema = _response_format(body.get("response_format"))
    if schema is not None and tools and choice != "none":
        raise bad_param("response_format", "'response_format' and 'tools' cannot be combined on this server: "
                                           "send one or the other (or tool_choice 'none').")
    return ReplyShape(reasoning=_reasoning(body.get("reasoning_effort")),  # type: ignore[arg-type]
                      json_schema=schema, tools=json.dumps(tools) if tools else None, tool_choice=choice,
                      parallel_calls=parallel is not False)


def message_tool_calls(item: dict, param: str) -> tuple[ToolCall, ...]:
    """An assistant message's `tool_calls`, as sent back in the conversation."""
    calls = item.get("tool_calls")
    if calls is None:
        return ()
    if not isinstance(calls, list):
        raise bad_param(f"{param}.tool_calls", f"'{param}.tool_calls' must be an array.")
    parsed = []
    for i, call in enumerate(calls):
        where = f"{param}.tool_calls[{i}]"
        function = call.get("function") if isinstance(call, dict) and call.get("type") in (None, "function") else None
        if (not isinstance(function, dict) or not isinstance(call.get("id"), str)
                or not isinstance(function.get("name"), str) or not isinstance(function.get("arguments"), str)):
            raise bad_param(where, f"'{where}' must have an 'id', type 'function' and a 'function' with 'name' and "
                                   "'arguments' strings.")
        parsed.append(ToolCall(call["id"], function["name"], function["arguments"]))
    return tuple(parsed)


def tool_message_id(item: dict, param: str) -> str:
    call_id = item.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise bad_param(f"{param}.tool_call_id", f"'{param}.tool_call_id' must name the call this answers.")
    return call_id


def _tools(value: Any) -> list[dict]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_param("tools", "'tools' must be an array of functions.")
    tools, names = [], set()
    for i, tool in enumerate(value):
        param = f"tools[{i}]"
        function = tool.get("function") if isinstance(tool, dict) and tool.get("type") == "function" else None
        if not isinstance(function, dict):
            raise bad_param(param, f"'{param}' must be {{\"type\": \"function\", \"function\": {{...}}}}.")
        name = function.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise bad_param(f"{param}.function.name", "A function's name must be 1 to 64 letters, digits, _ or -.")
        if name in names:
            raise bad_param(f"{param}.function.name", f"Two tools are named '{name}'.")
        names.add(name)
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise bad_param(f"{param}.function.description", "A function's description must be a string.")
        if function.get("strict") is not None and not isinstance(function.get("strict"), bool):
            raise bad_param(f"{param}.function.strict", "A function's 'strict' must be a boolean.")
        parameters = function.get("parameters")
        if parameters is not None:
            if not isinstance(parameters, dict):
                raise bad_param(f"{param}.function.parameters", "A function's parameters must be a JSON schema object.")
            _check_valid(parameters, f"{param}.function.parameters")
        kept = {"name": name, "description": description or "", "parameters": parameters or
                {"type": "object", "properties": {}}}
        tools.append({"type": "function", "function": kept})
    return tools


def _tool_choice(value: Any, tools: list[dict]) -> str:
    if value is None:
        return "auto" if tools else "none"
    if value in ("none", "auto", "required"):
        if value == "required" and not tools:
            raise bad_param("tool_choice", "tool_choice 'required' needs 'tools'.")
        return value
    function = value.get("function") if isinstance(value, dict) and value.get("type") == "function" else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise bad_param("tool_choice", "'tool_choice' must be none, auto, required or "
                                       "{\"type\": \"function\", \"function\": {\"name\": ...}}.")
    if name not in {t["function"]["name"] for t in tools}:
        raise bad_param("tool_choice", f"tool_choice names '{name}', which is not among the tools.")
    return name


def _response_format(value: Any) -> str | None:
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return json.dumps({"type": "object"})
    if kind == "json_schema":
        spec = value.get("json_schema")
        if not isinstance(spec, dict):
            raise bad_param("response_format.json_schema", "'response_format.json_schema' must be an object with "
                                                           "'name' and 'schema'.")
        for key, kind_of, what in (("name", str, "a string"), ("description", str, "a string"),
                                   ("strict", bool, "a boolean")):
            if spec.get(key) is not None and not isinstance(spec[key], kind_of):
                raise bad_param(f"response_format.json_schema.{key}",
                                f"'response_format.json_schema.{key}' must be {what}.")
        schema = spec.get("schema")
        if not isinstance(schema, dict):
            raise bad_param("response_format.json_schema.schema", "'response_format.json_schema.schema' must be "
                                                                  "a JSON schema object.")
        _check(schema, "response_format.json_schema.schema")
        return json.dumps(schema)
    raise bad_param("response_format", "'response_format' must be of type text, json_object or json_schema.")


def _reasoning(value: Any) -> str:
    if value is None:
        return "auto"
    if not isinstance(value, str) or value not in _EFFORT:
        raise bad_param("reasoning_effort", "'reasoning_effort' must be none, minimal, low, medium or high.")
    return _EFFORT[value]


def _check(schema: dict, param: str) -> None:
    """A schema the answer's grammar can follow, else a 400 naming the keyword."""
    try:
        check_schema(schema)
    except SchemaError as exc:
        raise ApiError(400, f"{param}: {exc}", param=param, code="unsupported_schema") from None


def _check_valid(schema: dict, param: str) -> None:
    """A valid JSON Schema (arguments are validated against it), whatever its keywords."""
    from jsonschema import SchemaError as InvalidSchema
    from jsonschema.validators import Draft202012Validator, validator_for

    if not isinstance(schema.get("$schema", ""), str):  # jsonschema would crash on it
        raise ApiError(400, f"{param}.$schema must be a string: the URI of a JSON Schema draft.", param=param,
                       code="invalid_schema")
    try:
        # An unknown $schema URI is checked as the latest draft (jsonschema warns it will refuse it some day).
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except InvalidSchema as exc:
        raise ApiError(400, f"{param} is not a valid JSON Schema: {exc.message}", param=param,
                       code="invalid_schema") from None
