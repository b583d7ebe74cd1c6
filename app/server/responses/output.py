"""The Response object and its output items, in the shapes of the `openai` package's types.

Output items: a reasoning item where the model thought (its text as `reasoning_text` content, never a
summary), a message item with the answer as `output_text`, and a function_call item per call. Item
ids are made once per reply, so a streamed item and the same item in the final response agree.
"""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any

from app.server.errors import ApiError
from app.server.responses.tool_list import ToolList
from engine.protocol import GenerationStats, ToolCall


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def reasoning_item(item_id: str, text: str | None, status: str, encrypted: bool = False) -> dict[str, Any]:
    """A reasoning item; `text` None while it streams (its content comes as parts). With `encrypted`, once
    whole, it carries `encrypted_content`: its text in base64 (request.py, ENCRYPTED_REASONING)."""
    content = [] if text is None else [{"type": "reasoning_text", "text": text}]
    item = {"id": item_id, "type": "reasoning", "summary": [], "content": content, "status": status}
    if encrypted and text is not None:
        item["encrypted_content"] = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return item


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(item_id: str, text: str | None, status: str) -> dict[str, Any]:
    """An assistant message item; `text` None while it streams (its content comes as parts)."""
    content = [] if text is None else [text_part(text)]
    return {"id": item_id, "type": "message", "role": "assistant", "status": status, "content": content}


def call_item(item_id: str, call: ToolCall, arguments: str, status: str,
              tools: ToolList | None = None) -> dict[str, Any]:
    """A function_call item; a call to a namespace's function (tool_list.py) carries its namespace apart."""
    name, namespace = tools.split(call.name) if tools is not None else (call.name, None)
    item = {"id": item_id, "type": "function_call", "call_id": call.id, "name": name, "arguments": arguments,
            "status": status}
    if namespace is not None:
        item["namespace"] = namespace
    return item


def usage(stats: GenerationStats) -> dict[str, Any]:
    prompt, gen = stats.prompt_tokens or 0, stats.gen_tokens
    return {"input_tokens": prompt,
            # Tailor's prefix cache is implicit: nothing is ever billed for writing to it.
            "input_tokens_details": {"cached_tokens": stats.cached_tokens or 0, "cache_write_tokens": 0},
            "output_tokens": gen, "output_tokens_details": {"reasoning_tokens": stats.reasoning_tokens},
            "total_tokens": prompt + gen}


class ResponseObject:
    """One response's envelope: its id, model and the request's fields it repeats; `snapshot()` gives the
    Response object as it stands."""

    def __init__(self, model: str, echo: dict[str, Any], encrypted_reasoning: bool = False,
                 tools: ToolList | None = None):
        self.id = new_id("resp")
        self.tools = tools
        self.model = model
        self.echo = echo
        self.encrypted_reasoning = encrypted_reasoning
        self.created_at = int(time.time())

    def snapshot(self, status: str, output: list[dict[str, Any]], stats: GenerationStats | None = None,
                 error: ApiError | None = None) -> dict[str, Any]:
        """The Response object: status in_progress, completed, incomplete (the output cap was reached) or
        failed (with `error`)."""
        body: dict[str, Any] = {
            "id": self.id, "object": "response", "created_at": self.created_at, "status": status,
            "background": False, "error": None, "incomplete_details": None, "model": self.model, "output": output,
            "truncation": "disabled", "usage": usage(stats) if stats is not None else None,
            **self.echo,
        }
        if status == "completed":
            body["completed_at"] = int(time.time())
        elif status == "incomplete":
            body["incomplete_details"] = {"reason": "max_output_tokens"}
        elif status == "failed" and error is not None:
            body["error"] = {"code": "server_error", "message": error.message}
        return body
