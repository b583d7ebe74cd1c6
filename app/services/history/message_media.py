"""The images and audio clips of stored messages (`message_media`, schema steps 8 and 9): written with their
message, read for a whole chat at once, and the hashes a deletion leaves unnamed, so that the media store
collects only then.

A row's `kind` says what it is: an image (with its full size), an audio clip (with its length in seconds) or
a document's original (kind 'document', issue 36). A message's images come first in `position`, then its
clips, then its documents. A load reads its messages' media with one query,
not one per message: the rows of the chat's messages (through its index on conversation_id), kept for the
messages loaded. A chat without media costs one index probe per message, far less than reading the messages
themselves. Plain SQL on one connection: store.py and tree.py run these inside their reads and transactions.
"""

from __future__ import annotations

import logging
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Sequence

from app.services.history.records import AudioRef, FileRef, ImageRef, Message

IMAGE, AUDIO, DOCUMENT = "image", "audio", "document"
KINDS = (IMAGE, AUDIO, DOCUMENT)

_COLUMNS = "mm.message_id, mm.kind, mm.sha256, mm.format, mm.name, mm.width, mm.height, mm.seconds"

log = logging.getLogger(__name__)


def attach_chat_media(db: sqlite3.Connection, conversation_id: int, messages: list[Message]) -> list[Message]:
    """`messages` (of one chat) with their `images` and `clips` filled in, by one query; returns `messages`."""
    if not messages:
        return messages
    rows = db.execute(
        f"SELECT {_COLUMNS} FROM messages m JOIN message_media mm ON mm.message_id = m.id"
        " WHERE m.conversation_id = ? ORDER BY mm.message_id, mm.position", (conversation_id,),
    )
    return _attach(rows, messages)


def attach_message_media(db: sqlite3.Connection, message: Message) -> Message:
    """`message` with its `images` and `clips` filled in; returns it."""
    rows = db.execute(f"SELECT {_COLUMNS} FROM message_media mm WHERE mm.message_id = ? ORDER BY mm.position",
                      (message.id,))
    _attach(rows, [message])
    return message


def _attach(rows: Iterable[tuple], messages: list[Message]) -> list[Message]:
    images: dict[int, list[ImageRef]] = defaultdict(list)
    clips: dict[int, list[AudioRef]] = defaultdict(list)
    files: dict[int, list[FileRef]] = defaultdict(list)
    for message_id, kind, sha256, fmt, name, width, height, seconds in rows:
        if kind == AUDIO:
            clips[message_id].append(AudioRef(sha256, fmt, name, float(seconds or 0.0)))
        elif kind == IMAGE:
            images[message_id].append(ImageRef(sha256, fmt, name, width, height))
        elif kind == DOCUMENT:
            files[message_id].append(FileRef(sha256, fmt, name))
        else:  # written by hand, or damaged: the message keeps the rest
            log.warning("Message %s names media of an unknown kind %r: it is shown without it", message_id, kind)
    if images or clips or files:
        for message in messages:
            if message.id in images:
                message.images = tuple(images[message.id])
            if message.id in clips:
                message.clips = tuple(clips[message.id])
            if message.id in files:
                message.files = tuple(files[message.id])
    return messages


def insert_media(db: sqlite3.Connection, message_id: int, images: Sequence[ImageRef],
                  clips: Sequence[AudioRef] = (), files: Sequence[FileRef] = ()) -> None:
    """Name `images`, then `clips`, then `files`, as the media of `message_id`, in their order (their files are
    in the store already)."""
    rows = [(message_id, i, IMAGE, ref.sha256, ref.format, ref.name, ref.width, ref.height, None)
            for i, ref in enumerate(images)]
    rows += [(message_id, len(images) + i, AUDIO, ref.sha256, ref.format, ref.name, 0, 0, ref.seconds)
             for i, ref in enumerate(clips)]
    rows += [(message_id, len(images) + len(clips) + i, DOCUMENT, ref.sha256, ref.format, ref.name, 0, 0, None)
             for i, ref in enumerate(files)]
    db.executemany(
        "INSERT INTO message_media (message_id, position, kind, sha256, format, name, width, height, seconds)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows,
    )


def chat_hashes(db: sqlite3.Connection, conversation_id: int) -> set[str]:
    """The hashes the messages of a chat (every branch) name."""
    rows = db.execute("SELECT DISTINCT mm.sha256 FROM messages m JOIN message_media mm ON mm.message_id = m.id"
                      " WHERE m.conversation_id = ?", (conversation_id,))
    return {row[0] for row in rows}


def unnamed(db: sqlite3.Connection, hashes: Iterable[str]) -> set[str]:
    """Those of `hashes` that no message names any more (each one probe of the index on sha256)."""
    return {h for h in hashes
            if db.execute("SELECT 1 FROM message_media WHERE sha256 = ? LIMIT 1", (h,)).fetchone() is None}


def named_hashes(db: sqlite3.Connection) -> set[str]:
    """Every hash a message of the history names: what the media store's collect must keep."""
    return {row[0] for row in db.execute("SELECT DISTINCT sha256 FROM message_media")}
