"""Hostile chat files (issue 30): times far out of range, settings of the wrong type or range, a disk that
fills part way. Each is imported into a real history file; the import says what it mended, nothing else
is lost, and every reader of the history (`tailor chats ls`, each export format) still works."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from pathlib import Path

import pytest

from app.cli.main import main
from app.services.history.opening import MIN_ROOM_BYTES, open_sqlite
from app.services.history.settings_fields import parse_settings
from app.services.history.store import ChatSettings, ChatStore
from app.services.history.timestamps import LATEST, UNKNOWN_TIME, checked_time, iso_time
from app.services.load_settings import LoadSettings
from app.services.transfer.export import load_chats, to_json, to_markdown
from app.services.transfer.export_html import to_html
from app.services.transfer.importer import import_file
from tests.app.services.transfer.test_import_chatgpt import chatgpt_conversation, node

HUGE_INT = "1" + "0" * 400  # 10^400: no float holds it


def _tailor_export(chats: list[str]) -> str:
    """A version 2 export whose chats are given as raw JSON text (so 10^400 stays an integer)."""
    return '{"format": "tailor-chats", "version": 2, "chats": [' + ",".join(chats) + "]}"


def _tailor_chat(title: str, created: str = "1700000000.0", settings: str = "{}", message_created: str = "1700000001.0",
                 content: str = "") -> str:
    return (f'{{"id": "{uuid.uuid4()}", "title": "{title}", "created": {created}, "updated": {created}, '
            f'"settings": {settings}, "folder": null, "pinned": false, "leaf": 1, "messages": [{{"id": 1, '
            f'"parent": null, "role": "user", "content": "Hello from {title}{content}", "reasoning": "", '
            f'"reasoning_closed": true, "state": "complete", "stats": null, "created": {message_created}}}]}}')


def _every_reader_works(db: Path, capsys) -> None:
    """`tailor chats ls` (text and JSON) and the three export formats read the whole history."""
    assert main(["chats", "ls", "--db", str(db)]) == 0
    assert main(["chats", "ls", "--json", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    listed = json.loads(out.splitlines()[-1])["chats"]
    assert all(c["created"] is None or checked_time(c["created"]) is not None for c in listed)
    store = ChatStore(db)
    try:
        records = load_chats(store)
        assert to_markdown(records) and to_html(records)
        json.loads(to_json(records))  # valid JSON: no Infinity, no NaN
    finally:
        store.close()


@pytest.mark.parametrize("bad", ["1e308", "1e400", HUGE_INT, "-5", "null", "NaN"])
def test_a_tailor_export_with_a_time_out_of_range_gets_the_import_time_and_says_so(tmp_path: Path, capsys, bad: str):
    path = tmp_path / "chats.json"
    path.write_text(_tailor_export([_tailor_chat("Bad time", created=bad, message_created=bad),
                                    _tailor_chat("After it")]), encoding="utf-8")
    store = ChatStore(tmp_path / "h.sqlite3")
    before = time.time()
    result = import_file(store, path)
    assert result.imported == ["Bad time", "After it"] and result.problems == [] and result.error is None
    assert result.notes == [
        "Mended chat 1 ('Bad time'): 2 chat times outside 1970–9999 or not a number: the import time is used; "
        "1 message time outside 1970–9999 or not a number: the import time is used"]
    bad_chat = next(c for c in store.list_conversations() if c.title == "Bad time")
    assert before <= bad_chat.created <= time.time() and bad_chat.updated == bad_chat.created
    assert before <= store.list_messages(bad_chat.id)[0].created <= time.time()
    store.close()
    _every_reader_works(tmp_path / "h.sqlite3", capsys)


@pytest.mark.parametrize("bad", ["1e308", "1e400", HUGE_INT, "\"yesterday\""])
def test_a_chatgpt_conversation_with_a_time_out_of_range_is_imported_and_so_are_those_after_it(
    tmp_path: Path, capsys, bad: str
):
    good = chatgpt_conversation("c-good", "Good", [node("root", None), node("u", "root", "user", "Hi", created=1.7e9)],
                                current="u")
    broken = chatgpt_conversation("c-bad", "Bad", [node("root", None), node("u", "root", "user", "Hello")], current="u")
    text = json.dumps([broken, good])
    # The times as a hostile file writes them (a number JSON allows but no clock shows): the first
    # conversation's own two, and its message's.
    for time_of in ('"create_time": 1700000000.5', '"update_time": 1700000300.25', '"create_time": null'):
        text = text.replace(time_of, f'{time_of.split(":")[0]}: {bad}', 1)
    path = tmp_path / "conversations.json"
    path.write_text(text, encoding="utf-8")
    db = tmp_path / "h.sqlite3"
    code = main(["import", str(path), "--db", str(db)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out == f"Imported 2 chat(s) from {path} (ChatGPT); 1 mended on the way in (see above)\n"
    assert err == ("tailor: Mended conversation 1 ('Bad'): 2 chat times outside 1970–9999 or not a number: the import "
                   "time is used; 1 message time outside 1970–9999 or not a number: the import time is used\n")
    _every_reader_works(db, capsys)


def test_a_bad_time_already_in_a_history_file_is_shown_as_unknown_and_exports_as_null(tmp_path: Path, capsys):
    """A history written before times were checked may hold 1e308 or NaN (SQLite keeps NaN as NULL)."""
    db = tmp_path / "h.sqlite3"
    store = ChatStore(db)
    for title in ("Far", "NaN", "Fine"):
        chat = store.create_conversation(title)
        store.add_message(chat.id, "user", f"in {title}")
    store.close()
    raw = sqlite3.connect(db)
    raw.execute("UPDATE conversations SET created = 1e308, updated = 1e308 WHERE title = 'Far'")
    raw.execute("UPDATE conversations SET created = ?, updated = ? WHERE title = 'NaN'", (float("inf"), float("-inf")))
    raw.execute("UPDATE messages SET created = 1e308")
    raw.commit()
    raw.close()
    assert main(["chats", "ls", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sum(UNKNOWN_TIME in line for line in lines) == 2
    _every_reader_works(db, capsys)
    store = ChatStore(db)
    exported = json.loads(to_json(load_chats(store)))
    store.close()
    far = next(c for c in exported["chats"] if c["title"] == "Far")
    assert (far["created"], far["updated"], far["messages"][0]["created"]) == (None, None, None)
    again = tmp_path / "again.json"
    again.write_text(json.dumps(exported), encoding="utf-8")
    other = ChatStore(tmp_path / "other.sqlite3")
    result = import_file(other, again)  # null times come back as the import time, with a note
    assert sorted(result.imported) == ["Far", "Fine", "NaN"]
    mended = sorted(n.split("'")[1] for n in result.notes)
    assert mended == ["Far", "Fine", "NaN"]  # each chat's message time; Far's and NaN's own times too
    assert sum("2 chat times" in n for n in result.notes) == 2
    other.close()


def test_times_are_checked_to_the_second():
    assert checked_time(LATEST) == LATEST and checked_time(LATEST + 1) is None and checked_time(0) == 0.0
    assert checked_time(True) is None and checked_time(10**400) is None and checked_time(float("nan")) is None
    assert iso_time(LATEST) == "9999-12-31 23:59 UTC" and iso_time(1e308) == UNKNOWN_TIME and iso_time(None) == UNKNOWN_TIME


HOSTILE_SETTINGS = ('{"system_prompt": ["a", "list"], "temperature": "hot", "max_tokens": ' + "1" + "0" * 30 +
                    ', "top_p": 7, "n_ctx": -1, "kv_type": "q1_0", "speculative": {"x": 1}, '
                    '"gpu_memory_fraction": 1e400, "think_budget": true, "reasoning": null, "flash_attn": "on"}')


def test_imported_settings_are_checked_field_by_field_and_bad_ones_get_defaults(tmp_path: Path, capsys):
    path = tmp_path / "chats.json"
    path.write_text(_tailor_export([_tailor_chat("Hostile", settings=HOSTILE_SETTINGS)]), encoding="utf-8")
    db = tmp_path / "h.sqlite3"
    assert main(["import", str(path), "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    assert out.endswith("; 1 mended on the way in (see above)\n")
    (line,) = err.splitlines()
    for field in ("system_prompt", "temperature", "max_tokens", "top_p", "n_ctx", "kv_type", "speculative",
                  "gpu_memory_fraction", "think_budget", "reasoning"):
        assert f"setting {field!r} must be " in line, field
    assert "'flash_attn'" not in line  # "on" is a good value: kept
    assert "must be text, not a list: the default" in line and "not a 31-digit number" in line
    store = ChatStore(db)
    (chat,) = store.list_conversations()
    # Every bad field its default, the good one kept.
    assert chat.settings == ChatSettings(load=LoadSettings(flash_attn="on"))
    store.close()
    _every_reader_works(db, capsys)


def test_settings_already_stored_with_bad_fields_read_as_defaults(tmp_path: Path):
    db = tmp_path / "h.sqlite3"
    store = ChatStore(db)
    ids = [store.create_conversation(title).id for title in ("Hostile", "Damaged")]
    store.close()
    raw = sqlite3.connect(db)
    for cid, settings in zip(ids, (HOSTILE_SETTINGS, "{not json"), strict=True):
        raw.execute("UPDATE conversations SET settings = ? WHERE id = ?", (settings, cid))
    raw.commit()
    raw.close()
    store = ChatStore(db)
    assert [store.get_conversation(cid).settings for cid in ids] == [ChatSettings(load=LoadSettings(flash_attn="on")),
                                                                        ChatSettings()]
    store.close()


def test_parse_settings_keeps_good_values_and_names_each_bad_one():
    parsed = parse_settings({"temperature": 1, "top_p": 0.5, "n_ctx": None, "speculative": "lookup",
                             "speculative_tokens": 4, "cpu_kv_bytes": 1 << 30, "unknown": [1]})
    assert parsed.problems == ()
    settings = ChatSettings(**parsed.fields)
    assert (settings.temperature, settings.top_p, settings.load.n_ctx) == (1.0, 0.5, None)
    load = settings.load
    assert (load.speculation.mode, load.speculation.tokens, load.torch.cpu_kv_bytes) == ("lookup", 4, 1 << 30)
    assert parse_settings([1, 2]).problems == ("settings must be an object, not list: the defaults are used",)


def test_a_disk_that_fills_part_way_says_how_many_were_saved_and_a_second_import_adds_the_rest(tmp_path: Path):
    chats = [_tailor_chat(f"Chat {i}", content="x" * 60_000) for i in range(60)]
    path = tmp_path / "chats.json"
    path.write_text(_tailor_export(chats), encoding="utf-8")
    db = tmp_path / "h.sqlite3"
    ChatStore(db).close()
    pages = {"limit": 0}

    def full_soon(p: Path, read_only: bool) -> sqlite3.Connection:
        conn = open_sqlite(p, read_only)
        if pages["limit"]:
            conn.execute(f"PRAGMA max_page_count = {pages['limit']}")
        return conn

    raw = sqlite3.connect(db)
    # The history opens for writing with 2 MiB of room (MIN_ROOM_BYTES); 60 chats of 60 kB need 3.6 MB.
    pages["limit"] = raw.execute("PRAGMA page_count").fetchone()[0] + (MIN_ROOM_BYTES + (400 << 10)) // 4096
    raw.close()
    store = ChatStore(db, connect=full_soon)
    result = import_file(store, path)
    saved = len(store.list_conversations())
    store.close()
    assert 0 < saved < 60 and len(result.imported) == saved, result
    assert result.error == (f"The import stopped at chat {saved + 1}: the disk that holds the chat history is full "
                            f"(database or disk is full). {saved} chats were saved before it; importing the file again "
                            "adds the rest (those saved are not added twice).")
    store = ChatStore(db)  # room again
    again = import_file(store, path)
    assert len(again.imported) == 60 - saved and len(again.skipped) == saved
    assert sorted(c.title for c in store.list_conversations()) == sorted(f"Chat {i}" for i in range(60))
    store.close()
