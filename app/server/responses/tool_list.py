"""A Responses request's `tools` as the model gets them: functions, the functions of namespaces, and the
hosted tools this server cannot run left out.

- A function tool is given as it is.
- A namespace tool (`{"type": "namespace", "name": "crm", "tools": [functions]}`: Codex CLI sends its sub-agent
  tools so) becomes its functions, each under a qualified name, `crm__lookup`, since a chat template knows
  only flat function names; the namespace's description goes before each function's. A call the model makes
  to a qualified name goes back as a function_call item with `name` and `namespace` apart, and a function_call
  item given back with a `namespace` is qualified again, so the model sees the name it called.
- A hosted tool (web search, file search, code interpreter, MCP...) runs on OpenAI's servers; this one runs
  none. It is left out of what the model is offered, and the response says so (`TOOLS_LEFT_OUT`) rather than
  refusing the request: a client such as Codex CLI offers web search with every request, and the model can
  answer without it, as a model not offered it would. A request that insists on one (tool_choice) is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from app.server.errors import bad_param

SEPARATOR = "__"
# The header of a response whose request offered hosted tools, naming their types.
TOOLS_LEFT_OUT = "x-tailor-tools-left-out"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NAMESPACE_FIELDS = frozenset({"type", "name", "description", "tools"})


@dataclass(slots=True, frozen=True)
class ToolList:
    """What the model is offered, and how its calls' names map back.

    Attributes:
        functions: the function tools, in the Responses API's shape, namespaced ones under qualified names.
        namespaced: qualified name → (namespace, function name).
        left_out: the types of the hosted tools that were offered and left out.
        params: where each of `functions` is in the request ("tools[4].tools[1]"), for errors.
    """

    functions: list[dict[str, Any]] = field(default_factory=list)
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)
    left_out: tuple[str, ...] = ()
    params: tuple[str, ...] = ()

    def split(self, name: str) -> tuple[str, str | None]:
        """A called name as the client knows it: (function name, its namespace or None)."""
        inner = self.namespaced.get(name)
        return (inner[1], inner[0]) if inner is not None else (name, None)


def qualified(namespace: str, name: str) -> str:
    return f"{namespace}{SEPARATOR}{name}"


def tool_list(value: Any) -> ToolList:
    """`tools` checked (400 naming the item that is wrong) and flattened."""
    if value is None:
        return ToolList()
    if not isinstance(value, list):
        raise bad_param("tools", "'tools' must be an array of tools.")
    functions: list[dict[str, Any]] = []
    namespaced: dict[str, tuple[str, str]] = {}
    left_out: list[str] = []
    params: list[str] = []
    for i, tool in enumerate(value):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind == "function":
            functions.append(_function(tool, f"tools[{i}]"))
            params.append(f"tools[{i}]")
        elif kind == "namespace":
            for j, (name, function) in enumerate(_namespace(tool, f"tools[{i}]")):
                namespaced[function["name"]] = (tool["name"], name)
                functions.append(function)
                params.append(f"tools[{i}].tools[{j}]")
        elif isinstance(kind, str):
            left_out.append(kind)
        else:
            raise bad_param(f"tools[{i}]", "A tool needs a 'type': give functions: {\"type\": \"function\", "
                                           "\"name\": ..., \"parameters\": {...}}.")
    return ToolList(functions, namespaced, tuple(dict.fromkeys(left_out)), tuple(params))


def _function(tool: dict, param: str) -> dict[str, Any]:
    for key in ("defer_loading", "allowed_callers", "output_schema"):
        if tool.get(key) not in (None, False):
            raise bad_param(f"{param}.{key}", f"A function's '{key}' is not supported by this server.")
    return tool


def _namespace(tool: dict, param: str) -> list[tuple[str, dict[str, Any]]]:
    """The namespace's functions: (their own name, the function under its qualified name)."""
    for key in tool:
        if key not in _NAMESPACE_FIELDS:
            raise bad_param(f"{param}.{key}", f"'{param}.{key}' is not a field of a namespace tool.")
    namespace, description, inner = tool.get("name"), tool.get("description"), tool.get("tools")
    if not isinstance(namespace, str) or not _NAME.fullmatch(namespace):
        raise bad_param(f"{param}.name", "A namespace's name must be 1 to 64 letters, digits, _ or -.")
    if description is not None and not isinstance(description, str):
        raise bad_param(f"{param}.description", f"'{param}.description' must be a string.")
    if not isinstance(inner, list) or not inner:
        raise bad_param(f"{param}.tools", f"'{param}.tools' must be a non-empty array of function tools.")
    out = []
    for j, function in enumerate(inner):
        where = f"{param}.tools[{j}]"
        if not isinstance(function, dict) or function.get("type") != "function":
            raise bad_param(where, f"'{where}' must be a function tool: a namespace holds functions here.")
        name = function.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise bad_param(f"{where}.name", "A function's name must be 1 to 64 letters, digits, _ or -.")
        full = qualified(namespace, name)
        if len(full) > 64:
            raise bad_param(f"{where}.name", f"'{namespace}' and '{name}' make a name of {len(full)} characters "
                                             "for the model; together they may have 64 at most.")
        said = " ".join(t for t in (description and f"({namespace}: {description})", function.get("description"))
                        if t)
        out.append((name, {**_function(function, where), "name": full, "description": said or None}))
    return out
