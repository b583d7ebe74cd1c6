"""ChatStore: conversations and their messages in one SQLite file.

The file lives under the user data dir unless a path is given. It runs in WAL mode with
`synchronous=FULL`, so a reply saved while it streams survives a crash of the app or the
machine. The schema is versioned with `PRAGMA user_version` and upgraded step by step.
No Qt here: the CLI and the server use the same store.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal

from app.chat_defaults import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_N_CTX,
    DEFAULT_SYSTEM_PROMPT,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_P,
)
from app.paths import AppPaths

Role = Literal["system", "user", "assistant"]
MessageState = Literal["complete", "streaming", "interrupted", "cancelled"]
MESSAGE_STATES: tuple[str, ...] = ("complete", "streaming", "interrupted", "cancelled")
DEFAULT_TITLE = "New chat"


class StoreError(RuntimeError):
    """The chat history cannot be opened or used."""


class StoreTooNewError(StoreError):
    """The database was written by a newer Tailor than this one."""


@dataclass(slots=True)
class ChatSettings:
    """Per-conversation generation settings."""

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    max_tokens: int = DEFAULT_MAX_TOKENS
    n_ctx: int = DEFAULT_N_CTX
    kv_type: str = "f16"  # "f16", "q8_0", "q4_0"
    flash_attn: str = "auto"  # "on", "off", "auto"
    # The PyTorch engine's load settings (a model folder; the GGUF backend ignores them), as LoadRequest's.
    speculative: str = "auto"  # "auto", "off", "lookup" or "draft"
    draft_path: str | None = None  # the draft model's folder; kept while another mode is chosen
    gpu_memory_fraction: float = 0.9  # share of free GPU memory the KV block pool may take
    cpu_kv_bytes: int | None = None  # KV budget on the CPU; None: the engine's default

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str | None) -> ChatSettings:
        """Settings from stored JSON; unknown keys are dropped, missing ones get defaults."""
        data = json.loads(text) if text else {}
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass(slots=True, frozen=True)
class Preset:
    """A named system prompt with its sampling settings; a pinned one is prefilled at model load."""

    name: str
    system_prompt: str
    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    max_tokens: int = DEFAULT_MAX_TOKENS
    pinned: bool = False

    def apply_to(self, settings: ChatSettings) -> ChatSettings:
        """`settings` with this preset's prompt and sampling (load settings unchanged)."""
        return replace(
            settings,
            system_prompt=self.system_prompt,
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
        )


DEFAULT_PRESET = Preset("Tailor", DEFAULT_SYSTEM_PROMPT, pinned=True)


@dataclass(slots=True)
class Conversation:
    id: int
    title: str
    created: float
    updated: float
    settings: ChatSettings = field(default_factory=ChatSettings)


@dataclass(slots=True)
class Message:
    id: int
    conversation_id: int
    role: Role
    content: str
    state: MessageState
    stats: dict | None
    created: float


# ---------------------------------------------------------------- schema migrations
# Each step takes the database from version i to i + 1; never edit a released step, add one.


def _v1_initial(db: sqlite3.Connection) -> None:
    db.executescript(
        """
        CREATE TABLE conversations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            title TEXT NOT NULL,
            created REAL NOT NULL,
            updated REAL NOT NULL
        );
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
            content TEXT NOT NULL,
            state TEXT NOT NULL,
            created REAL NOT NULL
        );
        CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
        """
    )


def _v2_settings_and_stats(db: sqlite3.Connection) -> None:
    db.execute("ALTER TABLE conversations ADD COLUMN settings TEXT NOT NULL DEFAULT '{}'")
    db.execute("ALTER TABLE messages ADD COLUMN stats TEXT")
    db.execute("CREATE INDEX conversations_by_updated ON conversations(updated DESC)")


def _v3_presets(db: sqlite3.Connection) -> None:
    db.execute(
        "CREATE TABLE presets (name TEXT PRIMARY KEY, settings TEXT NOT NULL, pinned INTEGER NOT NULL)"
    )
    db.execute("INSERT INTO presets VALUES (?, ?, ?)", _preset_row(DEFAULT_PRESET))


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1_initial, _v2_settings_and_stats, _v3_presets]
SCHEMA_VERSION = len(MIGRATIONS)


def default_db_path() -> Path:
    """Where the chat history lives: `<user data dir>/Tailor/chats.sqlite3` (or under $TAILOR_HOME)."""
    return AppPaths.default().chat_db


def migrate(db: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Upgrade `db` to schema version `target`; returns the version it had before.

    Raises:
        StoreTooNewError: the file comes from a newer version of Tailor.
    """
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise StoreTooNewError(
            f"The chat history was written by a newer version of Tailor (schema {version}; "
            f"this version knows up to {SCHEMA_VERSION}). Update Tailor to open it."
        )
    for step in range(version, target):
        with db:  # one transaction per step, version bump included
            MIGRATIONS[step](db)
            db.execute(f"PRAGMA user_version = {step + 1}")
    return version


# ---------------------------------------------------------------- the store


class ChatStore:
    """Conversations and messages in SQLite.

    Args:
        path: the database file; None uses `default_db_path()`. Parent folders are created.

    Raises:
        StoreTooNewError: the file comes from a newer version of Tailor.
        StoreError: the file is not a database or cannot be opened.
    """

    def __init__(self, path: Path | str | None = None):
        self.path = Path(path) if path is not None else default_db_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            migrate(self._db)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"Cannot open the chat history at {self.path}: {exc}") from exc
        self.recovered = self.recover_interrupted()

    def close(self) -> None:
        self._db.close()

    def recover_interrupted(self) -> int:
        """Mark replies left 'streaming' by a crash as 'interrupted'; returns how many."""
        with self._db:
            cur = self._db.execute("UPDATE messages SET state = 'interrupted' WHERE state = 'streaming'")
        return cur.rowcount

    # ------------------------------------------------------------ conversations

    def create_conversation(
        self, title: str = DEFAULT_TITLE, settings: ChatSettings | None = None
    ) -> Conversation:
        now = time.time()
        settings = settings or ChatSettings()
        with self._db:
            cur = self._db.execute(
                "INSERT INTO conversations (title, created, updated, settings) VALUES (?, ?, ?, ?)",
                (title, now, now, settings.to_json()),
            )
        return Conversation(cur.lastrowid, title, now, now, settings)

    def get_conversation(self, conversation_id: int) -> Conversation | None:
        row = self._db.execute(
            "SELECT id, title, created, updated, settings FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        return _conversation(row) if row else None

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        with self._db:
            self._db.execute(
                "UPDATE conversations SET title = ?, updated = ? WHERE id = ?",
                (title, time.time(), conversation_id),
            )

    def update_settings(self, conversation_id: int, settings: ChatSettings) -> None:
        with self._db:
            self._db.execute(
                "UPDATE conversations SET settings = ? WHERE id = ?", (settings.to_json(), conversation_id)
            )

    def delete_conversation(self, conversation_id: int) -> None:
        """Delete a conversation and all its messages."""
        with self._db:
            self._db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

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
        return [_conversation(row) for row in self._db.execute(sql, args)]

    # ------------------------------------------------------------ messages

    def add_message(
        self, conversation_id: int, role: Role, content: str, state: MessageState = "complete"
    ) -> Message:
        _check_state(state)
        now = time.time()
        with self._db:
            cur = self._db.execute(
                "INSERT INTO messages (conversation_id, role, content, state, created) VALUES (?, ?, ?, ?, ?)",
                (conversation_id, role, content, state, now),
            )
            self._touch(conversation_id, now)
        return Message(cur.lastrowid, conversation_id, role, content, state, None, now)

    def update_message_content(self, message_id: int, content: str) -> None:
        """Save the text of a message (called every few hundred ms while a reply streams)."""
        with self._db:
            self._db.execute("UPDATE messages SET content = ? WHERE id = ?", (content, message_id))

    def finish_message(
        self, message_id: int, content: str, state: MessageState, stats: dict | None = None
    ) -> None:
        """Store the final text, state and stats of a reply."""
        _check_state(state)
        stats_json = json.dumps(stats) if stats is not None else None
        with self._db:
            self._db.execute(
                "UPDATE messages SET content = ?, state = ?, stats = ? WHERE id = ?",
                (content, state, stats_json, message_id),
            )

    def delete_message(self, message_id: int) -> None:
        with self._db:
            self._db.execute("DELETE FROM messages WHERE id = ?", (message_id,))

    def get_message(self, message_id: int) -> Message | None:
        row = self._db.execute(
            "SELECT id, conversation_id, role, content, state, stats, created FROM messages WHERE id = ?",
            (message_id,),
        ).fetchone()
        return _message(row) if row else None

    def list_messages(self, conversation_id: int) -> list[Message]:
        rows = self._db.execute(
            "SELECT id, conversation_id, role, content, state, stats, created FROM messages"
            " WHERE conversation_id = ? ORDER BY id",
            (conversation_id,),
        )
        return [_message(row) for row in rows]

    # ------------------------------------------------------------ presets

    def list_presets(self) -> list[Preset]:
        rows = self._db.execute("SELECT name, settings, pinned FROM presets ORDER BY name COLLATE NOCASE")
        return [_preset(row) for row in rows]

    def get_preset(self, name: str) -> Preset | None:
        row = self._db.execute("SELECT name, settings, pinned FROM presets WHERE name = ?", (name,)).fetchone()
        return _preset(row) if row else None

    def save_preset(self, preset: Preset) -> None:
        """Add `preset`, or replace the one of the same name."""
        if not preset.name.strip():
            raise ValueError("A preset needs a name.")
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO presets VALUES (?, ?, ?)", _preset_row(preset))

    def delete_preset(self, name: str) -> bool:
        with self._db:
            return self._db.execute("DELETE FROM presets WHERE name = ?", (name,)).rowcount > 0

    def pinned_prompts(self) -> tuple[str, ...]:
        """System prompts of the pinned presets, for the engine to prefill at load."""
        return tuple(p.system_prompt for p in self.list_presets() if p.pinned and p.system_prompt)

    def _touch(self, conversation_id: int, now: float) -> None:
        self._db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id))


def _check_state(state: str) -> None:
    if state not in MESSAGE_STATES:
        raise ValueError(f"unknown message state {state!r}")


def _conversation(row: tuple) -> Conversation:
    return Conversation(row[0], row[1], row[2], row[3], ChatSettings.from_json(row[4]))


def _message(row: tuple) -> Message:
    stats = json.loads(row[5]) if row[5] else None
    return Message(row[0], row[1], row[2], row[3], row[4], stats, row[6])


def _preset_row(preset: Preset) -> tuple[str, str, int]:
    fields = {k: getattr(preset, k) for k in ("system_prompt", "temperature", "top_p", "max_tokens")}
    return preset.name, json.dumps(fields), int(preset.pinned)


def _preset(row: tuple) -> Preset:
    data = json.loads(row[1])
    known = {k: v for k, v in data.items() if k in Preset.__dataclass_fields__ and k not in ("name", "pinned")}
    return Preset(name=row[0], pinned=bool(row[2]), **known)
