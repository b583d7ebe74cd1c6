"""The chat history's schema, versioned with `PRAGMA user_version` and upgraded one step at a time.

Each step runs in one transaction together with its version bump (SQLite's DDL is
transactional), so a crash leaves the file at the old version or the new one, never between.
Earlier versions committed each statement of a step on its own, and a crash there left files
half-upgraded ("table presets already exists", "duplicate column name: settings" on every
later start). So every step is idempotent: it checks what is already there and does the rest,
which finishes a half-done step of such a file.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable

from app.services.history.problems import StoreTooNewError
from app.services.history.records import DEFAULT_PRESET, preset_row

log = logging.getLogger(__name__)

# Never change what a released step creates; add a step.


def _v1_initial(db: sqlite3.Connection) -> list[str]:
    found = _create(
        db,
        "conversations",
        """CREATE TABLE conversations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            title TEXT NOT NULL,
            created REAL NOT NULL,
            updated REAL NOT NULL
        )""",
    )
    found += _create(
        db,
        "messages",
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
            content TEXT NOT NULL,
            state TEXT NOT NULL,
            created REAL NOT NULL
        )""",
    )
    found += _create(db, "messages_by_conversation", "CREATE INDEX messages_by_conversation ON messages(conversation_id, id)")
    return found


def _v2_settings_and_stats(db: sqlite3.Connection) -> list[str]:
    found = _add_column(db, "conversations", "settings", "TEXT NOT NULL DEFAULT '{}'")
    found += _add_column(db, "messages", "stats", "TEXT")
    found += _create(db, "conversations_by_updated", "CREATE INDEX conversations_by_updated ON conversations(updated DESC)")
    return found


def _v3_presets(db: sqlite3.Connection) -> list[str]:
    found = _create(
        db, "presets", "CREATE TABLE presets (name TEXT PRIMARY KEY, settings TEXT NOT NULL, pinned INTEGER NOT NULL)"
    )
    # A half-done step may have added the default already: OR IGNORE never adds it twice.
    db.execute("INSERT OR IGNORE INTO presets VALUES (?, ?, ?)", preset_row(DEFAULT_PRESET))
    return found


def _v4_reasoning(db: sqlite3.Connection) -> list[str]:
    # A reasoning model's thoughts, apart from its answer (`content`), and whether they were cut off
    # (the reply ended while it still thought). Replies of older files thought nothing: '' and 1.
    found = _add_column(db, "messages", "reasoning", "TEXT NOT NULL DEFAULT ''")
    found += _add_column(db, "messages", "reasoning_closed", "INTEGER NOT NULL DEFAULT 1")
    return found


# A random (version 4) UUID in SQL, for the rows the trigger and the upgrade fill in.
_UUID_SQL = (
    "lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-4' || substr(lower(hex(randomblob(2))), 2)"
    " || '-' || substr('89ab', 1 + abs(random()) % 4, 1) || substr(lower(hex(randomblob(2))), 2)"
    " || '-' || lower(hex(randomblob(6)))"
)


def _v5_external_ids(db: sqlite3.Connection) -> list[str]:
    # Each chat's stable id (a UUID), kept in exports so that importing a file twice adds its chats
    # once. Chats of older files get one here; new ones get one from the trigger, whatever inserts them.
    found = _add_column(db, "conversations", "external_id", "TEXT")
    db.execute(f"UPDATE conversations SET external_id = {_UUID_SQL} WHERE external_id IS NULL")
    found += _create(
        db, "conversations_by_external_id",
        "CREATE UNIQUE INDEX conversations_by_external_id ON conversations(external_id)",
    )
    found += _create(
        db, "conversations_external_id",
        "CREATE TRIGGER conversations_external_id AFTER INSERT ON conversations WHEN NEW.external_id IS NULL"
        f" BEGIN UPDATE conversations SET external_id = {_UUID_SQL} WHERE id = NEW.id; END",
    )
    return found


# Messages of files from before branches, each put under the message before it in its chat.
LINE_UP_MESSAGES = (
    "UPDATE messages SET parent_id = (SELECT max(p.id) FROM messages p"
    " WHERE p.conversation_id = messages.conversation_id AND p.id < messages.id)"
)


def _v6_branches_and_folders(db: sqlite3.Connection) -> list[str]:
    # Branches: each message hangs under the one it answers or follows (NULL: the chat's first), so a
    # regenerated reply or an edited message is a sibling of the one it replaces and both are kept;
    # deleting a message takes the branch under it. The chat shows the path to its `leaf_id` (NULL or
    # gone: its newest message). Older files' chats were one line: each message's parent is the one
    # before it.
    found = _add_column(db, "messages", "parent_id", "INTEGER REFERENCES messages(id) ON DELETE CASCADE")
    if not found:
        db.execute(LINE_UP_MESSAGES)
    found += _create(db, "messages_by_parent", "CREATE INDEX messages_by_parent ON messages(parent_id)")
    found += _add_column(db, "conversations", "leaf_id", "INTEGER")
    # Folders hold chats (a chat in one folder at most; deleting a folder leaves its chats outside),
    # and a pinned chat lists first.
    found += _create(
        db, "folders",
        "CREATE TABLE folders (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE COLLATE NOCASE,"
        " created REAL NOT NULL)",
    )
    found += _add_column(db, "conversations", "folder_id", "INTEGER REFERENCES folders(id) ON DELETE SET NULL")
    found += _add_column(db, "conversations", "pinned", "INTEGER NOT NULL DEFAULT 0")
    return found


def _v7_tool_steps(db: sqlite3.Connection) -> list[str]:
    # A reply that called tools: its steps (what it wrote before each call, the calls and their results)
    # as a JSON list (app/services/history/tool_steps.py). Replies of older files called none: ''.
    return _add_column(db, "messages", "tool_steps", "TEXT NOT NULL DEFAULT ''")


def _v8_message_media(db: sqlite3.Connection) -> list[str]:
    # The images a message carries (issue 33), in order: each names its file in the media store beside the
    # history (app/services/media/store.py) by the sha256 of the original bytes, with what is shown without
    # opening it (its name, format and full size). A message's rows go with it (ON DELETE CASCADE, and with
    # it its chat's). The index on sha256 answers "is this file still used?" when chats are deleted, so the
    # store's collect removes only what no message names.
    found = _create(
        db, "message_media",
        """CREATE TABLE message_media (
            message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            format TEXT NOT NULL,
            name TEXT NOT NULL,
            width INTEGER NOT NULL,
            height INTEGER NOT NULL,
            PRIMARY KEY (message_id, position)
        )""",
    )
    found += _create(db, "message_media_by_sha256", "CREATE INDEX message_media_by_sha256 ON message_media(sha256)")
    return found


def _v9_media_kinds(db: sqlite3.Connection) -> list[str]:
    # Audio clips beside images (issue 33), in the same table: each row says what it is ('image' or 'audio';
    # the rows of older files are images) and a clip its length in seconds (NULL for an image; a clip's width
    # and height are 0). A message's clips come after its images in `position`.
    found = _add_column(db, "message_media", "kind", "TEXT NOT NULL DEFAULT 'image'")
    found += _add_column(db, "message_media", "seconds", "REAL")
    return found


def _v10_message_documents(db: sqlite3.Connection) -> list[str]:
    # The documents a user message was sent with (issue 36): the block the model read before the question
    # and where each [n] of it is, as JSON (app/services/history/sent_documents.py). '' for none: every
    # message of older files.
    return _add_column(db, "messages", "documents", "TEXT NOT NULL DEFAULT ''")


# A step returns the names of what it found already there (a half-done step being finished).
MIGRATIONS: list[Callable[[sqlite3.Connection], list[str]]] = [
    _v1_initial, _v2_settings_and_stats, _v3_presets, _v4_reasoning, _v5_external_ids, _v6_branches_and_folders,
    _v7_tool_steps, _v8_message_media, _v9_media_kinds, _v10_message_documents,
]
SCHEMA_VERSION = len(MIGRATIONS)


def _create(db: sqlite3.Connection, name: str, sql: str) -> list[str]:
    """Run `sql`, which creates table, index or trigger `name`, unless it exists; [name] if it did."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None:
        return [name]
    db.execute(sql)
    return []


def _add_column(db: sqlite3.Connection, table: str, column: str, declaration: str) -> list[str]:
    if column in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
        return [f"{table}.{column}"]
    db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
    return []


def schema_version(db: sqlite3.Connection) -> int:
    return db.execute("PRAGMA user_version").fetchone()[0]


def check_not_newer(version: int) -> None:
    """Raises StoreTooNewError when `version` comes from a newer Tailor."""
    if version > SCHEMA_VERSION:
        raise StoreTooNewError(
            f"The chat history was written by a newer version of Tailor (schema {version}; "
            f"this version knows up to {SCHEMA_VERSION}). Update Tailor to open it."
        )


def migrate(db: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Upgrade `db` (opened with isolation_level=None) to schema `target`; returns the version it had.

    Raises:
        StoreTooNewError: the file comes from a newer version of Tailor.
        sqlite3.Error: a step failed; the file keeps the version before that step.
    """
    before = schema_version(db)
    check_not_newer(before)
    while True:
        # IMMEDIATE takes the write lock first, so two processes opening a new file at once
        # (the window and `tailor presets`) run each step once; the version is read under the lock.
        db.execute("BEGIN IMMEDIATE")
        try:
            version = schema_version(db)
            check_not_newer(version)
            if version >= target:
                db.execute("ROLLBACK")
                return before
            found = MIGRATIONS[version](db)
            db.execute(f"PRAGMA user_version = {version + 1}")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        if found:
            log.warning("Finished a half-done upgrade of the chat history to schema %d (%s were there)",
                        version + 1, ", ".join(found))
