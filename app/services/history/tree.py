"""A chat's messages as a tree: the branch it shows, the versions of each message, moving between them.

Every message names the one it follows (`parent_id`, None for a first message) and always comes
after it (a larger id: inserted later, imports in order), so a branch sorted by id is in reading
order and the newest message under one is its deepest. A chat shows the branch that ends at its
`leaf_id`; when that is unset or gone, the branch of its newest message. Plain SQL on one
connection: store.py wraps each call in its transaction.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict

from app.services.history.message_media import attach_chat_media
from app.services.history.records import MESSAGE_COLUMNS, Message, Version, message_of
from app.services.history.search import WRITTEN_AND_THOUGHT_KEYS, steps_match

# The newest message under (and including) ?1: the newest child, its newest child, and so on. Each
# row's id is larger than the one before, so the largest is where the branch ends.
_NEWEST_UNDER = """
WITH RECURSIVE down(id) AS (
    SELECT ?1
    UNION ALL
    SELECT (SELECT max(c.id) FROM messages c WHERE c.parent_id = down.id) FROM down WHERE down.id IS NOT NULL
)
SELECT max(id) FROM down
"""

# Every message from ?1 up to its chat's first.
_UP_FROM = """
WITH RECURSIVE up(id) AS (
    SELECT ?1
    UNION ALL
    SELECT m.parent_id FROM messages m JOIN up ON m.id = up.id WHERE m.parent_id IS NOT NULL
)
"""


def leaf_of(db: sqlite3.Connection, conversation_id: int) -> int | None:
    """The message the chat's branch ends at (None: the chat has no messages)."""
    row = db.execute(
        "SELECT m.id FROM conversations c JOIN messages m ON m.id = c.leaf_id AND m.conversation_id = c.id"
        " WHERE c.id = ?", (conversation_id,),
    ).fetchone()
    if row is not None:
        return row[0]
    return db.execute("SELECT max(id) FROM messages WHERE conversation_id = ?", (conversation_id,)).fetchone()[0]


def branch(db: sqlite3.Connection, conversation_id: int, leaf: int | None = None) -> list[Message]:
    """The messages from the chat's first to `leaf` (default: the branch it shows), in reading order, with
    their images."""
    leaf = leaf if leaf is not None else leaf_of(db, conversation_id)
    if leaf is None:
        return []
    rows = db.execute(f"{_UP_FROM} SELECT {MESSAGE_COLUMNS} FROM messages WHERE id IN (SELECT id FROM up) ORDER BY id",
                      (leaf,))
    return attach_chat_media(db, conversation_id, [message_of(row) for row in rows])


def newest_under(db: sqlite3.Connection, message_id: int) -> int:
    """Where the newest branch through `message_id` ends (itself when nothing follows it)."""
    return db.execute(_NEWEST_UNDER, (message_id,)).fetchone()[0]


def show_branch_of(db: sqlite3.Connection, message_id: int) -> int | None:
    """Make the chat of `message_id` show the newest branch through it; the chat's id (None: no such message)."""
    row = db.execute("SELECT conversation_id FROM messages WHERE id = ?", (message_id,)).fetchone()
    if row is None:
        return None
    db.execute("UPDATE conversations SET leaf_id = ? WHERE id = ?", (newest_under(db, message_id), row[0]))
    return row[0]


def versions(db: sqlite3.Connection, conversation_id: int) -> dict[int, Version]:
    """Every message's place among its versions (the messages under the same parent), by id."""
    siblings: dict[int | None, list[int]] = defaultdict(list)
    for mid, parent in db.execute("SELECT id, parent_id FROM messages WHERE conversation_id = ? ORDER BY id",
                                  (conversation_id,)):
        siblings[parent].append(mid)
    found: dict[int, Version] = {}
    for ids in siblings.values():
        group = tuple(ids)
        for i, mid in enumerate(group):
            found[mid] = Version(i + 1, len(group), group)
    return found


def delete_subtree(db: sqlite3.Connection, message_id: int) -> None:
    """Delete a message and every message under it; a chat that showed one of them shows the newest branch
    left under its parent (or its newest message)."""
    row = db.execute("SELECT conversation_id, parent_id FROM messages WHERE id = ?", (message_id,)).fetchone()
    if row is None:
        return
    conversation_id, parent = row
    db.execute("DELETE FROM messages WHERE id = ?", (message_id,))  # ON DELETE CASCADE takes the branch under it
    if _leaf_gone(db, conversation_id):
        leaf = newest_under(db, parent) if parent is not None else None
        db.execute("UPDATE conversations SET leaf_id = ? WHERE id = ?", (leaf, conversation_id))


def _leaf_gone(db: sqlite3.Connection, conversation_id: int) -> bool:
    """Whether the chat's stored leaf is set but no longer one of its messages."""
    row = db.execute(
        "SELECT c.leaf_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = c.leaf_id)"
        " FROM conversations c WHERE c.id = ?", (conversation_id,),
    ).fetchone()
    return bool(row and row[0])


def first_hit(db: sqlite3.Connection, conversation_id: int, pattern: str, json_pattern: str) -> int | None:
    """The oldest message of the chat, in any branch, whose text, reasoning or tool steps (their texts and
    reasoning, their calls' names and arguments: search.py) match LIKE `pattern` (escaped with '\\';
    `json_pattern`: the same written as JSON, search.json_like_pattern)."""
    row = db.execute(
        "SELECT min(id) FROM messages WHERE conversation_id = ?1 AND (content LIKE ?2 ESCAPE '\\'"
        f" OR reasoning LIKE ?2 ESCAPE '\\' OR {steps_match('tool_steps', '?2', '?3', WRITTEN_AND_THOUGHT_KEYS)})",
        (conversation_id, pattern, json_pattern),
    ).fetchone()
    return row[0] if row else None
