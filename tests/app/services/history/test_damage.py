"""A chat history that is damaged, read-only or on a full disk: the store shows what it can, refuses
changes with the reason, recovers what SQLite can read, and the CLI says so in one line."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

import pytest

from app.cli import main as cli
from app.cli import preset as preset_command
from app.services.history.opening import MIN_ROOM_BYTES
from app.services.history.recovery import recover_history
from app.services.history.store import (
    SCHEMA_VERSION,
    ChatStore,
    Preset,
    StoreDamagedError,
    StoreUnwritableError,
)
from tests.app.services.history.history_files import (
    Medium,
    chats_of,
    damage_page,
    fill_history,
    old_history,
    pages_of,
    python_child,
    run_unprivileged,
)

TAILOR = str(Path(sys.executable).with_name("tailor"))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def middle(pages: list[tuple[int, int]]) -> tuple[int, int]:
    return pages[len(pages) // 2]


# ---------------------------------------------------------------- damaged pages, and recovering them


def test_a_damaged_messages_page_is_refused_and_recovery_keeps_every_other_message(tmp_path):
    path = tmp_path / "chats.sqlite3"
    made = fill_history(path)
    page, rows_on_it = middle(pages_of(path, "messages"))
    damage_page(path, page)
    damaged_bytes = digest(path)
    with pytest.raises(StoreDamagedError) as refused:
        ChatStore(path)
    assert refused.value.problem.kind == "damaged" and "malformed" in refused.value.problem.detail

    report = recover_history(path)
    total = sum(len(texts) for texts in made.values())
    assert 0 < rows_on_it < total
    assert (report.conversations, report.messages, report.presets) == (len(made), total - rows_on_it, 1)
    assert report.unreadable >= 1
    assert digest(report.damaged_copy) == damaged_bytes  # kept beside it, as it was
    assert report.damaged_copy.parent == path.parent and "damaged" in report.damaged_copy.name
    store = ChatStore(path)
    assert store.problem is None
    emptied = 0
    for conversation in store.list_conversations():
        texts = [m.content for m in store.list_messages(conversation.id)]
        assert all(text in made[conversation.id] for text in texts)  # same ids, same words
        emptied += not texts
    # A page holds about one chat's messages: at most the chat whose every message was on it is left empty.
    assert emptied <= 1
    assert sum(len(store.list_messages(c.id)) for c in store.list_conversations()) == total - rows_on_it
    store.add_message(store.list_conversations()[0].id, "user", "still works")
    store.close()
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_messages_of_a_lost_conversation_page_come_back_in_recovered_chats(tmp_path):
    path = tmp_path / "chats.sqlite3"
    made = fill_history(path, chats=300, messages=2, length=20)
    page, rows_on_it = middle(pages_of(path, "conversations"))
    damage_page(path, page)
    report = recover_history(path)
    assert report.conversations == len(made) and report.messages == 2 * len(made)
    store = ChatStore(path)
    recovered = [c for c in store.list_conversations() if c.title == "Recovered chat"]
    assert len(recovered) == rows_on_it
    for conversation in recovered:
        assert [m.content for m in store.list_messages(conversation.id)] == made[conversation.id]
    store.close()


def test_a_damaged_overflow_page_costs_only_its_long_message(tmp_path):
    path = tmp_path / "chats.sqlite3"
    store = ChatStore(path)
    chat = store.create_conversation("Long one")
    store.add_message(chat.id, "user", "before")
    long = store.add_message(chat.id, "assistant", "x" * 40_000)  # spills onto overflow pages
    store.add_message(chat.id, "user", "after")
    store.close()
    page, _ = middle(pages_of(path, "messages", "overflow"))
    damage_page(path, page)
    report = recover_history(path)
    assert report.messages == 2
    store = ChatStore(path)
    assert [m.content for m in store.list_messages(chat.id)] == ["before", "after"]
    assert store.get_message(long.id) is None
    store.close()


def test_a_file_that_is_not_a_database_recovers_to_an_empty_history_and_is_kept(tmp_path):
    path = tmp_path / "chats.sqlite3"
    path.write_bytes(b"not sqlite at all " * 500)
    report = recover_history(path)
    assert (report.conversations, report.messages) == (0, 0) and report.unreadable == 1
    assert report.damaged_copy.read_bytes() == b"not sqlite at all " * 500
    store = ChatStore(path)
    assert store.problem is None and store.list_conversations() == [] and store.list_presets()[0].name == "Tailor"
    store.close()


def test_recovery_reads_the_wal_and_keeps_it_with_the_damaged_copy(tmp_path):
    """A crash leaves recent chats only in the WAL: they are recovered, and the old WAL never meets the new file."""
    live = tmp_path / "live.sqlite3"
    store = ChatStore(live)
    chat = store.create_conversation("Only in the WAL")
    store.add_message(chat.id, "user", "recent")
    path = tmp_path / "chats.sqlite3"
    for side in ("", "-wal", "-shm"):  # the files as a crash leaves them, the connection still open
        Path(f"{path}{side}").write_bytes(Path(f"{live}{side}").read_bytes())
    store.close()
    wal = Path(f"{path}-wal").read_bytes()
    assert wal
    report = recover_history(path)
    assert Path(f"{report.damaged_copy}-wal").read_bytes() == wal
    assert not Path(f"{path}-wal").exists()
    reopened = ChatStore(path)
    assert chats_of(reopened) == [("Only in the WAL", ["recent"])]
    reopened.close()


# ---------------------------------------------------------------- read-only


def test_a_read_only_file_shows_its_chats_and_refuses_changes_with_the_reason(tmp_path):
    path = tmp_path / "chats.sqlite3"
    made = old_history(path, SCHEMA_VERSION)
    before = digest(path)
    store = ChatStore(path, connect=Medium(read_only=True).connect)
    assert store.problem.kind == "read_only"
    assert store.problem.detail == "attempt to write a readonly database"  # SQLite's own refusal
    assert chats_of(store) == [(t, texts) for t, texts in made]
    assert store.recovered == 1  # shown as interrupted; the file is not touched
    with pytest.raises(StoreUnwritableError, match="read-only"):
        store.add_message(store.list_conversations()[0].id, "user", "lost?")
    with pytest.raises(StoreUnwritableError):
        store.save_preset(Preset("x", "y"))
    store.close()
    assert digest(path) == before


def test_an_old_read_only_file_is_shown_upgraded_in_memory(tmp_path):
    path = tmp_path / "chats.sqlite3"
    made = old_history(path, 1)
    store = ChatStore(path, connect=Medium(read_only=True).connect)
    assert store.problem.kind == "read_only"
    assert chats_of(store) == made and store.list_presets()[0].name == "Tailor"
    store.close()
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1


PROBE = """
import json, sys
from app.services.history.store import ChatStore, Preset
store = ChatStore(sys.argv[1])
try:
    store.save_preset(Preset("x", "y"))
    refused = None
except Exception as exc:
    refused = f"{type(exc).__name__}: {exc}"
print(json.dumps({"kind": store.problem and store.problem.kind, "detail": store.problem and store.problem.detail,
                  "titles": [c.title for c in store.list_conversations()], "refused": refused}))
"""


def test_a_file_the_user_may_not_write_opens_read_only(tmp_path):
    """chmod 444, read by a process the mode really binds (a root one drops its override)."""
    path = tmp_path / "chats.sqlite3"
    made = old_history(path, SCHEMA_VERSION)
    before = digest(path)
    path.chmod(0o444)
    child = run_unprivileged(python_child(PROBE) + [str(path)])
    assert child.returncode == 0, child.stderr
    seen = json.loads(child.stdout)
    assert seen["kind"] == "read_only" and "readonly database" in seen["detail"]
    assert seen["titles"] == [title for title, _ in reversed(made)]
    assert seen["refused"].startswith("StoreUnwritableError: Nothing was saved: the chat history is read-only")
    assert digest(path) == before


# ---------------------------------------------------------------- a full disk


def test_a_full_disk_at_the_upgrade_shows_the_chats_read_only(tmp_path):
    """The upgrade needs a page the disk does not have: SQLite's "database or disk is full"; the file stays as it was."""
    path = tmp_path / "chats.sqlite3"
    made = old_history(path, 2)
    before = digest(path)
    medium = Medium(full=True)
    store = ChatStore(path, connect=medium.connect)
    assert (store.problem.kind, store.problem.detail) == ("full", "database or disk is full")
    assert chats_of(store) == made
    with pytest.raises(StoreUnwritableError, match="full"):
        store.create_conversation()
    assert digest(path) == before
    medium.full = False  # space freed
    store.reopen()
    assert store.problem is None and chats_of(store) == made
    store.create_conversation("saved now")
    store.close()


def test_a_history_with_no_room_left_opens_read_only(tmp_path):
    path = tmp_path / "chats.sqlite3"
    fill_history(path, chats=2, messages=2)
    store = ChatStore(path, connect=Medium(full=True).connect)
    assert store.problem.kind == "full" and "left" in store.problem.detail
    assert len(store.list_conversations()) == 2
    store.close()


def test_a_write_that_finds_the_disk_full_is_refused_with_the_reason(tmp_path):
    path = tmp_path / "chats.sqlite3"
    ChatStore(path).close()

    def room_for_a_little(path: Path, read_only: bool) -> sqlite3.Connection:
        db = Medium().connect(path, read_only)
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages + MIN_ROOM_BYTES // 4096 + 1}")
        return db

    store = ChatStore(path, connect=room_for_a_little)
    assert store.problem is None
    chat = store.create_conversation("a")
    with pytest.raises(StoreUnwritableError, match="full") as refused:
        store.add_message(chat.id, "user", "y" * (MIN_ROOM_BYTES + 100_000))
    assert refused.value.problem.detail == "database or disk is full"
    assert store.list_messages(chat.id) == []  # nothing half-saved
    # From then on the history is read-only with the reason (the window's banner), until Try again.
    assert store.problem is not None and store.problem.kind == "full"
    with pytest.raises(StoreUnwritableError, match="full"):
        store.add_message(chat.id, "user", "a short one")
    store.reopen()
    assert store.problem is None
    store.add_message(chat.id, "user", "a short one fits again")
    store.close()


# ---------------------------------------------------------------- the command line


def tailor(*args: str, home: Path, unprivileged: bool = False):
    env = {**os.environ, "TAILOR_HOME": str(home)}
    if unprivileged:
        return run_unprivileged([TAILOR, *args], env=env)
    import subprocess

    return subprocess.run([TAILOR, *args], capture_output=True, text=True, timeout=120, env=env)


def one_error_line(result) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("tailor: error: ")
    return line


@pytest.fixture
def home(tmp_path) -> Path:
    (tmp_path / "data").mkdir()
    return tmp_path


def test_cli_commands_on_a_damaged_history_print_one_line(home):
    path = home / "data" / "chats.sqlite3"
    fill_history(path)
    damage_page(path, middle(pages_of(path, "messages"))[0])
    for args in (("presets",), ("presets", "add", "x", "--system", "y"), ("presets", "rm", "Tailor"),
                 ("chat", "--preset", "Tailor", "hello")):
        line = one_error_line(tailor(*args, home=home))
        assert "damaged" in line and str(path) in line and "recover" in line


def test_cli_on_a_read_only_history_lists_and_refuses_changes_in_one_line(home):
    path = home / "data" / "chats.sqlite3"
    ChatStore(path).close()
    path.chmod(0o444)
    listed = tailor("presets", "--json", home=home, unprivileged=True)
    assert listed.returncode == 0, listed.stderr
    assert [p["name"] for p in json.loads(listed.stdout)["presets"]] == ["Tailor"]
    line = one_error_line(tailor("presets", "add", "x", "--system", "y", home=home, unprivileged=True))
    assert "read-only" in line and "attempt to write a readonly database" in line


def test_cli_on_a_full_disk_refuses_changes_in_one_line(home, monkeypatch, capsys):
    path = home / "data" / "chats.sqlite3"
    ChatStore(path).close()
    monkeypatch.setattr(preset_command, "_open_store", lambda: ChatStore(path, connect=Medium(full=True).connect))
    assert cli.main(["presets", "add", "x", "--system", "y"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tailor: error: Nothing was saved: the disk that holds")
