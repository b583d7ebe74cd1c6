"""The images of stored messages (`message_media`, schema step 8): written with their message, read for a
whole chat at once, and the hashes a deletion leaves unnamed, so that the media store collects only then.

A load reads its messages' images with one query, not one per message: the rows of the chat's messages
(through its index on conversation_id), kept for the messages loaded. A chat without images costs one
index probe per message, far less than reading the messages themselves. Plain SQL on one connection:
store.py and tree.py run these inside their reads and transactions.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Sequence

from app.services.history.records import ImageRef, Message

_COLUMNS = "mm.message_id, mm.sha256, mm.format, mm.name, mm.width, mm.height"


def attach_chat_images(db: sqlite3.Connection, conversation_id: int, messages: list[Message]) -> list[Message]:
    """`messages` (of one chat) with their `images` filled in, by one query; returns `messages`."""
    if not messages:
        return messages
    rows = db.execute(
        f"SELECT {_COLUMNS} FROM messages m JOIN message_media mm ON mm.message_id = m.id"
        " WHERE m.conversation_id = ? ORDER BY mm.message_id, mm.position", (conversation_id,),
    )
    return _attach(rows, messages)


def attach_message_images(db: sqlite3.Connection, message: Message) -> Message:
    """`message` with its `images` filled in; returns it."""
    rows = db.execute(f"SELECT {_COLUMNS} FROM message_media mm WHERE mm.message_id = ? ORDER BY mm.position",
                      (message.id,))
    _attach(rows, [message])
    return message


def _attach(rows: Iterable[tuple], messages: list[Message]) -> list[Message]:
    found: dict[int, list[ImageRef]] = defaultdict(list)
    for message_id, *fields in rows:
        found[message_id].append(ImageRef(*fields))
    if found:
        for message in messages:
            if message.id in found:
                message.images = tuple(found[message.id])
    return messages


def insert_images(db: sqlite3.Connection, message_id: int, images: Sequence[ImageRef]) -> None:
    """Name `images` as the images of `message_id`, in their order (their files are in the store already)."""
    db.executemany(
        "INSERT INTO message_media (message_id, position, sha256, format, name, width, height)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(message_id, i, ref.sha256, ref.format, ref.name, ref.width, ref.height) for i, ref in enumerate(images)],
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
