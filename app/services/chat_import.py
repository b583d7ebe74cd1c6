"""Chats into the history from Tailor's JSON export (app/services/chat_export.py), or from ChatGPT's
conversations.json (app/services/chat_import_chatgpt.py), told apart by their shape.

The whole file is read and checked before anything is written: a bad file (too large, not JSON,
another format or a newer version, a message of an unknown role...) is refused with one line saying
what and where, and the history is left as it was. Each chat is then added in one transaction, so
never half a chat; a chat whose stable id is there already is skipped, so importing a file twice
adds its chats once. No Qt here.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from app.services.chat_export import FORMAT, VERSION
from app.services.chat_import_chatgpt import looks_like_chatgpt, parse_chatgpt
from app.services.store import MESSAGE_STATES, ChatSettings, ChatStore, Conversation, Message
from app.services.store_records import ROLES

MAX_IMPORT_BYTES = 1 << 30  # 1 GiB: a history of years; anything larger is refused before reading


class ChatImportError(ValueError):
    """A file that cannot be imported; one line for the user."""


@dataclass(slots=True, frozen=True)
class ParsedChat:
    uid: str
    conversation: Conversation
    messages: list[Message]


@dataclass(slots=True, frozen=True)
class ReadChats:
    """What a file holds: the chats that can be imported, and a line for each one left out (ChatGPT's)."""

    chats: list[ParsedChat]
    problems: list[str] = field(default_factory=list)
    source: str = "tailor"  # or "chatgpt"


@dataclass(slots=True)
class ImportResult:
    imported: list[str] = field(default_factory=list)  # titles of the chats added
    skipped: list[str] = field(default_factory=list)  # titles of those already there
    problems: list[str] = field(default_factory=list)  # chats of the file that could not be read


def read_export(path: Path, limit: int = MAX_IMPORT_BYTES) -> ReadChats:
    """Read and check a Tailor JSON export, or ChatGPT's conversations.json; nothing is written.

    Raises:
        ChatImportError: the file is missing, too large, or not a valid export (the message says why).
    """
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise ChatImportError(f"Cannot read {path}: {exc.strerror or exc}") from None
    if size > limit:
        raise ChatImportError(
            f"{path} is {size / (1 << 30):.1f} GiB; an export larger than {limit / (1 << 30):.0f} GiB is refused"
        )
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise ChatImportError(f"Cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ChatImportError(f"{path} is not a Tailor chat export: not UTF-8 text (byte {exc.start})") from None
    return parse_file_text(text, str(path))


def parse_file_text(text: str, name: str = "the file") -> ReadChats:
    """The chats of a Tailor export or of ChatGPT's conversations.json (told apart by their shape)."""
    document = _load_json(text, name)
    if looks_like_chatgpt(document):
        found = parse_chatgpt(document)
        return ReadChats([ParsedChat(*chat) for chat in found.chats], found.problems, "chatgpt")
    return ReadChats(_tailor_chats(document, name))


def parse_export(text: str, name: str = "the file") -> list[ParsedChat]:
    """The chats of a Tailor export's text. Raises ChatImportError naming `name` and the bad field."""
    return _tailor_chats(_load_json(text, name), name)


def _load_json(text: str, name: str) -> object:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ChatImportError(
            f"{name} is not a Tailor chat export: invalid JSON at line {exc.lineno} column {exc.colno} ({exc.msg})"
        ) from None
    except RecursionError:
        raise ChatImportError(f"{name} is not a Tailor chat export: nested too deeply") from None
    return document


def _tailor_chats(document: object, name: str) -> list[ParsedChat]:
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ChatImportError(f'{name} is not a Tailor chat export (no "format": "{FORMAT}")')
    version = document.get("version")
    if not _is_int(version) or version < 1:
        raise ChatImportError(f"{name}: unknown export version {version!r}")
    if version > VERSION:
        raise ChatImportError(
            f"{name} was written by a newer Tailor (export version {version}; this one reads up to {VERSION})"
        )
    chats = document.get("chats")
    if not isinstance(chats, list):
        raise ChatImportError(f'{name}: "chats" must be a list')
    parsed = [_chat(chat, f"{name}: chat {i + 1}") for i, chat in enumerate(chats)]
    seen: set[str] = set()
    for i, chat in enumerate(parsed):
        if chat.uid in seen:
            raise ChatImportError(f"{name}: chat {i + 1}: id {chat.uid} appears twice")
        seen.add(chat.uid)
    return parsed


def import_chats(store: ChatStore, chats: list[ParsedChat], problems: list[str] | None = None) -> ImportResult:
    """Add `chats` to `store`, each in one transaction; those whose id is there already are skipped."""
    result = ImportResult(problems=list(problems or []))
    for chat in chats:
        added = store.insert_conversation(chat.conversation, chat.messages, chat.uid)
        (result.imported if added is not None else result.skipped).append(chat.conversation.title)
    return result


def import_file(store: ChatStore, path: Path, limit: int = MAX_IMPORT_BYTES) -> ImportResult:
    """Check the whole file, then import its chats (see `read_export` and `import_chats`)."""
    found = read_export(path, limit)
    return import_chats(store, found.chats, found.problems)


# ---------------------------------------------------------------- checking one chat


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _field(data: dict, key: str, kind: str, where: str) -> object:
    """`data[key]`, checked to be a `kind` (str, number, bool, object, list)."""
    if key not in data:
        raise ChatImportError(f'{where}: "{key}" is missing')
    value = data[key]
    ok = {
        "str": isinstance(value, str),
        "number": _is_number(value),
        "bool": isinstance(value, bool),
        "object": isinstance(value, dict),
        "list": isinstance(value, list),
        "object or null": value is None or isinstance(value, dict),
    }[kind]
    if not ok:
        raise ChatImportError(f'{where}: "{key}" must be a {kind}, not {type(value).__name__}')
    return value


def _chat(data: object, where: str) -> ParsedChat:
    if not isinstance(data, dict):
        raise ChatImportError(f"{where} must be an object")
    raw_id = _field(data, "id", "str", where)
    try:
        uid = str(uuid.UUID(raw_id))
    except ValueError:
        raise ChatImportError(f"{where}: id {raw_id!r} is not a UUID") from None
    title = _field(data, "title", "str", where)
    where = f"{where} ({title!r})"
    settings_data = _field(data, "settings", "object", where)
    try:
        settings = ChatSettings.from_json(json.dumps(settings_data))
    except (TypeError, ValueError) as exc:
        raise ChatImportError(f"{where}: bad settings ({exc})") from None
    conversation = Conversation(
        0, title, _field(data, "created", "number", where), _field(data, "updated", "number", where), settings
    )
    messages = [_message(m, f"{where}: message {i + 1}") for i, m in enumerate(_field(data, "messages", "list", where))]
    return ParsedChat(uid, conversation, messages)


def _message(data: object, where: str) -> Message:
    if not isinstance(data, dict):
        raise ChatImportError(f"{where} must be an object")
    role = _field(data, "role", "str", where)
    if role not in ROLES:
        raise ChatImportError(f"{where}: unknown role {role!r} (expected one of {', '.join(ROLES)})")
    state = _field(data, "state", "str", where)
    if state not in MESSAGE_STATES:
        raise ChatImportError(f"{where}: unknown state {state!r} (expected one of {', '.join(MESSAGE_STATES)})")
    return Message(
        0, 0, role, _field(data, "content", "str", where), state, _field(data, "stats", "object or null", where),
        _field(data, "created", "number", where), _field(data, "reasoning", "str", where),
        _field(data, "reasoning_closed", "bool", where),
    )
