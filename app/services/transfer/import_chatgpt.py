"""Chats from ChatGPT's data export (`conversations.json`), read one conversation at a time.

The file is a list of conversations, each a tree of messages (`mapping`: node id -> {message,
parent, children}) of which ChatGPT shows the path to `current_node`; the other branches are the
questions the user edited and the answers they regenerated. The whole tree becomes the chat's
branches: each user or assistant node with text is kept, tool calls and their outputs become the tool
steps of the reply they belong to (app/services/transfer/import_chatgpt_tools.py; text the model wrote
just before a call is that step's text), and a node left out (the hidden system message, a reasoning
recap, an empty message) hands the nodes under it to its nearest kept ancestor. A "thoughts" node becomes the reasoning of the reply under it; the first
visible system text becomes the chat's system prompt. An image the user sent (an `image_asset_pointer`
part: `file-service://file-XXXX`) is taken from the export's folder as its node is read, when its file
is there (import_media.py: `file-XXXX-photo.png`, through the media intake), and carried by the message;
where it is not, the text says so in its place ("[image not in the export: file-XXXX]"). Any other image
(a tool's, an assistant's) becomes "[image]". `current_node` (or its nearest kept ancestor) is the branch
shown.

A conversation whose tree is broken (a parent missing from the mapping, parents that go round in a
cycle) is skipped with a line naming the node; the others are imported. Each chat's stable id is
derived from ChatGPT's own id, so importing the file again adds nothing. No Qt here.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field, replace

from app.services.history.records import ImageRef
from app.services.history.store import ChatSettings, Conversation
from app.services.history.timestamps import checked_time
from app.services.history.tool_steps import MAX_CALLS
from app.services.media.errors import ImageRefused
from app.services.transfer.import_chatgpt_tools import (
    NO_REPLY,
    PendingReply,
    call_arguments,
    output_failed,
    output_text,
    parts_text,
    tool_name,
)
from app.services.transfer.import_media import ImportMedia
from app.services.transfer.import_parsed import (
    MessageList,
    ParsedChat,
    SkippedChat,
    left_out_images,
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
    # "user" or "assistant": kept; "system": a candidate system prompt; "call": an assistant's call of a tool;
    # "tool": a tool's output; None: left out
    role: str | None = None
    text: str | bytes = ""  # packed (chat_import_parsed.pack); a call's arguments (JSON), a tool's output
    created: float | None = None
    thoughts: tuple[str, ...] = ()
    mended: bool = False  # its create_time was no time (out of 1970–9999, not a number)
    tool: str = ""  # the tool called, or that answered
    failed: bool = False  # a tool's output that reports a failure
    images: tuple[ImageRef, ...] = ()  # a user's message: its images, in the media store already


@dataclass(slots=True)
class ReadConversation:
    """One conversation as read from the stream: its top-level fields and its nodes (in the mapping's order)."""

    fields: dict = field(default_factory=dict)
    nodes: dict[str, _Node] = field(default_factory=dict)
    has_mapping: bool = False
    is_object: bool = True
    lost_images: list[str] = field(default_factory=list)  # images refused (a FIFO, a bomb), each named with why


def read_conversation(stream: JsonStream, found: ReadConversation | None = None,
                      media: ImportMedia | None = None) -> ReadConversation:
    """Read the conversation that starts here into `found`, whatever it holds (the stream is left after it;
    when it breaks, `found` holds what was read before); its user's images are taken in through `media`
    (None: each said in its text to be not in the export)."""
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
                    found.nodes[node_id] = _node(entry, media, found.lost_images)
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
    if read.lost_images:
        notes.append(left_out_images(read.lost_images))
    if tree.dropped:
        notes.append(f"{tree.dropped:,} tool call{'' if tree.dropped == 1 else 's'} past the {MAX_CALLS:,} a reply "
                     "holds were left out")
    return ParsedChat(str(uuid.uuid5(CHATGPT_NAMESPACE, own_id)), conversation, tree.messages, tree.leaf,
                      notes=tuple(notes))


def label(read: ReadConversation, index: int) -> str:
    """How a line names the conversation: `conversation 3 ('Its title')`."""
    title = read.fields.get("title")
    return f"conversation {index + 1}" + (f" ({title!r})" if isinstance(title, str) and title else "")


# ---------------------------------------------------------------- one node


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _node(entry: dict, media: ImportMedia | None = None, lost: list[str] | None = None) -> _Node:
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
    if (role not in ("user", "assistant", "system", "tool")
            or _dict(message.get("metadata")).get("is_visually_hidden_from_conversation")):
        return _Node(parent)  # a hidden message
    raw = message.get("create_time")
    created = checked_time(raw)  # None: the time of the message before it (the chat's, for the first)
    recipient = message.get("recipient", "all")
    if role == "assistant" and recipient != "all":
        return _Node(parent, "call", pack(call_arguments(content)), created, tool=tool_name(recipient))
    if role == "tool":
        name = tool_name(_dict(message.get("author")).get("name"))
        return _Node(parent, "tool", pack(output_text(content)), created, tool=name, failed=output_failed(message))
    if role == "user" and recipient == "all":
        text, images = _user_content(content, media, lost if lost is not None else [])
    else:
        text, images = _text(content), ()
    if recipient != "all" or not (text.strip() or images):
        return _Node(parent)  # addressed to a tool by someone else than the model, or empty
    return _Node(parent, role, pack(text), created, mended=raw is not None and created is None, images=images)


def _user_content(content: dict, media: ImportMedia | None, lost: list[str]) -> tuple[str, tuple[ImageRef, ...]]:
    """A user's text and images: each `image_asset_pointer` part taken from the export's folder through
    `media` (its id: "file-XXXX" of "file-service://file-XXXX", "file_0000…" of "sediment://file_0000…"),
    or said in its place in the text: "[image not in the export: file-XXXX]", or, when its file is there but
    refused, "[image not imported: file-XXXX]" with why added to `lost`."""
    parts = content.get("parts")
    if content.get("content_type") != "multimodal_text" or not isinstance(parts, list):
        return _text(content), ()
    texts: list[str] = []
    images: list[ImageRef] = []
    for part in parts:
        pointer = part.get("asset_pointer") if isinstance(part, dict) else None
        if not (isinstance(pointer, str) and part.get("content_type") == "image_asset_pointer"):
            texts.append(parts_text({"parts": [part]}))
            continue
        asset_id = pointer.rpartition("://")[2]
        try:
            found = media.asset(asset_id) if media is not None else None
        except ImageRefused as exc:
            lost.append(str(exc))
            texts.append(f"[image not imported: {asset_id}]")
            continue
        if found is None:
            texts.append(f"[image not in the export: {asset_id}]")
        else:
            images.append(found)
    return "\n".join(t for t in texts if t), tuple(images)


def _text(content: dict) -> str:
    """The text of one message's content: its text parts; an image or a file as a placeholder."""
    kind = content.get("content_type")
    if kind == "code" and isinstance(content.get("text"), str):
        return content["text"]
    if kind not in ("text", "multimodal_text"):
        return ""
    return parts_text(content)


# ---------------------------------------------------------------- the tree


# A node to visit: its id, its kept ancestor's id, the thoughts passed down to it, the time a message without
# one gets, the reply read so far on its path.
_Path = tuple[str, int | None, tuple[str, ...], float, PendingReply]
_At = tuple[int | None, tuple[str, ...], float, PendingReply]  # the same, for the nodes under one


@dataclass(slots=True)
class _Tree:
    messages: MessageList
    leaf: int | None
    system_prompt: str
    mended: int = 0  # kept messages whose create_time was no time
    dropped: int = 0  # tool calls past MAX_CALLS in a reply

    def add_reply(self, reply: PendingReply, thoughts: tuple[str, ...], above: int | None, at: float) -> int:
        """The reply read down a path (its steps, its text) as a message after `above`; its number."""
        number = self.messages.append("assistant", reply.text, at, above, reasoning="\n\n".join(thoughts),
                                      tool_steps=reply.finished_steps())
        self.dropped += reply.dropped
        if reply.current:
            self.leaf = number
        return number


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
    # Depth first, without recursion (a chat may have 100,000 messages).
    stack: list[_Path] = [(root, None, (), created, NO_REPLY) for root in reversed(children[None])]
    while stack:
        node_id, above, thoughts, at, reply = stack.pop()
        reached.add(node_id)
        node = nodes[node_id]
        above, thoughts, at, reply = _visit(tree, node_id, node, (above, thoughts, at, reply),
                                            _continues(nodes, children, node_id))
        if node_id == current:
            if reply.open:  # in a reply still being read: the branch shown ends at that reply
                reply = replace(reply, current=True)
            else:
                tree.leaf = above
        below = children.get(node_id, ())
        if not below and reply.open:  # the path ends in a reply that wrote nothing after its last call
            above, thoughts, reply = tree.add_reply(reply, thoughts, above, at), (), NO_REPLY
        stack.extend((child, above, thoughts, at, reply) for child in reversed(below))
    if len(reached) < len(nodes):
        start = current if current not in reached else next(n for n in nodes if n not in reached)
        raise SkippedChat(f"its messages' parents form a cycle (at node {_cycle_at(nodes, start)!r})")
    return tree


def _visit(tree: _Tree, node_id: str, node: _Node, where: _At, continues: bool) -> _At:
    """Take one node into `tree`; `where` it is (its kept ancestor, the thoughts, the time, the reply read)
    becomes where the nodes under it are. `continues`: the model called a tool after it (text it wrote is
    then a step's, not the answer)."""
    above, thoughts, before, reply = where
    at = node.created if node.created is not None else before
    if node.role == "user":
        if reply.open:  # a reply that wrote nothing after its last call, at the time of its last node
            above, thoughts = tree.add_reply(reply, thoughts, above, before), ()
        tree.mended += node.mended
        return tree.messages.append("user", node.text, at, above, images=node.images), (), at, NO_REPLY
    if node.role == "assistant":
        tree.mended += node.mended
        reply = reply.wrote(unpack(node.text))
        if continues:
            return above, thoughts, at, reply
        return tree.add_reply(reply, thoughts, above, at), (), at, NO_REPLY
    if node.role == "call":
        return above, (), at, reply.called(node_id, node.tool, unpack(node.text), "\n\n".join(thoughts), node.created)
    if node.role == "tool":
        return above, thoughts, at, reply.answered(node_id, node.tool, unpack(node.text), node.failed, node.created)
    if node.role == "system" and not tree.system_prompt:
        tree.system_prompt = unpack(node.text)
    return above, thoughts + node.thoughts, at, reply


def _continues(nodes: dict[str, _Node], children: dict[str | None, list[str]], node_id: str) -> bool:
    """Whether an assistant's text is followed by a call of a tool (under it, past nodes left out). Each node
    left out is looked at from its one nearest node that is not: the whole tree is looked at once at most."""
    if nodes[node_id].role != "assistant":
        return False
    todo = list(children.get(node_id, ()))
    while todo:
        child = todo.pop()
        role = nodes[child].role
        if role == "call":
            return True
        if role is None or role == "system":
            todo.extend(children.get(child, ()))
    return False


def _cycle_at(nodes: dict[str, _Node], start: str) -> str:
    """The first node met twice going up from `start`, which no root is above (every parent exists)."""
    seen: set[str] = set()
    node_id = start
    while node_id not in seen:
        seen.add(node_id)
        node_id = nodes[node_id].parent
    return node_id
