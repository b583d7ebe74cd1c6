"""ChatStore: conversations and their messages in one SQLite file.

The file lives under the user data dir unless a path is given. It runs in WAL mode with
`synchronous=FULL`, so a reply saved while it streams survives a crash of the app or the
machine; every change is one transaction. The schema is versioned (app/services/store_schema.py).
A file that cannot be written opens read-only and one that cannot be read is refused with
what is needed to recover it (app/services/store_open.py). No Qt here: the CLI and the server use the
same store.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.services.paths import AppPaths
from app.services.store_open import (
    Connector,
    OpenedHistory,
    empty_history,
    mark_interrupted,
    open_history,
    open_sqlite,
)
from app.services.store_problems import (
    HistoryProblem,
    StoreDamagedError,
    StoreError,
    StoreTooNewError,
    StoreUnwritableError,
    problem_kind,
)
from app.services.store_records import (
    DEFAULT_PRESET,
    DEFAULT_TITLE,
    MESSAGE_COLUMNS,
    MESSAGE_STATES,
    ChatSettings,
    Conversation,
    Message,
    MessageState,
    Preset,
    Role,
    conversation_of,
    message_of,
    preset_of,
    preset_row,
)
from app.services.store_schema import MIGRATIONS, SCHEMA_VERSION, migrate

__all__ = [
    "DEFAULT_PRESET", "DEFAULT_TITLE", "MESSAGE_STATES", "MIGRATIONS", "SCHEMA_VERSION", "ChatSettings", "ChatStore",
    "Conversation", "HistoryProblem", "Message", "MessageState", "Preset", "Role", "StoreDamagedError", "StoreError",
    "StoreTooNewError", "StoreUnwritableError", "default_db_path", "migrate",
]


def default_db_path() -> Path:
    """Where the chat history lives: `<user data dir>/Tailor/chats.sqlite3` (or under $TAILOR_HOME)."""
    return AppPaths.default().chat_db


class ChatStore:
    """Conversations and messages in SQLite.

    Args:
        path: the database file; None uses `default_db_path()`. Parent folders are created.
        connect: opens the file read-write or read-only; tests give one that puts it on a
            read-only or full medium.

    Attributes:
        problem: None when changes are saved; otherwise why the history is shown read-only,
            and every change raises StoreUnwritableError.
        recovered: replies a crash left streaming, marked interrupted when the file was opened.

    Raises:
        StoreDamagedError: the file's pages cannot be read (`ChatStore.unavailable` stands in).
        StoreTooNewError: the file comes from a newer version of Tailor.
        StoreError: the file cannot be opened at all.
    """

    def __init__(self, path: Path | str | None = None, *, connect: Connector = open_sqlite):
        self.path = Path(path) if path is not None else default_db_path()
        self._connect = connect
        self._attach(open_history(self.path, connect))

    @classmethod
    def unavailable(cls, error: StoreDamagedError, *, connect: Connector = open_sqlite) -> ChatStore:
        """An empty stand-in that saves nothing, for a history that cannot be read: the window opens
        over it and offers to recover the file; `reopen()` then opens the real one."""
        store = cls.__new__(cls)
        store.path, store._connect = error.problem.path, connect
        store._attach(OpenedHistory(empty_history(), error.problem, 0))
        return store

    def _attach(self, opened: OpenedHistory) -> None:
        self._db, self.problem, self.recovered = opened.db, opened.problem, opened.recovered

    @property
    def writable(self) -> bool:
        return self.problem is None

    def reopen(self) -> None:
        """Open the file again, after it was recovered or what kept it read-only was fixed.

        Raises:
            StoreError: as the constructor; the store is left as it was.
        """
        opened = open_history(self.path, self._connect)
        self._db.close()
        self._attach(opened)

    def close(self) -> None:
        self._db.close()

    def recover_interrupted(self) -> int:
        """Mark replies left 'streaming' by a crash as 'interrupted'; returns how many."""
        if self.problem is not None:
            raise StoreUnwritableError(self.problem)
        return mark_interrupted(self._db)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One transaction; SQLite's write errors become StoreUnwritableError / StoreDamagedError."""
        if self.problem is not None:
            raise StoreUnwritableError(self.problem)
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            yield db
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            kind = problem_kind(exc)
            if kind is None:
                raise
            problem = HistoryProblem(kind, self.path, str(exc))
            # The disk filled up (or the file became read-only) while Tailor runs: from now on the
            # history is shown read-only with the reason, as if it had been so at start.
            self.problem = problem
            raise (StoreDamagedError if kind == "damaged" else StoreUnwritableError)(problem) from exc
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    # ------------------------------------------------------------ conversations

    def create_conversation(
        self, title: str = DEFAULT_TITLE, settings: ChatSettings | None = None
    ) -> Conversation:
        now = time.time()
        settings = settings or ChatSettings()
        with self._write() as db:
            cur = db.execute(
                "INSERT INTO conversations (title, created, updated, settings) VALUES (?, ?, ?, ?)",
                (title, now, now, settings.to_json()),
            )
        return Conversation(cur.lastrowid, title, now, now, settings)

    def get_conversation(self, conversation_id: int) -> Conversation | None:
        row = self._db.execute(
            "SELECT id, title, created, updated, settings FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        return conversation_of(row) if row else None

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE conversations SET title = ?, updated = ? WHERE id = ?",
                (title, time.time(), conversation_id),
            )

    def update_settings(self, conversation_id: int, settings: ChatSettings) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE conversations SET settings = ? WHERE id = ?", (settings.to_json(), conversation_id)
            )

    def delete_conversation(self, conversation_id: int) -> None:
        """Delete a conversation and all its messages."""
        with self._write() as db:
            db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    def list_conversations(self, query: str = "") -> list[Conversation]:
        """Conversations, most recently updated first; `query` keeps those whose title or
        any message contains it (case-insensitive for ASCII)."""
        sql = "SELECT id, title, created, updated, settings FROM conversations"
        args: tuple = ()
        query = query.strip()
        if query:
            pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            sql += (
                " WHERE title LIKE ?1 ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m"
                " WHERE m.conversation_id = conversations.id AND m.content LIKE ?1 ESCAPE '\\')"
            )
            args = (pattern,)
        sql += " ORDER BY updated DESC, id DESC"
        return [conversation_of(row) for row in self._db.execute(sql, args)]

    def conversation_uid(self, conversation_id: int) -> str | None:
        """The chat's stable id (a UUID kept across export and import); None when there is no such chat."""
        row = self._db.execute("SELECT external_id FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
        return row[0] if row else None

    def find_conversation_by_uid(self, uid: str) -> Conversation | None:
        row = self._db.execute(
            "SELECT id, title, created, updated, settings FROM conversations WHERE external_id = ?", (uid,)
        ).fetchone()
        return conversation_of(row) if row else None

    def insert_conversation(self, conversation: Conversation, messages: list[Message], uid: str) -> int | None:
        """Add a whole chat as given (title, times, settings; messages with their states, stats, reasoning
        and times; their ids are not used) under `uid`, in one transaction. Returns its id, or None when a
        chat with `uid` is there already (then nothing is added)."""
        for message in messages:
            _check_state(message.state)
        c = conversation
        with self._write() as db:
            if db.execute("SELECT 1 FROM conversations WHERE external_id = ?", (uid,)).fetchone():
                return None
            cid = db.execute(
                "INSERT INTO conversations (title, created, updated, settings, external_id) VALUES (?, ?, ?, ?, ?)",
                (c.title, c.created, c.updated, c.settings.to_json(), uid),
            ).lastrowid
            db.executemany(
                "INSERT INTO messages (conversation_id, role, content, state, stats, created, reasoning,"
                " reasoning_closed) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(cid, m.role, m.content, m.state, json.dumps(m.stats) if m.stats is not None else None, m.created,
                  m.reasoning, int(m.reasoning_closed)) for m in messages],
            )
        return cid

    # ------------------------------------------------------------ messages

    def add_message(
        self, conversation_id: int, role: Role, content: str, state: MessageState = "complete"
    ) -> Message:
        _check_state(state)
        now = time.time()
        with self._write() as db:
            cur = db.execute(
                "INSERT INTO messages (conversation_id, role, content, state, created) VALUES (?, ?, ?, ?, ?)",
                (conversation_id, role, content, state, now),
            )
            db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id))
        return Message(cur.lastrowid, conversation_id, role, content, state, None, now)

    def update_message_content(
        self, message_id: int, content: str, reasoning: str | None = None, reasoning_closed: bool = True
    ) -> None:
        """Save the text of a message (called every few hundred ms while a reply streams), and of its
        reasoning when given (None leaves what is stored)."""
        with self._write() as db:
            db.execute(
                "UPDATE messages SET content = ?, reasoning = coalesce(?, reasoning),"
                " reasoning_closed = coalesce(?, reasoning_closed) WHERE id = ?",
                (content, *_reasoning_values(reasoning, reasoning_closed), message_id),
            )

    def finish_message(
        self, message_id: int, content: str, state: MessageState, stats: dict | None = None,
        reasoning: str | None = None, reasoning_closed: bool = True,
    ) -> None:
        """Store the final text, state and stats of a reply, and its reasoning when given (None leaves
        what is stored)."""
        _check_state(state)
        stats_json = json.dumps(stats) if stats is not None else None
        with self._write() as db:
            db.execute(
                "UPDATE messages SET content = ?, state = ?, stats = ?, reasoning = coalesce(?, reasoning),"
                " reasoning_closed = coalesce(?, reasoning_closed) WHERE id = ?",
                (content, state, stats_json, *_reasoning_values(reasoning, reasoning_closed), message_id),
            )

    def delete_message(self, message_id: int) -> None:
        with self._write() as db:
            db.execute("DELETE FROM messages WHERE id = ?", (message_id,))

    def get_message(self, message_id: int) -> Message | None:
        row = self._db.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,)).fetchone()
        return message_of(row) if row else None

    def message_count(self, conversation_id: int) -> int:
        row = self._db.execute("SELECT count(*) FROM messages WHERE conversation_id = ?", (conversation_id,)).fetchone()
        return row[0]

    def list_messages(self, conversation_id: int) -> list[Message]:
        rows = self._db.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? ORDER BY id", (conversation_id,)
        )
        return [message_of(row) for row in rows]

    # ------------------------------------------------------------ presets

    def list_presets(self) -> list[Preset]:
        rows = self._db.execute("SELECT name, settings, pinned FROM presets ORDER BY name COLLATE NOCASE")
        return [preset_of(row) for row in rows]

    def get_preset(self, name: str) -> Preset | None:
        row = self._db.execute("SELECT name, settings, pinned FROM presets WHERE name = ?", (name,)).fetchone()
        return preset_of(row) if row else None

    def save_preset(self, preset: Preset) -> None:
        """Add `preset`, or replace the one of the same name."""
        if not preset.name.strip():
            raise ValueError("A preset needs a name.")
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO presets VALUES (?, ?, ?)", preset_row(preset))

    def delete_preset(self, name: str) -> bool:
        with self._write() as db:
            return db.execute("DELETE FROM presets WHERE name = ?", (name,)).rowcount > 0

    def pinned_prompts(self) -> tuple[str, ...]:
        """System prompts of the pinned presets, for the engine to prefill at load."""
        return tuple(p.system_prompt for p in self.list_presets() if p.pinned and p.system_prompt)


def _reasoning_values(reasoning: str | None, closed: bool) -> tuple[str | None, int | None]:
    """The reasoning columns' new values; (None, None) keeps what they hold."""
    return (None, None) if reasoning is None else (reasoning, int(closed))


def _check_state(state: str) -> None:
    if state not in MESSAGE_STATES:
        raise ValueError(f"unknown message state {state!r}")
