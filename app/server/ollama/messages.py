"""Ollama's chat messages as the engine's ChatMessages, and the model's tool calls in Ollama's shape.

Ollama's tool calls carry their arguments as a JSON object (OpenAI's as text) and often no id; a tool
answer names its function (`tool_name`) rather than the call. Calls without an id get one here, and an
answer without `tool_call_id` answers the first call of that function (else the first call) not yet
answered, so templates that write ids see consistent ones.
"""

from __future__ import annotations

import json
from typing import Any

from app.server.errors import bad_param
from app.server.ollama.images import images_field
from engine.protocol import ChatMessage, ToolCall

_ROLES = ("system", "user", "assistant", "tool")


def chat_messages(value: Any) -> tuple[ChatMessage, ...]:
    """The request's `messages` (a non-empty array: an empty one only loads the model, and is not parsed)."""
    if not isinstance(value, list):
        raise bad_param("messages", "'messages' must be an array of messages.")
    messages: list[ChatMessage] = []
    unanswered: list[ToolCall] = []
    for index, item in enumerate(value):
        message = _message(item, index, unanswered)
        if message.role == "assistant":
            unanswered = list(message.tool_calls)
        messages.append(message)
    return tuple(messages)


def _message(item: Any, index: int, unanswered: list[ToolCall]) -> ChatMessage:
    param = f"messages[{index}]"
    if not isinstance(item, dict):
        raise bad_param(param, f"'{param}' must be an object with 'role' and 'content'.")
    role = item.get("role")
    role = role.lower() if isinstance(role, str) else role  # Ollama lower-cases it
    if role not in _ROLES:
        raise bad_param(f"{param}.role", f"'{param}.role' must be system, user, assistant or tool.")
    content = item.get("content")
    content = "" if content is None else content
    if not isinstance(content, str):
        raise bad_param(f"{param}.content", f"'{param}.content' must be a string.")
    for name in ("thinking", "tool_name", "tool_call_id"):
        if item.get(name) is not None and not isinstance(item[name], str):
            raise bad_param(f"{param}.{name}", f"'{param}.{name}' must be a string.")
    media = images_field(item.get("images"), f"{param}.images")
    if media and role != "user":
        raise bad_param(f"{param}.images", "Images go in user messages.")
    if role == "tool":
        name, call_id = item.get("tool_name") or item.get("name"), item.get("tool_call_id")
        answered = next((c for c in unanswered if c.id == call_id), None) if call_id else \
            next((c for c in unanswered if c.name == name), unanswered[0] if unanswered else None)
        if answered is not None:
            unanswered.remove(answered)
        name = name if isinstance(name, str) and name else (answered.name if answered else None)
        return ChatMessage("tool", content, tool_call_id=call_id or (answered.id if answered else None), name=name)
    calls = _tool_calls(item.get("tool_calls"), param, index) if role == "assistant" else ()
    if role != "assistant" and item.get("tool_calls"):
        raise bad_param(f"{param}.tool_calls", "Only assistant messages carry tool calls.")
    # An earlier turn's `thinking` is not sent back: the templates drop it, as Ollama's do.
    return ChatMessage(role, content, calls, media=media)


def _tool_calls(value: Any, param: str, index: int) -> tuple[ToolCall, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise bad_param(f"{param}.tool_calls", f"'{param}.tool_calls' must be an array.")
    calls = []
    for i, call in enumerate(value):
        where = f"{param}.tool_calls[{i}]"
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise bad_param(where, f"'{where}' must be {{\"function\": {{\"name\": ..., \"arguments\": {{...}}}}}}.")
        arguments = function.get("arguments")
        arguments = {} if arguments is None else arguments
        if isinstance(arguments, str):  # OpenAI's form: JSON text of an object
            try:
                arguments = json.loads(arguments)
            except ValueError:
                pass
        if not isinstance(arguments, dict):
            raise bad_param(f"{where}.function.arguments", f"'{where}.function.arguments' must be an object.")
        call_id = call.get("id")
        if call_id is not None and not isinstance(call_id, str):
            raise bad_param(f"{where}.id", f"'{where}.id' must be a string.")
        calls.append(ToolCall(call_id or f"call_{index}_{i}", name, json.dumps(arguments, ensure_ascii=False)))
    return tuple(calls)


def ollama_tool_call(call: ToolCall, index: int) -> dict[str, Any]:
    """A call the model made, as Ollama sends it: arguments as an object."""
    try:
        arguments = json.loads(call.arguments) if call.arguments else {}
    except ValueError:  # the engine sends only calls whose arguments parse; kept as text otherwise
        arguments = call.arguments
    return {"id": call.id, "function": {"index": index, "name": call.name, "arguments": arguments}}
