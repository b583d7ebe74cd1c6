"""Upgrading the chat history survives a crash at any statement, and files half-upgraded by older
versions (which committed each statement of a step on its own) open and are finished."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import uuid
from contextlib import closing
from pathlib import Path

import pytest

from app.services.history.records import preset_row
from app.services.history.store import DEFAULT_PRESET, SCHEMA_VERSION, ChatStore, migrate
from tests.app.services.history.history_files import ROOT, chats_of, old_history

KILLED = 86

# A child opens the store and dies (os._exit, as kill -9 would) just before SQLite runs statement N. The
# children are forked by one process that imported the store once (it runs no thread, so a fork is safe):
# a Python start per statement cost most of this file's minute. It reads "PATH N" lines and answers each
# with "STATUS SEEN" (the child's exit status; how many statements it ran when it ran to the end).
FORKER = f"""
import os, sys
from pathlib import Path
from app.services.history.store import ChatStore
from app.services.history.opening import open_sqlite

def run(path, kill_at):
    seen = 0

    def count(statement):
        nonlocal seen
        seen += 1
        if seen == kill_at:
            os._exit({KILLED})

    def connect(path, read_only):
        db = open_sqlite(path, read_only)
        db.set_trace_callback(count)
        return db

    ChatStore(path, connect=connect).close()
    return seen

for line in sys.stdin:
    path, kill_at = line.rsplit(" ", 1)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            os.write(write, str(run(Path(path), int(kill_at))).encode())
            os._exit(0)
        except BaseException as exc:
            os.write(2, repr(exc).encode() + b"\\n")
            os._exit(1)
    os.close(write)
    with os.fdopen(read) as answer:
        seen = answer.read() or "0"
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), seen, flush=True)
"""


@pytest.fixture
def killer():
    """The process that forks the children (tests/…/test_schema.py's FORKER), for one test."""
    process = subprocess.Popen([sys.executable, "-c", FORKER], cwd=ROOT, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    yield process
    process.stdin.close()
    process.wait(timeout=60)


def schema(path: Path) -> dict[str, list]:
    """Every table's columns and every index of the file, to compare with a fresh one's."""
    with closing(sqlite3.connect(path)) as db:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        found = {name: [r[1:] for r in db.execute(f"PRAGMA table_info({name})")] for name in names}
        found["indexes"] = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' ORDER BY name")]
        found["triggers"] = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name")]
        found["presets"] = db.execute("SELECT name, pinned FROM presets").fetchall() if "presets" in names else []
        found["version"] = db.execute("PRAGMA user_version").fetchone()[0]
    return found


@pytest.fixture(scope="module")
def fresh_schema(tmp_path_factory) -> dict[str, list]:
    path = tmp_path_factory.mktemp("fresh") / "chats.sqlite3"
    ChatStore(path).close()
    return schema(path)


def version_of(path: Path) -> int | None:
    """The file's schema version as it is on disk (a committed step, or none), without changing it."""
    if not path.exists():
        return None
    with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
        return db.execute("PRAGMA user_version").fetchone()[0]


def open_killed_at(killer: subprocess.Popen, template: Path | None, work: Path, kill_at: int) -> tuple[int, int]:
    """(exit status, statements run) of a child that opened a copy of `template` and was killed at `kill_at`."""
    for side in ("", "-wal", "-shm"):
        Path(f"{work}{side}").unlink(missing_ok=True)
    if template is not None:
        shutil.copyfile(template, work)
    killer.stdin.write(f"{work} {kill_at}\n")
    killer.stdin.flush()
    status, seen = killer.stdout.readline().split()
    return int(status), int(seen)


@pytest.mark.parametrize("start", [0, 1, 2, 3, 4, 6, 7, 8])
def test_a_kill_at_every_statement_of_the_upgrade_loses_nothing(tmp_path, fresh_schema, killer, start):
    """Kill the opening process before each statement in turn; then the file opens, upgraded, with every chat."""
    template = None
    expected: list = []
    if start:
        template = tmp_path / "template.sqlite3"
        expected = old_history(template, start)
    work = tmp_path / "chats.sqlite3"
    versions_after_kill = set()
    kill_at = 1
    while True:
        status, seen = open_killed_at(killer, template, work, kill_at)
        if status == 0:  # it ran to the end: every statement had its kill
            total = seen
            break
        assert status == KILLED, f"the child failed before statement {kill_at} (its stderr is above)"
        versions_after_kill.add(version_of(work))
        store = ChatStore(work)
        assert store.problem is None
        assert chats_of(store) == expected, f"killed before statement {kill_at}"
        store.close()
        assert schema(work) == fresh_schema, f"killed before statement {kill_at}"
        kill_at += 1
    assert kill_at == total + 1 and total > 6 * (SCHEMA_VERSION - start)
    # The kills hit every step: the file was left at each version from the start one to the last.
    assert set(range(start, SCHEMA_VERSION + 1)) <= versions_after_kill - {None}


def test_the_streaming_reply_of_an_upgraded_file_is_marked_interrupted(tmp_path):
    path = tmp_path / "chats.sqlite3"
    old_history(path, 1)
    store = ChatStore(path)
    assert store.recovered == 1
    assert store.list_messages(store.list_conversations()[-1].id)[1].state == "interrupted"
    store.close()


# ---------------------------------------------------------------- files half-upgraded by older versions


def half_done(path: Path, version: int, *statements: str) -> list:
    """A file at `version` with chats, plus `statements` of the next step run without its version bump."""
    made = old_history(path, version) if version else []
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        for statement in statements:
            db.execute(statement, preset_row(DEFAULT_PRESET)) if "?" in statement else db.execute(statement)
        assert db.execute("PRAGMA user_version").fetchone()[0] == version
    return made


HALF_DONE = {
    "creation killed after the first table": (
        0, "CREATE TABLE conversations (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL, "
        "created REAL NOT NULL, updated REAL NOT NULL)",
    ),
    "settings column there at version 1": (
        1, "ALTER TABLE conversations ADD COLUMN settings TEXT NOT NULL DEFAULT '{}'",
    ),
    "whole v2 step there at version 1": (
        1, "ALTER TABLE conversations ADD COLUMN settings TEXT NOT NULL DEFAULT '{}'",
        "ALTER TABLE messages ADD COLUMN stats TEXT",
        "CREATE INDEX conversations_by_updated ON conversations(updated DESC)",
    ),
    "presets table there at version 1": (
        1, "CREATE TABLE presets (name TEXT PRIMARY KEY, settings TEXT NOT NULL, pinned INTEGER NOT NULL)",
    ),
    "presets table without its default at version 2": (
        2, "CREATE TABLE presets (name TEXT PRIMARY KEY, settings TEXT NOT NULL, pinned INTEGER NOT NULL)",
    ),
    "the whole v3 step there at version 2": (
        2, "CREATE TABLE presets (name TEXT PRIMARY KEY, settings TEXT NOT NULL, pinned INTEGER NOT NULL)",
        "INSERT INTO presets VALUES (?, ?, ?)",
    ),
    "reasoning column there at version 3": (
        3, "ALTER TABLE messages ADD COLUMN reasoning TEXT NOT NULL DEFAULT ''",
    ),
    "external_id column there, empty, at version 4": (
        4, "ALTER TABLE conversations ADD COLUMN external_id TEXT",
    ),
    "external_id index there, without its trigger, at version 4": (
        4, "ALTER TABLE conversations ADD COLUMN external_id TEXT",
        "UPDATE conversations SET external_id = 'c' || id",
        "CREATE UNIQUE INDEX conversations_by_external_id ON conversations(external_id)",
    ),
    "tool_steps column there at version 6": (
        6, "ALTER TABLE messages ADD COLUMN tool_steps TEXT NOT NULL DEFAULT ''",
    ),
    "message_media table there, without its index, at version 7": (
        7, "CREATE TABLE message_media (message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,"
        " position INTEGER NOT NULL, sha256 TEXT NOT NULL, format TEXT NOT NULL, name TEXT NOT NULL,"
        " width INTEGER NOT NULL, height INTEGER NOT NULL, PRIMARY KEY (message_id, position))",
    ),
    "message_media.kind there, without seconds, at version 8": (
        8, "ALTER TABLE message_media ADD COLUMN kind TEXT NOT NULL DEFAULT 'image'",
    ),
}


@pytest.mark.parametrize("case", list(HALF_DONE))
def test_a_half_upgraded_file_opens_with_its_chats(tmp_path, fresh_schema, case, caplog):
    version, *statements = HALF_DONE[case]
    path = tmp_path / "chats.sqlite3"
    made = half_done(path, version, *statements)
    store = ChatStore(path)
    assert store.problem is None
    assert chats_of(store) == made
    assert store.list_presets() == [DEFAULT_PRESET]  # added once, even where the half step had added it
    store.close()
    assert schema(path) == fresh_schema
    assert "Finished a half-done upgrade" in caplog.text


def test_a_failing_step_leaves_the_file_at_the_version_before_it(tmp_path):
    """One transaction per step: a statement that fails takes the step's earlier statements back with it."""
    path = tmp_path / "chats.sqlite3"
    old_history(path, 1)
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        # Step 2 adds conversations.settings, then fails on messages, here a view (no column can be added).
        db.execute("ALTER TABLE messages RENAME TO kept_messages")
        db.execute("CREATE VIEW messages AS SELECT * FROM kept_messages")
        with pytest.raises(sqlite3.OperationalError, match="view"):
            migrate(db)
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1
        assert "settings" not in [r[1] for r in db.execute("PRAGMA table_info(conversations)")]
        assert not db.in_transaction


# ---------------------------------------------------------------- schema 5: each chat's stable id


def test_upgraded_chats_get_a_stable_id_each_and_new_ones_get_theirs_on_insert(tmp_path):
    path = tmp_path / "chats.sqlite3"
    old_history(path, 4)
    store = ChatStore(path)
    uids = [store.conversation_uid(c.id) for c in store.list_conversations()]
    assert len(uids) == 3 and len(set(uids)) == 3
    assert all(str(uuid.UUID(u)) == u and uuid.UUID(u).version == 4 for u in uids)
    store.close()
    store = ChatStore(path)  # kept, not made anew at each opening
    assert [store.conversation_uid(c.id) for c in store.list_conversations()] == uids
    # Whatever inserts a chat (here an older Tailor's plain INSERT), the trigger gives it one.
    store._db.execute("INSERT INTO conversations (title, created, updated) VALUES ('x', 9, 9)")
    new = store.list_conversations()[0]
    assert new.title == "x" and store.conversation_uid(new.id) not in (None, *uids)
    with pytest.raises(sqlite3.IntegrityError):
        store._db.execute("UPDATE conversations SET external_id = ? WHERE id = ?", (uids[0], new.id))
    store.close()


def test_a_half_done_step_5_fills_in_the_ids_it_had_not(tmp_path):
    path = tmp_path / "chats.sqlite3"
    half_done(path, 4, "ALTER TABLE conversations ADD COLUMN external_id TEXT")
    store = ChatStore(path)
    uids = [store.conversation_uid(c.id) for c in store.list_conversations()]
    assert None not in uids and len(set(uids)) == 3
    store.close()
