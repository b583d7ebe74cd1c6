"""A Responses request's `input` as the engine's chat turns.

`input` is a string (one user turn) or a list of items: messages (role user, assistant, system or
developer; content a string or input_text / output_text / input_image parts), function_call items (the
model's calls, given back) and function_call_output items (their results), and reasoning items given
back, which are accepted and not sent to the model again (the templates drop earlier turns' thinking).
Calls right after an assistant message (reasoning between them aside) join its turn, as chat templates
expect one assistant turn with its content and its tool calls. Each refusal is a 400 naming the item.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.server.errors import bad_param
from app.server.image_parts import ImageFetch, image_part, images_of
from app.server.responses.tool_list import qualified
from engine.protocol import ChatMessage, Media, ToolCall

_ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}
_DETAILS = ("auto", "low", "high", "original")


def input_messages(value: Any, fetch: ImageFetch | None = None) -> tuple[ChatMessage, ...]:
    """The turns of `input`; `fetch` fetches image URLs (None: they are refused)."""
    if isinstance(value, str):
        return (ChatMessage("user", value),)
    if not isinstance(value, list) or not value:
        raise bad_param("input", "'input' must be a string or a non-empty array of input items.")
    messages: list[ChatMessage] = []
    for i, item in enumerate(value):
        param = f"input[{i}]"
        if not isinstance(item, dict):
            raise bad_param(param, f"'{param}' must be an object: a message, function_call or function_call_output.")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            messages.append(_message(item, param, fetch))
        elif kind == "function_call":
            call = _call(item, param)
            last = messages[-1] if messages else None
            if last is not None and last.role == "assistant":
                messages[-1] = replace(last, tool_calls=(*last.tool_calls, call))
            else:
                messages.append(ChatMessage("assistant", "", (call,)))
        elif kind == "function_call_output":
            messages.append(_call_output(item, param))
        elif kind == "reasoning":
            continue  # the model's earlier thinking: templates do not show it again
        elif kind == "item_reference":
            raise bad_param(param, "Item references are not supported by this server: send the item itself, or "
                                   "continue a stored response with 'previous_response_id'.")
        elif isinstance(kind, str):
            raise bad_param(f"{param}.type", f"'{kind}' items are not supported by this server: input items are "
                                             "messages, function_call, function_call_output and reasoning.")
        else:
            raise bad_param(f"{param}.type", f"'{param}' needs a 'type' (or a 'role', for a message).")
    return tuple(messages)


def with_tool_names(messages: tuple[ChatMessage, ...]) -> tuple[ChatMessage, ...]:
    """Tool results with the name of the function each answers (some templates write it), from the call."""
    names = {call.id: call.name for m in messages for call in m.tool_calls}
    return tuple(replace(m, name=names.get(m.tool_call_id or "")) if m.role == "tool" and m.name is None else m
                 for m in messages)


def has_input_images(body: Any) -> bool:
    """Whether a request carries an image part (decoding it then runs off the event loop)."""
    items = body.get("input") if isinstance(body, dict) else None
    if not isinstance(items, list):
        return False
    return any(isinstance(m, dict) and isinstance(m.get("content"), list)
               and any(isinstance(p, dict) and p.get("type") == "input_image" for p in m["content"])
               for m in items)


def _message(item: dict, param: str, fetch: ImageFetch | None) -> ChatMessage:
    role = item.get("role")
    role = _ROLES.get(role) if isinstance(role, str) else None
    if role is None:
        raise bad_param(f"{param}.role", f"'{param}.role' must be user, assistant, system or developer.")
    content = item.get("content")
    if isinstance(content, str):
        return ChatMessage(role, content)  # type: ignore[arg-type]
    if not isinstance(content, list):
        raise bad_param(f"{param}.content", f"'{param}.content' must be a string or an array of content parts.")
    texts: list[str] = []
    images: list[Media] = []
    for j, part in enumerate(content):
        where = f"{param}.content[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "refusal" and role == "assistant" and isinstance(part.get("refusal"), str):
            texts.append(part["refusal"])
        elif kind == "input_image" and role == "user":
            images.append(_image(part, where, fetch))
        elif kind == "input_image":
            raise bad_param(where, "Images go in user messages.")
        elif kind in ("input_file", "input_audio"):
            raise bad_param(where, "This server takes no files or audio: content parts are input_text, "
                                   "output_text and input_image.")
        else:
            raise bad_param(where, f"'{where}' must be an input_text, output_text or input_image part with its "
                                   "'text' (or 'image_url').")
    return ChatMessage(role, "".join(texts), media=images_of(images, f"{param}.content"))  # type: ignore[arg-type]


def _image(part: dict, param: str, fetch: ImageFetch | None) -> Media:
    if part.get("file_id") is not None:
        raise bad_param(f"{param}.file_id", "This server has no Files API: send the image as a data: URL in "
                                            "'image_url'.")
    detail = part.get("detail")
    if detail is not None and detail not in _DETAILS:
        raise bad_param(f"{param}.detail", f"'{param}.detail' must be auto, low, high or original.")
    url = part.get("image_url")
    if not isinstance(url, str) or not url:
        raise bad_param(f"{param}.image_url", f"'{param}.image_url' must be a data: URL of an image.")
    # The chat API's intake; a refusal names `{param}.image_url`, which is this part's field too.
    return image_part({"image_url": {"url": url}}, param, fetch)


def _call(item: dict, param: str) -> ToolCall:
    fields = {key: item.get(key) for key in ("call_id", "name", "arguments")}
    for key, value in fields.items():
        if not isinstance(value, str) or (key != "arguments" and not value):
            raise bad_param(f"{param}.{key}", f"'{param}.{key}' must be a string: a function_call item has "
                                              "'call_id', 'name' and 'arguments' (JSON text).")
    namespace = item.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise bad_param(f"{param}.namespace", f"'{param}.namespace' must be a string.")
    # A call to a function of a namespace tool: the model called it by its qualified name (tool_list.py).
    name = qualified(namespace, fields["name"]) if namespace else fields["name"]  # type: ignore[arg-type]
    return ToolCall(fields["call_id"], name, fields["arguments"])  # type: ignore[arg-type]


def _call_output(item: dict, param: str) -> ChatMessage:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise bad_param(f"{param}.call_id", f"'{param}.call_id' must name the function call this answers.")
    output = item.get("output")
    if isinstance(output, list):
        texts = []
        for j, part in enumerate(output):
            if not (isinstance(part, dict) and part.get("type") == "input_text" and isinstance(part.get("text"), str)):
                raise bad_param(f"{param}.output[{j}]", "A function's output is text here: a string, or "
                                                        "input_text parts.")
            texts.append(part["text"])
        output = "".join(texts)
    if not isinstance(output, str):
        raise bad_param(f"{param}.output", f"'{param}.output' must be a string (or input_text parts).")
    return ChatMessage("tool", output, tool_call_id=call_id)
