"""Chats into the history from Tailor's JSON export (app/services/transfer/import_tailor.py) or ChatGPT's
conversations.json (app/services/transfer/import_chatgpt.py), told apart by their shape, streamed.

The file is read a piece at a time (app/services/transfer/json_stream.py) and each chat is checked, then added
in its own transaction as soon as it is read, so memory holds one chat, not the file, and never half a
chat is written. What is refused before anything is written: a file over MAX_IMPORT_BYTES, one that
is not JSON, another format, a newer export version. A chat that fails a check is left out with a line
saying why; one whose stable id is there already is skipped (importing a file twice adds its chats
once); the chats already in the history are never touched. A file damaged part way (cut off, invalid
JSON, not UTF-8) keeps the chats before the damage, and `ImportResult.error` says where it broke and
how many were imported. The window runs `import_file` on a thread of its own, with its own ChatStore
on the same file, and follows it with `on_progress` and stops it with `cancelled`. The chats' images go
into the history's media store as they are read (import_media.py), just before their chat is saved; one
that cannot be read is left out of its message and named in the chat's note. No Qt here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

from app.services.history.problems import StoreUnwritableError
from app.services.history.store import ChatStore
from app.services.transfer.import_chatgpt import ReadConversation, chat_of, label, read_conversation
from app.services.transfer.import_media import ImportMedia
from app.services.transfer.import_parsed import ChatImportError, ParsedChat, SkippedChat
from app.services.transfer.import_tailor import tailor_items
from app.services.transfer.json_stream import JsonStream, StreamError
from models.formats.errors import InvalidModelFile
from models.formats.local_file import open_regular_file

# Memory does not grow with the file (one chat at a time), so this is not a memory limit: it stops a
# file that is almost surely no chat export (a disk image picked by mistake) before a minute is spent
# reading it. 1 GiB is years of chats; the bench imports 200 MB in about 10 s on two cores (20 MB/s).
MAX_IMPORT_BYTES = 1 << 30
PROGRESS_CHATS = 25  # progress is reported at least every this many chats, and every 1% of the file


class _Abort(Exception):
    """Internal: the first conversation of a list is no ChatGPT conversation."""


@dataclass(slots=True, frozen=True)
class ImportProgress:
    bytes_done: int  # of the file, read so far
    bytes_total: int
    chats_done: int  # chats read so far: imported, already there, or left out


@dataclass(slots=True)
class ImportResult:
    imported: list[str] = field(default_factory=list)  # titles of the chats added
    skipped: list[str] = field(default_factory=list)  # titles of those already there
    problems: list[str] = field(default_factory=list)  # a line for each chat of the file that could not be read
    notes: list[str] = field(default_factory=list)  # a line for each chat imported with something mended
    source: str = "tailor"  # or "chatgpt"
    error: str | None = None  # where the file broke, when it did: the chats before it are imported
    cancelled: bool = False  # stopped by `cancelled()`: the chats imported before stay


def import_file(
    store: ChatStore, path: Path, on_progress: Callable[[ImportProgress], None] | None = None,
    cancelled: Callable[[], bool] | None = None, limit: int = MAX_IMPORT_BYTES,
) -> ImportResult:
    """Import the chats of a Tailor export or of ChatGPT's conversations.json, a chat at a time.

    `on_progress` is called at the start, every PROGRESS_CHATS chats or 1% of the file, and at the end;
    `cancelled()` is asked after each chat and True stops there (`ImportResult.cancelled`).

    Raises:
        ChatImportError: nothing was written: the file is missing, too large, not JSON, not an export, or
            of a newer version (the message says which, in one line).
    """
    name = str(path)
    file = _open(path, limit)
    with file:
        total = os.fstat(file.fileno()).st_size
        progress = _Progress(on_progress, total, file)
        progress.report(0)
        items = _items(JsonStream(file), file, name, ImportMedia(store.media, Path(path)))
        result = ImportResult(source=_read(lambda: _kind(items, name), path))
        try:
            _run(store, items, result, progress, cancelled, name)
        except OSError as exc:  # the disk or the file failed while it was read: the chats before it stay
            saved = len(result.imported)
            result.error = (f"Cannot read {path} any further ({exc.strerror or exc}); {saved} "
                            f"chat{'' if saved == 1 else 's'} {'was' if saved == 1 else 'were'} imported before it")
    return result


def probe_file(path: Path, limit: int = MAX_IMPORT_BYTES) -> str:
    """What `import_file` would import ("tailor" or "chatgpt"), read only as far as it takes to know (a
    version 1 export: to its end); nothing is written.

    Raises:
        ChatImportError: as `import_file` does before it writes anything.
    """
    with _open(path, limit) as file:
        items = _items(JsonStream(file), file, str(path))
        try:
            return _read(lambda: _kind(items, str(path)), path)
        finally:
            items.close()


def _kind(items: Iterator[str | ParsedChat], name: str) -> str:
    """The first of `items`: the file's kind, known (or refused) before anything is written."""
    try:
        return next(items)
    except StreamError as exc:
        raise ChatImportError(f"{name} is not a Tailor chat export: {exc}") from None
    except _Abort:
        raise ChatImportError(f"{name} is not a Tailor chat export (nor ChatGPT's conversations.json)") from None


def import_chats(store: ChatStore, chats: Iterable[ParsedChat], problems: list[str] | None = None) -> ImportResult:
    """Add `chats` to `store`, each in one transaction; those whose id is there already are skipped."""
    result = ImportResult(problems=list(problems or []))
    folders = _Folders(store)
    for number, chat in enumerate(chats, 1):
        _record(result, chat, add_chat(store, chat, folders), f"chat {number}")
    return result


def _run(store: ChatStore, items: Iterator[str | ParsedChat], result: ImportResult, progress: _Progress,
         cancelled: Callable[[], bool] | None, name: str) -> None:
    folders = _Folders(store)
    done = 0
    try:
        for item in items:
            done += 1
            if isinstance(item, str):
                result.problems.append(item)
            else:
                what = "conversation" if result.source == "chatgpt" else "chat"
                _record(result, item, add_chat(store, item, folders), f"{what} {done}")
            item = None  # not held while the next chat is read: one chat in memory at a time
            progress.report(done)
            if cancelled is not None and cancelled():
                result.cancelled = True
                break
    except StreamError as exc:
        result.error = _broken(name, result, exc, done)
    except StoreUnwritableError as exc:  # the disk filled (or the history became read-only) part way
        saved = len(result.imported)
        result.error = (f"The import stopped at {'conversation' if result.source == 'chatgpt' else 'chat'} {done}: "
                        f"{exc.problem.reason} ({exc.problem.detail}). {saved} chat{'' if saved == 1 else 's'} "
                        f"{'was' if saved == 1 else 'were'} saved before it; importing the file again adds the rest "
                        "(those saved are not added twice).")
    progress.report(done, final=True)


def _record(result: ImportResult, chat: ParsedChat, outcome: str, label: str) -> None:
    if outcome == "added":
        result.imported.append(chat.conversation.title)
        if chat.notes:
            result.notes.append(f"Mended {label} ({chat.conversation.title!r}): {'; '.join(chat.notes)}")
    elif outcome == "there":
        result.skipped.append(chat.conversation.title)
    else:
        result.problems.append(f"Skipped {label} ({chat.conversation.title!r}): {outcome}")


def _broken(name: str, result: ImportResult, exc: StreamError, done: int) -> str:
    what = "conversation" if result.source == "chatgpt" else "chat"
    imported = f"{len(result.imported)} chat(s) were imported"
    if exc.reason.startswith("text after the end"):
        return f"{name} has {exc.reason} at byte {exc.offset:,}; its {imported}"
    return f"{name} breaks in {what} {done + 1} at byte {exc.offset:,} ({exc.reason}); the {imported} before it"


# ---------------------------------------------------------------- reading


def _open(path: Path, limit: int) -> BinaryIO:
    """The file, opened for reading if it is a regular file no larger than `limit` (a FIFO would block the
    read, a device never end); ChatImportError otherwise, at once."""
    try:
        file = open_regular_file(path)
    except InvalidModelFile as exc:
        raise ChatImportError(f"Cannot read {path}: it {exc.problem}" if exc.problem.startswith("is ")
                              else f"Cannot read {path}: {exc.problem}") from None
    size = os.fstat(file.fileno()).st_size
    if size > limit:
        file.close()
        raise ChatImportError(
            f"{path} is {size / (1 << 30):.1f} GiB; an export larger than {limit / (1 << 30):.0f} GiB is refused"
        )
    return file


def _read(first: Callable[[], str], path: Path) -> str:
    """`first()`, the file's kind; a read that fails (an I/O error: /proc/self/mem) is one line."""
    try:
        return first()
    except OSError as exc:
        raise ChatImportError(f"Cannot read {path}: {exc.strerror or exc}") from None


def _items(stream: JsonStream, file: BinaryIO, name: str, media: ImportMedia | None = None,
           ) -> Iterator[str | ParsedChat]:
    """The file's kind ("tailor" or "chatgpt"), then its chats (a ParsedChat, or a line for one left out), their
    images taken into the media store through `media` (None, as for a probe: none is)."""
    first = stream.peek()
    if first == "":
        raise ChatImportError(f"{name} is not a Tailor chat export: it is empty")
    if first == "{":
        yield from tailor_items(stream, lambda at: _reopen(file, at), name, media)
    elif first == "[":
        yield from _chatgpt_items(stream, media)
    else:
        stream.value()  # JSON or not, it is no export: say what is wrong with it when it is not JSON
        raise ChatImportError(f"{name} is not a Tailor chat export")


def _reopen(file: BinaryIO, offset: int) -> JsonStream:
    file.seek(offset)
    return JsonStream(file, start=offset)


def _chatgpt_items(stream: JsonStream, media: ImportMedia | None) -> Iterator[str | ParsedChat]:
    indexes = stream.elements()
    if next(indexes, None) is None:
        yield "chatgpt"  # an empty list: ChatGPT's export of no conversations
        stream.expect_end()
        return
    found = ReadConversation()
    damage = None
    try:
        read_conversation(stream, found, media)  # a mapping's images are stored only in a ChatGPT export
    except StreamError as exc:
        damage = exc
    if not found.has_mapping:  # no mapping seen before it ended or broke: not ChatGPT's
        if damage is not None:
            raise damage
        raise _Abort
    yield "chatgpt"
    if damage is not None:
        raise damage
    first, found = _chatgpt_chat(found, 0), None  # not held while the others are read
    yield first
    first = None
    for index in indexes:
        yield _chatgpt_chat(read_conversation(stream, media=media), index)
    stream.expect_end()


def _chatgpt_chat(read: ReadConversation, index: int) -> str | ParsedChat:
    try:
        return chat_of(read)
    except SkippedChat as exc:
        return f"Skipped {label(read, index)}: {exc}"


# ---------------------------------------------------------------- writing


class _Folders:
    """The history's folders by name (as SQLite's NOCASE compares them), created when a chat needs one."""

    def __init__(self, store: ChatStore):
        self._store = store
        self._ids = {folder_key(f.name): f.id for f in store.list_folders()}

    def id_of(self, name: str) -> int:
        key = folder_key(name)
        if key not in self._ids:
            self._ids[key] = self._store.create_folder(name).id
        return self._ids[key]


def folder_key(name: str) -> str:
    """A folder's name as the history compares names: one line, trimmed, ASCII letters in any case (NOCASE)."""
    name = " ".join(name.split())
    return "".join(ch.lower() if ch.isascii() else ch for ch in name)


def add_chat(store: ChatStore, chat: ParsedChat, folders: _Folders) -> str:
    """Add one chat in one transaction: "added", "there" (its id is in the history already), or why it
    could not be added."""
    if store.find_conversation_by_uid(chat.uid) is not None:
        return "there"
    folder_id = None
    if chat.folder is not None:
        try:
            folder_id = folders.id_of(chat.folder)
        except ValueError as exc:
            return f"its folder {chat.folder!r}: {exc}"
    cid = store.insert_conversation(replace(chat.conversation, folder_id=folder_id), chat.messages, chat.uid,
                                    chat.leaf)
    if cid is None:
        return "there"
    return "added"


class _Progress:
    """Calls `report` at the start, every PROGRESS_CHATS chats or 1% of the file, and at the end. The bytes
    done are those read from the file (the reader is at most a chunk behind)."""

    def __init__(self, report: Callable[[ImportProgress], None] | None, total: int, file: BinaryIO):
        self._report, self._total, self._file = report, total, file
        self._bytes, self._chats = -1, 0

    def report(self, chats: int, final: bool = False) -> None:
        if self._report is None:
            return
        done = min(self._file.tell(), self._total) if self._bytes >= 0 else 0
        if final or self._bytes < 0 or chats - self._chats >= PROGRESS_CHATS or done - self._bytes >= self._total / 100:
            self._bytes, self._chats = done, chats
            self._report(ImportProgress(done, self._total, chats))


__all__ = ["MAX_IMPORT_BYTES", "ChatImportError", "ImportProgress", "ImportResult", "ParsedChat", "add_chat",
           "folder_key", "import_chats", "import_file", "probe_file"]
