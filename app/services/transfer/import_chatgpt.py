"""Chats from ChatGPT's data export (`conversations.json`), read one conversation at a time.

The file is a list of conversations, each a tree of messages (`mapping`: node id -> {message,
parent, children}) of which ChatGPT shows the path to `current_node`; the other branches are the
questions the user edited and the answers they regenerated. The whole tree becomes the chat's
branches: each user or assistant node with text is kept, and a node left out (the hidden system
message, tool calls and their output, a reasoning recap, an empty message) hands the nodes under it
to its nearest kept ancestor. A "thoughts" node becomes the reasoning of the reply under it; the first
visible system text becomes the chat's system prompt; an image becomes "[image]". `current_node`
(or its nearest kept ancestor) is the branch shown.

A conversation whose tree is broken (a parent missing from the mapping, parents that go round in a
cycle) is skipped with a line naming the node; the others are imported. Each chat's stable id is
derived from ChatGPT's own id, so importing the file again adds nothing. No Qt here.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from app.services.history.store import ChatSettings, Conversation
from app.services.history.timestamps import checked_time
from app.services.transfer.import_parsed import (
    MessageList,
    ParsedChat,
    SkippedChat,
    mended_times,
    pack,
    unpack,
)
from app.services.transfer.json_stream import JsonStream

# Stable ids of imported ChatGPT chats: uuid5 of their ChatGPT id in this namespace.
CHATGPT_NAMESPACE = uuid.UUID("5b1f8c3e-7d2a-4c1e-9a57-3c0e6f2d9b41")
_FIELDS = ("title", "create_time", "update_time", "current_node", "conversation_id", "id")


@dataclass(slots=True, frozen=True)
class _Node:
    """What the import needs of one mapping entry (the rest of ChatGPT's metadata is dropped as it is read,
    so a conversation in memory is little more than its text)."""

    parent: str | None
    role: str | None = None  # "user" or "assistant": kept; "system": a candidate system prompt; None: left out
    text: str | bytes = ""  # packed (chat_import_parsed.pack)
    created: float | None = None
    thoughts: tuple[str, ...] = ()
    mended: bool = False  # its create_time was no time (out of 1970–9999, not a number)


@dataclass(slots=True)
class ReadConversation:
    """One conversation as read from the stream: its top-level fields and its nodes (in the mapping's order)."""

    fields: dict = field(default_factory=dict)
    nodes: dict[str, _Node] = field(default_factory=dict)
    has_mapping: bool = False
    is_object: bool = True


def read_conversation(stream: JsonStream, found: ReadConversation | None = None) -> ReadConversation:
    """Read the conversation that starts here into `found`, whatever it holds (the stream is left after it;
    when it breaks, `found` holds what was read before)."""
    found = found if found is not None else ReadConversation()
    if stream.peek() != "{":
        stream.skip()
        found.is_object = False
        return found
    for key in stream.items():
        if key == "mapping" and stream.peek() == "{":
            found.has_mapping = True
            for node_id in stream.items():
                entry = stream.value()
                if isinstance(entry, dict):  # anything else counts as missing
                    found.nodes[node_id] = _node(entry)
        elif key in _FIELDS:
            found.fields[key] = stream.value()
        else:
            stream.skip()
    return found


def chat_of(read: ReadConversation) -> ParsedChat:
    """The chat of a conversation read; SkippedChat says why there is none."""
    if not read.is_object:
        raise SkippedChat("it is not an object")
    data = read.fields
    if not read.nodes:
        raise SkippedChat("it has no messages")
    current = data.get("current_node")
    if not isinstance(current, str):
        raise SkippedChat("it has no current_node")
    own_id = data.get("conversation_id") or data.get("id")
    if not isinstance(own_id, str) or not own_id:
        raise SkippedChat("it has no id")
    now, notes = time.time(), []
    created, updated = checked_time(data.get("create_time")), checked_time(data.get("update_time"))
    mended = sum(data.get(key) is not None and seconds is None
                 for key, seconds in (("create_time", created), ("update_time", updated)))
    if mended:
        notes.append(mended_times(mended, "chat"))
    created = now if created is None else created
    updated = created if updated is None else updated
    tree = _tree(read.nodes, current, created)
    if not tree.messages:
        raise SkippedChat("it has no text messages")
    settings = ChatSettings()
    if tree.system_prompt:  # its custom instructions: the chat's system prompt, as Tailor keeps one
        settings.system_prompt = tree.system_prompt
    title = data.get("title") if isinstance(data.get("title"), str) else ""
    conversation = Conversation(0, title or "ChatGPT chat", created, max(updated, created), settings)
    if tree.mended:
        notes.append(mended_times(tree.mended, "message"))
    return ParsedChat(str(uuid.uuid5(CHATGPT_NAMESPACE, own_id)), conversation, tree.messages, tree.leaf,
                      notes=tuple(notes))


def label(read: ReadConversation, index: int) -> str:
    """How a line names the conversation: `conversation 3 ('Its title')`."""
    title = read.fields.get("title")
    return f"conversation {index + 1}" + (f" ({title!r})" if isinstance(title, str) and title else "")


# ---------------------------------------------------------------- one node


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _node(entry: dict) -> _Node:
    parent = entry.get("parent") if isinstance(entry.get("parent"), str) else None
    message = entry.get("message")
    if not isinstance(message, dict):
        return _Node(parent)  # the root ChatGPT adds above the first message
    role = _dict(message.get("author")).get("role")
    content = _dict(message.get("content"))
    if content.get("content_type") == "thoughts":
        thoughts = content.get("thoughts") if isinstance(content.get("thoughts"), list) else []
        texts = (t.get("content") for t in thoughts if isinstance(t, dict))
        return _Node(parent, thoughts=tuple(t for t in texts if isinstance(t, str) and t))
    if (role not in ("user", "assistant", "system")
            or _dict(message.get("metadata")).get("is_visually_hidden_from_conversation")
            or message.get("recipient", "all") != "all"):
        return _Node(parent)  # a tool call, a tool's output, a hidden message
    text = _text(content)
    if not text.strip():
        return _Node(parent)
    raw = message.get("create_time")
    created = checked_time(raw)  # None: the time of the message before it (the chat's, for the first)
    return _Node(parent, role, pack(text), created, mended=raw is not None and created is None)


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


# ---------------------------------------------------------------- the tree


@dataclass(slots=True)
class _Tree:
    messages: MessageList
    leaf: int | None
    system_prompt: str
    mended: int = 0  # kept messages whose create_time was no time


def _tree(nodes: dict[str, _Node], current: str, created: float) -> _Tree:
    """The kept messages, each after its nearest kept ancestor (ids from 1, parents before children,
    versions in the mapping's order), and the one ending the branch to `current`.

    Raises:
        SkippedChat: a parent is missing, or parents go round in a cycle.
    """
    for node in nodes.values():
        if node.parent is not None and node.parent not in nodes:
            raise SkippedChat(f"message {node.parent!r} is missing from its mapping")
    if current not in nodes:
        raise SkippedChat(f"message {current!r} is missing from its mapping")
    children: dict[str | None, list[str]] = defaultdict(list)
    for node_id, node in nodes.items():
        children[node.parent].append(node_id)
    tree = _Tree(MessageList(), None, "")
    reached: set[str] = set()
    # Depth first, without recursion (a chat may have 100,000 messages): (node, its kept ancestor's id,
    # the thoughts passed down to it, the time a message without one gets).
    stack = [(root, None, (), created) for root in reversed(children[None])]
    while stack:
        node_id, above, thoughts, at = stack.pop()
        reached.add(node_id)
        node = nodes[node_id]
        if node.role in ("user", "assistant"):
            at = node.created if node.created is not None else at
            tree.mended += node.mended
            reasoning = "\n\n".join(thoughts) if node.role == "assistant" else ""
            above = tree.messages.append(node.role, node.text, at, above, reasoning=reasoning)
            thoughts = ()
        else:
            if node.role == "system" and not tree.system_prompt:
                tree.system_prompt = unpack(node.text)
            thoughts += node.thoughts
        if node_id == current:
            tree.leaf = above
        stack.extend((child, above, thoughts, at) for child in reversed(children.get(node_id, ())))
    if len(reached) < len(nodes):
        start = current if current not in reached else next(n for n in nodes if n not in reached)
        raise SkippedChat(f"its messages' parents form a cycle (at node {_cycle_at(nodes, start)!r})")
    return tree


def _cycle_at(nodes: dict[str, _Node], start: str) -> str:
    """The first node met twice going up from `start`, which no root is above (every parent exists)."""
    seen: set[str] = set()
    node_id = start
    while node_id not in seen:
        seen.add(node_id)
        node_id = nodes[node_id].parent
    return node_id
