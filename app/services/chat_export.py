"""Chats out of the history: Tailor's own JSON (complete, lossless, versioned) and readable Markdown.

The JSON is deterministic: the same chats give the same bytes (keys sorted, chats oldest first,
messages in their order, no export time), so an export imported into an empty history exports
again byte for byte. HTML lives in app/services/chat_export_html.py. No Qt here.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime

from app.services.store import ChatStore, Conversation, Message

FORMAT = "tailor-chats"
VERSION = 1
ROLE_NAMES = {"user": "You", "assistant": "Assistant", "system": "System"}
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)$")


@dataclass(slots=True, frozen=True)
class ChatRecord:
    """One chat as exported: its stable id, the conversation and its messages in order."""

    uid: str
    conversation: Conversation
    messages: tuple[Message, ...]


class UnknownChatError(LookupError):
    """No chat has the id the user gave."""


def find_chat_id(store: ChatStore, ref: str) -> int:
    """The local id of the chat `ref` names: its number (as `tailor chats ls` shows) or its UUID.

    Raises:
        UnknownChatError: no such chat.
    """
    ref = ref.strip()
    if ref.isdigit() and store.get_conversation(int(ref)) is not None:
        return int(ref)
    found = store.find_conversation_by_uid(ref.lower())
    if found is None:
        raise UnknownChatError(f"No chat {ref!r} (see `tailor chats ls`).")
    return found.id


def load_chats(store: ChatStore, ids: list[int] | None = None) -> list[ChatRecord]:
    """The chats `ids` (None: all), oldest first (then by stable id, so the order is the same in any store)."""
    if ids is None:
        conversations = store.list_conversations()
    else:
        conversations = [c for c in (store.get_conversation(i) for i in ids) if c is not None]
    records = [
        ChatRecord(store.conversation_uid(c.id) or "", c, tuple(store.list_messages(c.id))) for c in conversations
    ]
    return sorted(records, key=lambda r: (r.conversation.created, r.uid))


def _finite(value: object) -> object:
    """`value` with NaN and infinities (which JSON cannot hold) as None, inside lists and objects too."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def message_dict(message: Message) -> dict:
    """One message of the JSON export (its stats as stored; a figure JSON cannot hold, such as NaN, as null)."""
    return {
        "role": message.role,
        "content": message.content,
        "reasoning": message.reasoning,
        "reasoning_closed": message.reasoning_closed,
        "state": message.state,
        "stats": _finite(message.stats),
        "created": message.created,
    }


def chat_dict(record: ChatRecord) -> dict:
    """One chat of the JSON export; `settings` as the history stores them (flat keys)."""
    c = record.conversation
    return {
        "id": record.uid,
        "title": c.title,
        "created": c.created,
        "updated": c.updated,
        "settings": json.loads(c.settings.to_json()),
        "messages": [message_dict(m) for m in record.messages],
    }


def to_json(records: list[ChatRecord]) -> str:
    """The chats as Tailor's JSON export, `{"format": "tailor-chats", "version": 1, "chats": [...]}`."""
    document = {"format": FORMAT, "version": VERSION, "chats": [chat_dict(r) for r in records]}
    return json.dumps(document, sort_keys=True, ensure_ascii=False, indent=2, allow_nan=False) + "\n"


def iso_time(timestamp: float) -> str:
    """A stored time as `2026-12-01 19:45 UTC` (UTC, so an export reads the same on any machine)."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M UTC")


def display_title(title: str) -> str:
    """A title on one line: control characters and runs of white space become one space."""
    cleaned = "".join(" " if unicodedata.category(ch)[0] in "CZ" else ch for ch in title)
    return " ".join(cleaned.split()) or "Untitled chat"


def fence_for(text: str, char: str = "`") -> str:
    """A code fence longer than any run of `char` in `text`, so the text cannot close it."""
    longest = max((len(run) for run in re.findall(re.escape(char) + "+", text)), default=0)
    return char * max(3, longest + 1)


def close_fences(text: str) -> str:
    """`text` with a code block it leaves open (a reply cut off mid-code) closed, so what follows it
    in the export is not swallowed into the code."""
    fence = ""
    for line in text.splitlines():
        if fence:
            stripped = line.strip()
            if stripped.startswith(fence) and stripped == stripped[0] * len(stripped):
                fence = ""
            continue
        match = _FENCE.match(line)
        if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
            fence = match.group(1)
    if not fence:
        return text
    return text + ("" if text.endswith("\n") else "\n") + fence


def _state_note(message: Message) -> str:
    return "" if message.state == "complete" else f" *({message.state})*"


def chat_markdown(record: ChatRecord) -> str:
    """One chat as Markdown: `# title`, a line of times, the system prompt, then each message under a
    `### You` / `### Assistant` heading; reasoning in a collapsed <details> block."""
    c = record.conversation
    lines = [f"# {display_title(c.title)}", "", f"*Created {iso_time(c.created)} · updated {iso_time(c.updated)} · "
             f"{len(record.messages)} messages*", ""]
    if c.settings.system_prompt:
        fence = fence_for(c.settings.system_prompt)
        lines += ["<details><summary>System prompt</summary>", "", f"{fence}text", c.settings.system_prompt,
                  fence, "", "</details>", ""]
    for message in record.messages:
        lines += [f"### {ROLE_NAMES.get(message.role, message.role)}{_state_note(message)}", ""]
        if message.reasoning:
            summary = "Thought" + ("" if message.reasoning_closed else " (cut off)")
            lines += [f"<details><summary>{summary}</summary>", "", close_fences(message.reasoning).strip("\n"),
                      "", "</details>", ""]
        lines += [close_fences(message.content).strip("\n") or "*(empty)*", ""]
    return "\n".join(lines)


def to_markdown(records: list[ChatRecord]) -> str:
    """The chats as one Markdown document, separated by rules."""
    return "\n---\n\n".join(chat_markdown(r) for r in records)


_UNSAFE = re.compile(r'[\\/:*?"<>|]+')


def safe_filename(title: str, uid: str, ext: str, limit: int = 80) -> str:
    """A file name for one chat: its title without path separators, control characters or characters
    Windows refuses, short enough, never hidden or empty, with the first part of its stable id (two chats
    of the same title do not overwrite each other)."""
    cleaned = _UNSAFE.sub("-", display_title(title)).strip(" .-")[:limit].strip(" .-") or "chat"
    return f"{cleaned}-{uid[:8] or 'chat'}.{ext}"
