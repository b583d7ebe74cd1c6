"""Chats out of the history: Tailor's own JSON (complete, lossless, versioned) and readable Markdown.

The JSON holds every branch of every chat and is deterministic: the same chats give the same bytes
(`format` and `version` first, so a reader knows the file before its first chat; each chat's keys
sorted; chats oldest first; messages in the order they were written; no export time), so an export
imported into an empty history exports again byte for byte. It is written a chat at a time
(`json_chunks`), so exporting a large history does not hold it twice. Markdown and HTML show the
branch each chat shows, and say where a message on it has other versions; a reply's tool steps come
before its answer (app/services/transfer/export_steps.py). A message's images are named in the JSON
(name, format, sha256, full size), its audio clips likewise (name, format, sha256, length in seconds), and
carried as the export's ExportMedia says: embedded or in a folder beside it (export_media.py); Markdown links
the files in that folder. HTML lives in
app/services/transfer/export_html.py. No Qt here.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import quote

from app.services.history.sent_documents import SentDocuments, documents_to_json
from app.services.history.store import AudioRef, ChatStore, Conversation, FileRef, ImageRef, Message
from app.services.history.timestamps import checked_time, iso_time
from app.services.media.wav import clock
from app.services.transfer.export_media import ExportMedia
from app.services.transfer.export_steps import steps_markdown
from app.services.transfer.markdown_text import close_fences, fence_for

FORMAT = "tailor-chats"
# 6: the documents a message was sent with (and their originals, with --with-files); 5: a message's audio clips; 4: a message's images; 3: a reply's tool steps; 2: branches (each message's id and parent, the chat's leaf), folder and pin; 1: one line
# per chat. An older Tailor refuses a newer version whole rather than import replies without their tool calls.
VERSION = 6
ROLE_NAMES = {"user": "You", "assistant": "Assistant", "system": "System"}


@dataclass(slots=True, frozen=True)
class ChatRecord:
    """One chat as exported: its stable id, the conversation, every message of every branch (by id), the
    message ending the branch it shows (None: its last) and the name of its folder (None: in none)."""

    uid: str
    conversation: Conversation
    messages: tuple[Message, ...]
    leaf: int | None = None
    folder: str | None = None

    def leaf_id(self) -> int | None:
        """The message the branch shown ends at: `leaf` when it is one of the chat's, else the last."""
        ids = {m.id for m in self.messages}
        if self.leaf in ids:
            return self.leaf
        return self.messages[-1].id if self.messages else None

    def branch(self) -> list[Message]:
        """The branch the chat shows, from its first message to its leaf."""
        by_id = {m.id: m for m in self.messages}
        path: list[Message] = []
        node = self.leaf_id()
        while node in by_id and len(path) <= len(by_id):  # parents come before children: no cycle, but bounded
            path.append(by_id[node])
            node = by_id[node].parent_id
        path.reverse()
        return path

    def versions(self) -> dict[int, tuple[int, int]]:
        """(index, count) of each message among its versions (the messages under the same parent), by id."""
        siblings: dict[int | None, list[int]] = defaultdict(list)
        for m in self.messages:
            siblings[m.parent_id].append(m.id)
        return {mid: (i + 1, len(ids)) for ids in siblings.values() for i, mid in enumerate(ids)}


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


def iter_chats(store: ChatStore, ids: list[int] | None = None) -> Iterator[ChatRecord]:
    """The chats `ids` (None: all), oldest first (then by stable id, so the order is the same in any store),
    each read from the store when it is reached."""
    if ids is None:
        conversations = store.list_conversations()
    else:
        conversations = [c for c in (store.get_conversation(i) for i in ids) if c is not None]
    order = sorted(((c, store.conversation_uid(c.id) or "") for c in conversations),
                   key=lambda pair: (checked_time(pair[0].created) or 0.0, pair[1]))
    folders = {f.id: f.name for f in store.list_folders()}
    for c, uid in order:
        yield ChatRecord(uid, c, tuple(store.all_messages(c.id)), store.leaf_id(c.id), folders.get(c.folder_id))


def load_chats(store: ChatStore, ids: list[int] | None = None) -> list[ChatRecord]:
    """The chats `ids` (None: all), as `iter_chats` gives them."""
    return list(iter_chats(store, ids))


def _finite(value: object) -> object:
    """`value` with NaN and infinities (which JSON cannot hold) as None, inside lists and objects too."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def image_dict(ref: ImageRef, media: ExportMedia | None = None) -> dict:
    """One image of a message in the JSON export: what names it (sha256 of the original bytes, its format, its
    name, its full size), and its bytes as `media` carries them: `data` (base64) when embedded, `file` (a
    path relative to the export) when beside it; neither when it could not be read or `media` is None."""
    found: dict = {"sha256": ref.sha256, "format": ref.format, "name": ref.name, "width": ref.width,
                   "height": ref.height}
    return _carried(found, ref, media)


def clip_dict(ref: AudioRef, media: ExportMedia | None = None) -> dict:
    """One audio clip of a message in the JSON export: sha256 of the original bytes, its format ("WAV"), its
    name and length in seconds, and its bytes as `media` carries them (as image_dict's)."""
    found: dict = {"sha256": ref.sha256, "format": ref.format, "name": ref.name, "seconds": _finite(ref.seconds)}
    return _carried(found, ref, media)


def file_dict(ref: FileRef, media: ExportMedia | None = None) -> dict:
    """One attached document's original in the JSON export: sha256, format ("PDF"...) and name, and its bytes
    as `media` carries them (as image_dict's) when the export takes files (`--with-files`)."""
    found: dict = {"sha256": ref.sha256, "format": ref.format, "name": ref.name}
    return _carried(found, ref, media if media is not None and media.with_files else None)


def _carried(found: dict, ref: ImageRef | AudioRef | FileRef, media: ExportMedia | None) -> dict:
    if media is not None:
        carried = media.base64(ref) if media.embed else media.beside(ref)
        if carried is not None:
            found["data" if media.embed else "file"] = carried
    return found


def message_dict(message: Message, local: dict[int, int], media: ExportMedia | None = None) -> dict:
    """One message of the JSON export: `id` and `parent` its own and its parent's number in the chat (from 1,
    in the order written; null: a first message); stats as stored (a figure JSON cannot hold, such as NaN,
    as null); `tool_steps` a list of ToolStep.to_dict() (empty: it called no tools); `images` a list of
    image_dict and `audio` a list of clip_dict (empty: it carries none); `documents` the block it was sent with,
    its notes and where each [n] is (sent_documents.py; null: none); `files` a list of file_dict."""
    return {
        "id": local[message.id],
        "parent": local.get(message.parent_id) if message.parent_id is not None else None,
        "role": message.role,
        "content": message.content,
        "reasoning": message.reasoning,
        "reasoning_closed": message.reasoning_closed,
        "state": message.state,
        "stats": _finite(message.stats),
        "created": checked_time(message.created),  # null: no time (a bad one kept from an older file)
        "tool_steps": _finite([step.to_dict() for step in message.tool_steps]),
        "images": [image_dict(ref, media) for ref in message.images],
        "audio": [clip_dict(ref, media) for ref in message.clips],
        "documents": json.loads(documents_to_json(message.documents)) if message.documents else None,
        "files": [file_dict(ref, media) for ref in message.files],
    }


def chat_dict(record: ChatRecord, media: ExportMedia | None = None) -> dict:
    """One chat of the JSON export; `settings` as the history stores them (flat keys)."""
    c = record.conversation
    local = {m.id: i + 1 for i, m in enumerate(record.messages)}
    leaf = record.leaf_id()
    return {
        "id": record.uid,
        "title": c.title,
        "created": checked_time(c.created),
        "updated": checked_time(c.updated),
        "settings": json.loads(c.settings.to_json()),
        "folder": record.folder,
        "pinned": c.pinned,
        "leaf": local[leaf] if leaf is not None else None,
        "messages": [message_dict(m, local, media) for m in record.messages],
    }


def json_chunks(records: Iterable[ChatRecord], media: ExportMedia | None = None) -> Iterator[str]:
    """Tailor's JSON export, a chat at a time: `{"format": "tailor-chats", "version": 5, "chats": [...]}`; the
    images and clips as `media` carries them (None: named only)."""
    yield f'{{\n  "format": {json.dumps(FORMAT)},\n  "version": {VERSION},\n  "chats": ['
    first = True
    for record in records:
        text = json.dumps(chat_dict(record, media), sort_keys=True, ensure_ascii=False, indent=2, allow_nan=False)
        # Indented as one member of "chats" (JSON strings hold no raw line breaks, so only layout moves).
        yield ("\n" if first else ",\n") + "    " + text.replace("\n", "\n    ")
        first = False
    yield ("]" if first else "\n  ]") + "\n}\n"


def to_json(records: Iterable[ChatRecord], media: ExportMedia | None = None) -> str:
    """The chats as Tailor's JSON export (see `json_chunks`)."""
    return "".join(json_chunks(records, media))


def display_title(title: str) -> str:
    """A title on one line: control characters and runs of white space become one space."""
    cleaned = "".join(" " if unicodedata.category(ch)[0] in "CZ" else ch for ch in title)
    return " ".join(cleaned.split()) or "Untitled chat"


def meta_line(record: ChatRecord, shown: list[Message]) -> str:
    """The line under a chat's title: its times, how many messages it shows (and holds in all its branches
    when that is more), its folder and pin."""
    c = record.conversation
    count = f"{len(shown)} messages"
    if len(record.messages) > len(shown):
        count += f" ({len(record.messages)} in all its branches)"
    parts = [f"Created {iso_time(c.created)}", f"updated {iso_time(c.updated)}", count]
    if record.folder:
        parts.append(f"in {display_title(record.folder)}")
    if c.pinned:
        parts.append("pinned")
    return " · ".join(parts)


def message_notes(message: Message, versions: dict[int, tuple[int, int]]) -> list[str]:
    """What a message's heading adds: its state when not complete, `version 2 of 3` when it has others."""
    notes = [] if message.state == "complete" else [message.state]
    index, count = versions.get(message.id, (1, 1))
    if count > 1:
        notes.append(f"version {index} of {count}")
    return notes


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>!])")


def image_markdown(ref: ImageRef, media: ExportMedia | None) -> str:
    """An image as Markdown: `![name](chats-media/….png)` linking its file beside the export, or
    `*[image: name]*` where there is none (no folder, or its stored file could not be read)."""
    alt = _MARKDOWN_SPECIAL.sub(r"\\\1", display_title(ref.name))
    link = media.beside(ref) if media is not None else None
    return f"![{alt}]({quote(link)})" if link else f"*\\[image: {alt}\\]*"


def clip_markdown(ref: AudioRef, media: ExportMedia | None) -> str:
    """A clip as Markdown: `[audio: name · 0:12](chats-media/….wav)` linking its file beside the export, or
    `*[audio: name · 0:12]*` where there is none."""
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", f"audio: {display_title(ref.name)} · {clock(ref.seconds)}")
    link = media.beside(ref) if media is not None else None
    return f"[{text}]({quote(link)})" if link else f"*\\[{text}\\]*"


def chat_markdown(record: ChatRecord, media: ExportMedia | None = None) -> str:
    """One chat as Markdown: `# title`, a line of times, the system prompt, then each message of the branch
    it shows under a `### You` / `### Assistant` heading (with `*(version 2 of 3)*` where it has other
    versions); a message's images (image_markdown) and clips (clip_markdown), then its text; a reply's tool steps before its answer;
    reasoning in a collapsed <details> block."""
    c = record.conversation
    shown, versions = record.branch(), record.versions()
    lines = [f"# {display_title(c.title)}", "", f"*{meta_line(record, shown)}*", ""]
    if c.settings.system_prompt:
        fence = fence_for(c.settings.system_prompt)
        lines += ["<details><summary>System prompt</summary>", "", f"{fence}text", c.settings.system_prompt,
                  fence, "", "</details>", ""]
    for message in shown:
        notes = message_notes(message, versions)
        note = f" *({' · '.join(notes)})*" if notes else ""
        lines += [f"### {ROLE_NAMES.get(message.role, message.role)}{note}", ""]
        if message.images:
            lines += [*(image_markdown(ref, media) for ref in message.images), ""]
        if message.clips:
            lines += [*(clip_markdown(ref, media) for ref in message.clips), ""]
        lines += steps_markdown(message.tool_steps)
        if message.reasoning:
            summary = "Thought" + ("" if message.reasoning_closed else " (cut off)")
            lines += [f"<details><summary>{summary}</summary>", "", close_fences(message.reasoning).strip("\n"),
                      "", "</details>", ""]
        # A reply that ended after its calls, or a message of images or clips alone, wrote nothing more.
        if message.content or not (message.tool_steps or message.images or message.clips or message.documents):
            lines += [close_fences(message.content).strip("\n") or "*(empty)*", ""]
        lines += documents_markdown(message.documents, message.files, media)
    return "\n".join(lines)


def documents_markdown(documents: SentDocuments | None, files: tuple[FileRef, ...] = (),
                       media: ExportMedia | None = None) -> list[str]:
    """A message's documents: its attached files (linked where the export wrote them beside it), a line per
    document and per source, then the block as the model read it, folded."""
    if documents is None and not files:
        return []
    lines = [f"- Attached: {_file_link(ref, media)}" for ref in files]
    if documents is None:
        return [*lines, ""]
    lines += [f"- {line}" for line in (*documents.notes, *(s.label for s in documents.sources))]
    fence = fence_for(documents.block)
    return [*lines, "", "<details><summary>Documents as sent</summary>", "", f"{fence}text", documents.block, fence,
            "", "</details>", ""]


def _file_link(ref: FileRef, media: ExportMedia | None) -> str:
    link = media.beside(ref) if media is not None and media.with_files else None
    return f"[{ref.name}]({quote(link)})" if link else ref.name


def to_markdown(records: list[ChatRecord], media: ExportMedia | None = None) -> str:
    """The chats as one Markdown document, separated by rules (images and clips linked as `media` writes them)."""
    return "\n---\n\n".join(chat_markdown(r, media) for r in records)


_UNSAFE = re.compile(r'[\\/:*?"<>|]+')


def safe_filename(title: str, uid: str, ext: str, limit: int = 80) -> str:
    """A file name for one chat: its title without path separators, control characters or characters
    Windows refuses, short enough, never hidden or empty, with the first part of its stable id (two chats
    of the same title do not overwrite each other)."""
    cleaned = _UNSAFE.sub("-", display_title(title)).strip(" .-")[:limit].strip(" .-") or "chat"
    return f"{cleaned}-{uid[:8] or 'chat'}.{ext}"
