"""A reply as Anthropic's message object: `{"id": "msg_…", "type": "message", "role": "assistant", "model",
"content": [thinking, text, tool_use…], "stop_reason", "stop_sequence", "usage"}`.

Usage counts as Anthropic's does: the prompt's tokens are `input_tokens` (those prefilled now) plus
`cache_read_input_tokens` (those the engine's prefix cache held already); `output_tokens` counts the
reasoning too, and `output_tokens_details.thinking_tokens` says how much of it that was. A thinking block's `signature` is a digest of its text: nothing checks it when it comes back
(thinking blocks sent back are not rendered again).
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from typing import Any

from app.server.anthropic.request import MessagesRequest
from engine.protocol import Done, ToolCall


def message_id() -> str:
    return "msg_" + uuid.uuid4().hex[:24]


def tool_use_id(call: ToolCall) -> str:
    """Anthropic's id of a call the engine made (its own id, with Anthropic's prefix)."""
    return "toolu_" + call.id.removeprefix("call_")


def signature(thinking: str) -> str:
    return base64.b64encode(hashlib.sha256(b"tailor-thinking\n" + thinking.encode("utf-8")).digest()).decode()


def tool_input(call: ToolCall) -> dict:
    """The call's arguments as an object (the engine checks they are one, of the tool's schema)."""
    arguments = json.loads(call.arguments) if call.arguments.strip() else {}
    return arguments if isinstance(arguments, dict) else {}


def stop_reason(done: Done, max_tokens: int) -> tuple[str, str | None]:
    """Anthropic's stop_reason and stop_sequence for how the reply ended."""
    if done.finish_reason == "tool_calls":
        return "tool_use", None
    if done.finish_reason == "length":
        # Short of max_tokens: the context filled first (max_tokens may be asked beyond it).
        return ("max_tokens" if done.stats.gen_tokens >= max_tokens else "model_context_window_exceeded"), None
    if done.finish_reason == "stop" and done.stop_string is not None:
        return "stop_sequence", done.stop_string
    return "end_turn", None


def usage(done: Done) -> dict[str, Any]:
    prompt, cached = done.stats.prompt_tokens or 0, done.stats.cached_tokens
    figures: dict[str, Any] = {"input_tokens": prompt - (cached or 0), "output_tokens": done.stats.gen_tokens,
                               "cache_creation_input_tokens": 0,
                               "output_tokens_details": {"thinking_tokens": done.stats.reasoning_tokens}}
    if cached is not None:
        figures["cache_read_input_tokens"] = cached
    return figures


def whole_message(msg_id: str, model: str, request: MessagesRequest, done: Done) -> dict[str, Any]:
    """The message object of a reply that ended with `done`."""
    content: list[dict[str, Any]] = []
    if done.reasoning:
        content.append({"type": "thinking", "thinking": done.reasoning if request.show_thinking else "",
                        "signature": signature(done.reasoning)})
    if done.text or not (content or done.tool_calls):  # a reply of nothing at all is an empty text block
        content.append({"type": "text", "text": done.text})
    content.extend({"type": "tool_use", "id": tool_use_id(c), "name": c.name, "input": tool_input(c)}
                   for c in done.tool_calls)
    reason, sequence = stop_reason(done, request.max_tokens)
    return {"id": msg_id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": reason, "stop_sequence": sequence, "usage": usage(done)}
