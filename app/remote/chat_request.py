"""The body of a streamed /chat/completions request, in OpenAI's shape, tools and images included.

A conversation that used tools goes back as OpenAI has it: an assistant turn's calls in `tool_calls`
(its content null when it wrote nothing besides), each tool's answer a `tool` turn naming the call it
answers. The reply's tools travel only when the shape has some: a plain chat's body is what it was
before tools existed, so servers that know nothing of them see nothing new.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from app.remote.media_parts import content_parts
from engine.protocol import ChatMessage, ReplyShape, SamplingParams


class BadTools(ValueError):
    """The shape's tools are not a JSON list (the caller's mistake, said in one line)."""


def chat_body(model: str, messages: Sequence[ChatMessage], sampling: SamplingParams, effort: str | None,
              shape: ReplyShape | None = None) -> dict[str, Any]:
    """The request: only the fields a user set beyond the usual ones, and the tools when there are some."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [message_json(m) for m in messages],
        "max_tokens": sampling.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if sampling.stop:
        body["stop"] = list(sampling.stop)
    if effort is not None:
        body["reasoning_effort"] = effort
    if shape is not None and shape.tools is not None:
        body.update(tool_fields(shape))
    return body


def message_json(message: ChatMessage) -> dict[str, Any]:
    """One turn as OpenAI's API takes it."""
    item: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.media and message.role == "user":
        item["content"] = content_parts(message.content, message.media)
    if message.tool_calls:
        item["content"] = message.content or None
        item["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in message.tool_calls
        ]
    if message.role == "tool":
        item["tool_call_id"] = message.tool_call_id
        if message.name:
            item["name"] = message.name
    return item


def tool_fields(shape: ReplyShape) -> dict[str, Any]:
    """`tools`, `tool_choice` (a function's name becomes OpenAI's object naming it), `parallel_tool_calls`;
    none for an empty list (OpenAI refuses `tools: []`)."""
    try:
        tools = json.loads(shape.tools or "[]")
    except ValueError:
        raise BadTools(f"The reply's tools are not JSON: {(shape.tools or '')[:80]!r}") from None
    if not isinstance(tools, list):
        raise BadTools("The reply's tools are not a list of functions.")
    if not tools:
        return {}
    choice: str | dict[str, Any] = shape.tool_choice
    if choice not in ("auto", "none", "required"):
        choice = {"type": "function", "function": {"name": choice}}
    return {"tools": tools, "tool_choice": choice, "parallel_tool_calls": shape.parallel_calls}


def wants_calls(body: dict[str, Any]) -> bool:
    """Whether a request's reply may call tools: tools were sent and not turned off. Calls in any other
    reply are not taken (a server that calls tools it was never given)."""
    return bool(body.get("tools")) and body.get("tool_choice") != "none"
