"""Real chat history files in the states a user's can be in: old schemas, damaged pages, read-only, full.

Damage is a page of the file overwritten with garbage (found with SQLite's dbstat table);
read-only is SQLite's own mode=ro, or a file chmod 444 read by a process that really cannot
write it (root keeps that power unless it drops CAP_DAC_OVERRIDE, which these helpers do);
a full disk is SQLite's page limit (max_page_count), which fails writes with SQLite's own
"database or disk is full".
"""

from __future__ import annotations

import ctypes
import os
import random
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from app.services.history.opening import open_sqlite
from app.services.history.schema import migrate
from app.services.history.store import ChatStore
from tests.paths import REPO

ROOT = REPO
PAGE_SIZE = 4096


def fill_history(path: Path, chats: int = 12, messages: int = 8, length: int = 400) -> dict[int, list[str]]:
    """A history of `chats` conversations with `messages` messages each; {conversation id: contents}."""
    store = ChatStore(path)
    made: dict[int, list[str]] = {}
    for c in range(chats):
        conversation = store.create_conversation(f"Chat {c}")
        made[conversation.id] = []
        for m in range(messages):
            text = f"chat {c} message {m} " + "".join(random.Random(c * 1000 + m).choices("abcdefgh ", k=length))
            store.add_message(conversation.id, "user" if m % 2 == 0 else "assistant", text)
            made[conversation.id].append(text)
    store.close()  # the last connection checkpoints the WAL into the file and removes it
    return made


def old_history(path: Path, version: int, chats: int = 3) -> list[tuple[str, list[str]]]:
    """A file written by the schema of `version`, with chats and one reply left streaming."""
    made = []
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("PRAGMA journal_mode=WAL")
        migrate(db, target=version)
        for c in range(chats):
            cid = db.execute(
                "INSERT INTO conversations (title, created, updated) VALUES (?, ?, ?)", (f"Old chat {c}", c, c)
            ).lastrowid
            texts = [f"question {c}", f"answer {c}"]
            parent = None
            for i, text in enumerate(texts):
                row = (cid, "user" if i == 0 else "assistant", text, "streaming" if (c, i) == (0, 1) else "complete", c)
                if version >= 6:  # each message under the one before, as the store writes them
                    parent = db.execute(
                        "INSERT INTO messages (conversation_id, role, content, state, created, parent_id)"
                        " VALUES (?, ?, ?, ?, ?, ?)", (*row, parent),
                    ).lastrowid
                else:
                    db.execute(
                        "INSERT INTO messages (conversation_id, role, content, state, created) VALUES (?, ?, ?, ?, ?)",
                        row,
                    )
            made.append((f"Old chat {c}", texts))
    return made


def chats_of(store: ChatStore) -> list[tuple[str, list[str]]]:
    """(title, message contents) of every conversation, oldest first."""
    return [(c.title, [m.content for m in store.list_messages(c.id)]) for c in reversed(store.list_conversations())]


def pages_of(path: Path, table: str, kind: str = "leaf") -> list[tuple[int, int]]:
    """(page number, rows on it) of the `kind` pages ('leaf', 'internal', 'overflow') of `table`."""
    with closing(sqlite3.connect(path)) as db:
        try:
            rows = db.execute(
                "SELECT pageno, ncell FROM dbstat WHERE name = ? AND pagetype = ? ORDER BY pageno", (table, kind)
            ).fetchall()
        except sqlite3.OperationalError:
            pytest.skip("this SQLite has no dbstat table to find a page with")
    assert rows, f"no {kind} page of {table}"
    return rows


def damage_page(path: Path, page: int) -> None:
    """Overwrite page `page` (1-based) with garbage; 0xFF first, which is no page type and no page number."""
    garbage = b"\xff" * 8 + random.Random(page).randbytes(PAGE_SIZE - 8)
    assert not Path(f"{path}-wal").exists(), "the WAL would hide the damage"
    with open(path, "r+b") as f:
        f.seek((page - 1) * PAGE_SIZE)
        f.write(garbage)
    with closing(sqlite3.connect(path)) as db:
        try:
            verdict = db.execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError:
            return
    assert verdict != [("ok",)], "the garbage went unnoticed"


class Medium:
    """Where a test puts the history file: writable, read-only (SQLite's mode=ro) or full (a page limit).

    Its `connect` is the store's Connector; changing `read_only` or `full` later is the user
    fixing the cause (making the file writable, freeing space).
    """

    def __init__(self, read_only: bool = False, full: bool = False):
        self.read_only, self.full = read_only, full

    def connect(self, path: Path, read_only: bool) -> sqlite3.Connection:
        db = open_sqlite(path, read_only or self.read_only)
        if self.full:  # no page beyond those the file has: SQLite answers "database or disk is full"
            pages = db.execute("PRAGMA page_count").fetchone()[0]
            db.execute(f"PRAGMA max_page_count = {max(pages, 1)}")
        return db


def drop_write_override() -> None:
    """For subprocess preexec_fn: a root child loses CAP_DAC_OVERRIDE, so file modes bind it too."""
    if os.geteuid() != 0:
        return
    pr_capbset_drop, cap_dac_override = 24, 1
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_capbset_drop, cap_dac_override, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE)")


def run_unprivileged(args: list[str], env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `args` where a chmod 444 file really is read-only (a root child drops its override first)."""
    try:
        return subprocess.run(
            args, preexec_fn=drop_write_override, capture_output=True, text=True, timeout=timeout,
            env=env, cwd=ROOT,
        )
    except subprocess.SubprocessError as exc:
        if "preexec_fn" in str(exc):
            pytest.skip(f"cannot drop the write override here: {exc}")
        raise


def python_child(code: str) -> list[str]:
    return [sys.executable, "-c", code]
