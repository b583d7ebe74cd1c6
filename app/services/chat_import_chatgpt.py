"""Chats from ChatGPT's data export (`conversations.json`): a list of conversations, each a tree of
messages (`mapping`: node id -> {message, parent, children}) of which the chat shows one path, the one
from the root to `current_node` (the other branches are edits and regenerations the user moved away from).

The path is followed from `current_node` up through the parents; a conversation whose path has a cycle or
a missing parent is skipped with a line saying why, and the others are imported. Only what Tailor can hold
is kept: user, assistant and system text (tool calls and their output, and hidden messages, are left out;
an image becomes "[image]"); a reasoning model's thoughts become the reasoning of the reply after them.
Each chat's stable id is derived from ChatGPT's own id, so importing the file again adds nothing. No Qt here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from app.services.store import ChatSettings, Conversation, Message

# Stable ids of imported ChatGPT chats: uuid5 of their ChatGPT id in this namespace.
CHATGPT_NAMESPACE = uuid.UUID("5b1f8c3e-7d2a-4c1e-9a57-3c0e6f2d9b41")
_KEPT_ROLES = ("user", "assistant", "system")


class SkippedChat(ValueError):
    """A conversation that cannot be read; the message says which and why."""


@dataclass(slots=True)
class ChatGptChats:
    chats: list[tuple[str, Conversation, list[Message]]] = field(default_factory=list)  # stable id, chat, messages
    problems: list[str] = field(default_factory=list)  # one line per conversation skipped


def looks_like_chatgpt(document: object) -> bool:
    """Whether a parsed JSON document is ChatGPT's conversations.json (a list of objects with a mapping)."""
    return isinstance(document, list) and (
        not document or any(isinstance(c, dict) and "mapping" in c for c in document[:5]))


def parse_chatgpt(document: list) -> ChatGptChats:
    """The conversations of `document` that can be read, and a line for each one that cannot."""
    found = ChatGptChats()
    for index, data in enumerate(document):
        if not isinstance(data, dict):
            found.problems.append(f"Skipped conversation {index + 1}: it is not an object")
            continue
        title = data.get("title") if isinstance(data.get("title"), str) else ""
        label = f"conversation {index + 1}" + (f" ({title!r})" if title else "")
        try:
            found.chats.append(_conversation(data, title))
        except SkippedChat as exc:
            found.problems.append(f"Skipped {label}: {exc}")
    return found


def visible_path(mapping: dict, current: str) -> list[dict]:
    """The nodes from the root to `current`, following parents up from `current`.

    Raises:
        SkippedChat: a node is missing, or the parents go round in a cycle.
    """
    path: list[dict] = []
    seen: set[str] = set()
    node_id: str | None = current
    while node_id is not None:
        if node_id in seen:
            raise SkippedChat(f"its messages' parents form a cycle (at node {node_id!r})")
        seen.add(node_id)
        node = mapping.get(node_id)
        if not isinstance(node, dict):
            raise SkippedChat(f"message {node_id!r} is missing from its mapping")
        path.append(node)
        parent = node.get("parent")
        node_id = parent if isinstance(parent, str) else None
    path.reverse()
    return path


def _number(value: object, default: float) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _conversation(data: dict, title: str) -> tuple[str, Conversation, list[Message]]:
    mapping, current = data.get("mapping"), data.get("current_node")
    if not isinstance(mapping, dict) or not mapping:
        raise SkippedChat("it has no messages")
    if not isinstance(current, str):
        raise SkippedChat("it has no current_node")
    own_id = data.get("conversation_id") or data.get("id")
    if not isinstance(own_id, str) or not own_id:
        raise SkippedChat("it has no id")
    created = _number(data.get("create_time"), 0.0)
    updated = _number(data.get("update_time"), created)
    messages: list[Message] = []
    thoughts: list[str] = []
    for node in visible_path(mapping, current):
        message = node.get("message")
        if not isinstance(message, dict):
            continue
        author = message.get("author") if isinstance(message.get("author"), dict) else {}
        role = author.get("role")
        metadata = message.get("metadata") if isinstance(message.get("metadata"), dict) else {}
        content = message.get("content") if isinstance(message.get("content"), dict) else {}
        kind = content.get("content_type")
        if kind == "thoughts":
            thoughts += [t.get("content", "") for t in content.get("thoughts", []) if isinstance(t, dict)]
            continue
        if (role not in _KEPT_ROLES or metadata.get("is_visually_hidden_from_conversation")
                or message.get("recipient", "all") != "all"):
            continue
        text = _text(content)
        if not text.strip():
            continue
        at = _number(message.get("create_time"), messages[-1].created if messages else created)
        reasoning = "\n\n".join(t for t in thoughts if isinstance(t, str)) if role == "assistant" else ""
        if role == "assistant":
            thoughts = []
        messages.append(Message(0, 0, role, text, "complete", None, at, reasoning, True))
    if not messages:
        raise SkippedChat("it has no text messages")
    settings = ChatSettings()
    system = [m for m in messages if m.role == "system"]
    if system:  # its custom instructions: the chat's system prompt, as Tailor keeps one
        settings.system_prompt = system[0].content
        messages = [m for m in messages if m is not system[0]]
    uid = str(uuid.uuid5(CHATGPT_NAMESPACE, own_id))
    return uid, Conversation(0, title or "ChatGPT chat", created, max(updated, created), settings), messages


def _text(content: dict) -> str:
    """The text of one message's content: its text parts; an image or a file as a placeholder."""
    kind = content.get("content_type")
    if kind == "code" and isinstance(content.get("text"), str):
        return content["text"]
    if kind not in ("text", "multimodal_text"):
        return ""
    parts = content.get("parts") if isinstance(content.get("parts"), list) else []
    texts = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            texts.append("[image]" if "image" in str(part.get("content_type", "")) else "[attachment]")
    return "\n".join(t for t in texts if t)
