"""Chats from Tailor's own JSON export (app/services/transfer/export.py), version 1 to 5, read one at a time.

Version 2 writes `format` and `version` first, so the file is known before its first chat is read.
Version 1 sorted every key, `chats` before them: its chats are skipped once to read what follows,
then read from where they start. A chat is checked field by field as it is read (a message at a
time: a chat of 100,000 messages is never held as JSON objects) and a chat that fails a check is
left out with a line naming it and the field; a damaged file stops the reading (StreamError). A reply's
tool steps (version 3) that fail their checks (tool_steps.py: types, statuses, at most MAX_CALLS calls,
names of at most NAME_LIMIT characters) are left out of that reply alone, and a note says so; the
rest of the chat is imported. A message's images (version 4) are taken into the history's media store as
they are read (import_media.py: embedded, or from the folder beside the export, each checked against its
sha256); one that is missing, refused or not the bytes named is left out of its message, named in a note. Its
audio clips (version 5) likewise, each checked by its WAV header. No Qt here.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

from app.services.documents.errors import DocumentRefused
from app.services.history.records import ROLES, AudioRef, FileRef, ImageRef
from app.services.history.sent_documents import SentDocuments, SentDocumentsError, documents_from_dict
from app.services.history.settings_fields import parse_settings
from app.services.history.store import MESSAGE_STATES, ChatSettings, Conversation
from app.services.history.timestamps import checked_time
from app.services.history.tool_steps import ToolStep, ToolStepsError, steps_from_data
from app.services.media.errors import AudioRefused, ImageRefused
from app.services.transfer.export import FORMAT, VERSION
from app.services.transfer.import_media import ImportMedia
from app.services.transfer.import_parsed import (
    ChatImportError,
    MessageList,
    ParsedChat,
    SkippedChat,
    left_out_images,
    mended_times,
)
from app.services.transfer.json_stream import JsonStream, StreamError

_CHAT_KEYS = ("id", "title", "created", "updated", "settings", "folder", "pinned", "leaf")
NAME_CHARS = 255  # of an image's (a clip's) name, as kept


def tailor_items(stream: JsonStream, reopen: Callable[[int], JsonStream], name: str,
                 media: ImportMedia | None = None) -> Iterator[str | ParsedChat]:
    """"tailor" once the file is known to be a Tailor export of a version this release reads, then each
    chat: a ParsedChat, or a line saying why it was left out. Images are taken in through `media` (None:
    left out, with a note).

    Raises:
        ChatImportError: before anything is yielded: another format, a version unknown or newer.
        StreamError: the file is damaged (before "tailor": it is not known to be an export).
    """
    header: dict[str, object] = {}
    chats_at: int | None = None
    streamed = False
    for key in stream.items():
        if key in ("format", "version"):
            header[key] = stream.value()
        elif key != "chats" or streamed:
            stream.skip()
        elif stream.peek() != "[":
            raise ChatImportError(f'{name}: "chats" must be a list')
        elif len(header) == 2:
            version = _check(header, name)
            yield "tailor"
            yield from _chats(stream, version, media)
            streamed = True
        else:  # version 1: "chats" before "format" and "version"
            chats_at = stream.offset
            _skip_unknown(stream, name)
    stream.expect_end()
    if streamed:
        return
    version = _check(header, name)
    if chats_at is None:
        raise ChatImportError(f'{name}: "chats" must be a list')
    yield "tailor"
    yield from _chats(reopen(chats_at), version, media)


def _skip_unknown(stream: JsonStream, name: str) -> None:
    """Read past chats whose version is not known yet; damage there refuses the file whole."""
    try:
        stream.skip()
    except StreamError as exc:
        raise ChatImportError(
            f"{name} is damaged ({exc}) before its format and version, which an export of version 1 has at its"
            " end: nothing was imported"
        ) from None


def _check(header: dict, name: str) -> int:
    if header.get("format") != FORMAT:
        raise ChatImportError(f'{name} is not a Tailor chat export (no "format": "{FORMAT}")')
    version = header.get("version")
    if not _is_int(version) or version < 1:
        raise ChatImportError(f"{name}: unknown export version {version!r}")
    if version > VERSION:
        raise ChatImportError(
            f"{name} was written by a newer Tailor (export version {version}; this one reads up to {VERSION})"
        )
    return version


def _chats(stream: JsonStream, version: int, media: ImportMedia | None) -> Iterator[str | ParsedChat]:
    for index in stream.elements():
        yield _chat_item(stream, version, index, media)


def _chat_item(stream: JsonStream, version: int, index: int, media: ImportMedia | None) -> str | ParsedChat:
    """Read one chat; a ParsedChat, or the line that says why it is left out (the stream is after it)."""
    if stream.peek() != "{":
        stream.skip()
        return f"Skipped chat {index + 1}: it is not an object"
    data: dict[str, object] = {}
    reading = _Messages(version, media)
    for key in stream.items():
        if key == "messages" and stream.peek() == "[":
            data["messages"] = True
            for i in stream.elements():
                reading.add(stream.value(), i)
        elif key in _CHAT_KEYS:
            data[key] = stream.value()
        else:
            stream.skip()
    title = data.get("title")
    label = f"chat {index + 1}" + (f" ({title!r})" if isinstance(title, str) else "")
    try:
        if reading.problem:
            raise SkippedChat(reading.problem)
        return _parsed(data, reading, version)
    except SkippedChat as exc:
        return f"Skipped {label}: {exc}"


class _Messages:
    """A chat's messages, checked one at a time as they are read; after the first bad one, the rest are
    read past and dropped (the chat is left out whole)."""

    def __init__(self, version: int, media: ImportMedia | None = None):
        self.version, self.media = version, media
        self.messages = MessageList()
        self.problem = ""
        self.now = time.time()  # the time of a message whose own is no time
        self.mended = 0  # messages given `now`
        self.lost_steps: list[str] = []  # why each message's tool steps were left out ("message 3: ...")
        self.lost_images: list[str] = []  # each image left out, named, with why ("message 1: a.png is not ...")
        self.lost_clips: list[str] = []  # each clip left out, likewise
        self.lost_documents: list[str] = []  # each message's documents left out, likewise
        self.lost_files: list[str] = []  # each attached document's original left out, likewise

    def add(self, data: object, index: int) -> None:
        if self.problem:
            return
        try:
            self._add(data, f"message {index + 1}")
        except SkippedChat as exc:
            self.problem, self.messages = str(exc), MessageList()

    def _add(self, data: object, where: str) -> None:
        if not isinstance(data, dict):
            raise SkippedChat(f"{where} must be an object")
        role = _field(data, "role", "str", where)
        if role not in ROLES:
            raise SkippedChat(f"{where}: unknown role {role!r} (expected one of {', '.join(ROLES)})")
        state = _field(data, "state", "str", where)
        if state not in MESSAGE_STATES:
            raise SkippedChat(f"{where}: unknown state {state!r} (expected one of {', '.join(MESSAGE_STATES)})")
        parent = self._parent(data, where)
        created = checked_time(_field(data, "created", "time", where))
        if created is None:
            created, self.mended = self.now, self.mended + 1
        content, stats = _field(data, "content", "str", where), _field(data, "stats", "object or null", where)
        reasoning = _field(data, "reasoning", "str", where)
        closed = _field(data, "reasoning_closed", "bool", where)
        steps = self._steps(data, where)
        # Last, once the message is known to be whole: only then are its images and clips stored.
        self.messages.append(role, content, created, parent, state=state, stats=stats, reasoning=reasoning,
                             reasoning_closed=closed, tool_steps=steps, images=self._images(data, where),
                             clips=self._clips(data, where), documents=self._documents(data, where),
                             files=self._files(data, where))

    def _images(self, data: dict, where: str) -> tuple[ImageRef, ...]:
        """The message's images (none before version 4), each taken into the media store; one that cannot
        be is left out, and why is kept for the chat's note."""
        listed = data.get("images", []) if self.version >= 4 else []
        if not isinstance(listed, list):
            self.lost_images.append(f'{where}: "images" must be a list, not {type(listed).__name__}')
            return ()
        refs = []
        for number, item in enumerate(listed, 1):
            given = item.get("name") if isinstance(item, dict) else None
            name = " ".join(given.split())[:NAME_CHARS] if isinstance(given, str) and given.strip() else f"image {number}"
            try:
                if not isinstance(item, dict):
                    raise ImageRefused(name, "is not an object")
                if self.media is None:
                    raise ImageRefused(name, "was not read (this import keeps no images)")
                if "data" in item:
                    refs.append(self.media.embedded(item["data"], name, item.get("sha256")))
                else:
                    refs.append(self.media.beside(name, item.get("sha256"), item.get("format"), item.get("file")))
            except ImageRefused as exc:
                self.lost_images.append(f"{where}: {exc}")
        return tuple(refs)

    def _clips(self, data: dict, where: str) -> tuple[AudioRef, ...]:
        """The message's audio clips (none before version 5), each taken into the media store; one that cannot
        be is left out, and why is kept for the chat's note."""
        listed = data.get("audio", []) if self.version >= 5 else []
        if not isinstance(listed, list):
            self.lost_clips.append(f'{where}: "audio" must be a list, not {type(listed).__name__}')
            return ()
        refs = []
        for number, item in enumerate(listed, 1):
            given = item.get("name") if isinstance(item, dict) else None
            name = " ".join(given.split())[:NAME_CHARS] if isinstance(given, str) and given.strip() else f"clip {number}"
            try:
                if not isinstance(item, dict):
                    raise AudioRefused(name, "is not an object")
                if self.media is None:
                    raise AudioRefused(name, "was not read (this import keeps no audio)")
                if "data" in item:
                    refs.append(self.media.embedded_clip(item["data"], name, item.get("sha256")))
                else:
                    refs.append(self.media.clip_beside(name, item.get("sha256"), item.get("format"), item.get("file")))
            except AudioRefused as exc:
                self.lost_clips.append(f"{where}: {exc}")
        return tuple(refs)

    def _files(self, data: dict, where: str) -> tuple[FileRef, ...]:
        """The originals of the message's attached documents that the export carries (`--with-files`), each taken
        into the media store; one named only (exported without files) is left out quietly, one that cannot be
        taken is left out and named in the chat's note."""
        listed = data.get("files", []) if self.version >= 6 else []
        if not isinstance(listed, list):
            self.lost_files.append(f'{where}: "files" must be a list, not {type(listed).__name__}')
            return ()
        refs = []
        for number, item in enumerate(listed, 1):
            given = item.get("name") if isinstance(item, dict) else None
            name = " ".join(given.split())[:NAME_CHARS] if isinstance(given, str) and given.strip() else f"file {number}"
            if isinstance(item, dict) and "data" not in item and "file" not in item:
                continue  # named only: the export was made without the files
            try:
                if not isinstance(item, dict):
                    raise DocumentRefused(name, "is not an object")
                if self.media is None:
                    raise DocumentRefused(name, "was not read (this import keeps no files)")
                if "data" in item:
                    refs.append(self.media.embedded_file(item["data"], name, item.get("sha256"), item.get("format")))
                else:
                    refs.append(self.media.file_beside(name, item.get("sha256"), item.get("format"), item.get("file")))
            except DocumentRefused as exc:
                self.lost_files.append(f"{where}: {exc}")
        return tuple(refs)

    def _documents(self, data: dict, where: str) -> SentDocuments | None:
        """The documents the message was sent with (none before version 6); ones that fail their checks are left
        out, and why is kept for the chat's note (the message keeps its text)."""
        found = data.get("documents") if self.version >= 6 else None
        if found is None:
            return None
        try:
            return documents_from_dict(found)
        except SentDocumentsError as exc:
            self.lost_documents.append(f"{where}: {exc}")
            return None

    def _steps(self, data: dict, where: str) -> tuple[ToolStep, ...]:
        """The message's tool steps (none before version 3); steps that fail a check are left out, and why
        is kept for the chat's note."""
        if self.version < 3:
            return ()
        try:
            if "tool_steps" not in data:
                raise ToolStepsError('"tool_steps" is missing')
            return steps_from_data(data["tool_steps"])
        except ToolStepsError as exc:
            self.lost_steps.append(f"{where}: {exc}")
            return ()

    def _parent(self, data: dict, where: str) -> int | None:
        """The number of the message this one follows (version 1: one line, each after the one before)."""
        own = len(self.messages) + 1
        if self.version == 1:
            return own - 1 if own > 1 else None
        if _field(data, "id", "id", where) != own:
            raise SkippedChat(f"{where}: its id is {data['id']}, not {own} (messages are numbered 1, 2, 3... in order)")
        parent = _field(data, "parent", "id or null", where)
        if parent is not None and parent >= own:
            raise SkippedChat(f"{where}: its parent {parent} is not an earlier message")
        return parent


def _parsed(data: dict, reading: _Messages, version: int) -> ParsedChat:
    raw_id = _field(data, "id", "str", "")
    try:
        uid = str(uuid.UUID(raw_id))
    except ValueError:
        raise SkippedChat(f"id {raw_id!r} is not a UUID") from None
    parsed = parse_settings(_field(data, "settings", "object", ""))  # each bad field: its default, and a note
    notes = list(parsed.problems)
    if "messages" not in data:
        raise SkippedChat('"messages" must be a list')
    created, updated = (checked_time(_field(data, key, "time", "")) for key in ("created", "updated"))
    if created is None or updated is None:
        notes.append(mended_times((created is None) + (updated is None), "chat"))
    created = reading.now if created is None else created
    conversation = Conversation(0, _field(data, "title", "str", ""), created,
                                reading.now if updated is None else updated, ChatSettings(**parsed.fields))
    if reading.mended:
        notes.append(mended_times(reading.mended, "message"))
    if reading.lost_steps:
        count = len(reading.lost_steps)
        notes.append(f"the tool steps of {count} message{'' if count == 1 else 's'} could not be read and were left "
                     f"out ({reading.lost_steps[0]}{'; …' if count > 1 else ''})")
    if reading.lost_images:
        notes.append(left_out_images(reading.lost_images))
    if reading.lost_clips:
        notes.append(left_out_images(reading.lost_clips, "audio clip"))
    if reading.lost_files:
        notes.append(left_out_images(reading.lost_files, "attached file"))
    if reading.lost_documents:
        shown = "; ".join(reading.lost_documents[:5]) + ("; …" if len(reading.lost_documents) > 5 else "")
        notes.append(f"the documents of {len(reading.lost_documents)} message(s) could not be imported and were left "
                     f"out ({shown})")
    messages = reading.messages
    if version == 1:
        return ParsedChat(uid, conversation, messages, notes=tuple(notes))
    conversation.pinned = _field(data, "pinned", "bool", "")
    folder = _field(data, "folder", "str or null", "")
    leaf = _field(data, "leaf", "id or null", "")
    if leaf is not None and leaf > len(messages):
        raise SkippedChat(f"its leaf {leaf} is not one of its messages")
    return ParsedChat(uid, conversation, messages, leaf, folder, tuple(notes))


# ---------------------------------------------------------------- fields


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_KINDS: dict[str, Callable[[object], bool]] = {
    "str": lambda v: isinstance(v, str),
    # A time: checked by checked_time (out of range: the import time); null is written for a time that was none.
    "time": lambda v: v is None or (isinstance(v, int | float) and not isinstance(v, bool)),
    "bool": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "object or null": lambda v: v is None or isinstance(v, dict),
    "str or null": lambda v: v is None or isinstance(v, str),
    "id": lambda v: _is_int(v) and v >= 1,
    "id or null": lambda v: v is None or (_is_int(v) and v >= 1),
}
_KIND_NAMES = {"id": "whole number from 1", "id or null": "whole number from 1 or null", "time": "number or null"}



def _field(data: dict, key: str, kind: str, where: str) -> object:
    """`data[key]`, checked to be of `kind`; SkippedChat names the field (after `where`) otherwise."""
    at = f"{where}: " if where else ""
    if key not in data:
        raise SkippedChat(f'{at}"{key}" is missing')
    value = data[key]
    if not _KINDS[kind](value):
        raise SkippedChat(f'{at}"{key}" must be a {_KIND_NAMES.get(kind, kind)}, not {type(value).__name__}')
    return value


__all__ = ["ChatImportError", "StreamError", "tailor_items"]
