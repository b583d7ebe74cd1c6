"""Importing Tailor's JSON export into a real history file: exact round trip, no duplicates, bad files refused
with one line and nothing changed, each chat whole or not at all."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.services.chat_export import load_chats, to_json
from app.services.chat_import import (
    ChatImportError,
    ParsedChat,
    import_chats,
    import_file,
    parse_export,
    read_export,
)
from app.services.store import ChatStore, Conversation, Message
from tests.app.history_files import chats_of
from tests.app.test_chat_export import make_history


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    store = make_history(tmp_path / "source.sqlite3")
    path = tmp_path / "chats.json"
    path.write_text(to_json(load_chats(store)), encoding="utf-8")
    store.close()
    return path


def test_export_import_export_gives_the_same_bytes(exported: Path, tmp_path: Path):
    store = ChatStore(tmp_path / "empty.sqlite3")
    result = import_file(store, exported)
    assert result.imported == ["Maths", "Code / <b>HTML</b>\x07"] and result.skipped == []
    assert to_json(load_chats(store)).encode() == exported.read_bytes()
    store.close()


def test_importing_twice_adds_each_chat_once(exported: Path, tmp_path: Path):
    store = ChatStore(tmp_path / "target.sqlite3")
    mine = store.create_conversation("Mine")
    store.add_message(mine.id, "user", "keep me")
    import_file(store, exported)
    before = chats_of(store)
    again = import_file(store, exported)
    assert again.imported == [] and len(again.skipped) == 2
    assert chats_of(store) == before and len(before) == 3
    assert ("Mine", ["keep me"]) in before
    store.close()


def test_imported_chats_keep_their_times_states_reasoning_and_stats(exported: Path, tmp_path: Path):
    store = ChatStore(tmp_path / "target.sqlite3")
    import_file(store, exported)
    maths = next(c for c in store.list_conversations() if c.title == "Maths")
    source = json.loads(exported.read_text())["chats"][0]
    assert (maths.created, maths.updated) == (source["created"], source["updated"])
    assert maths.settings.reasoning == "high" and maths.settings.think_budget == 256
    _, answer, cut = store.list_messages(maths.id)
    assert answer.stats == {"gen_tokens": 12, "reasoning_tokens": 40, "ttft_s": 0.25}
    assert (cut.state, cut.reasoning, cut.reasoning_closed) == ("cancelled", "Let me think again about", False)
    assert store.conversation_uid(maths.id) == source["id"]
    store.close()


def _document(exported: Path) -> dict:
    return json.loads(exported.read_text())


def _bad_files(exported: Path) -> dict[str, tuple[str, str]]:
    """name: (file text, what the error says)."""
    text = exported.read_text()
    doc = _document(exported)
    unknown_role = _document(exported)
    unknown_role["chats"][1]["messages"][2]["role"] = "robot"  # the second chat: the first must not be added either
    newer = {**doc, "version": 2}
    missing = _document(exported)
    del missing["chats"][0]["messages"][0]["content"]
    bad_id = _document(exported)
    bad_id["chats"][0]["id"] = "not-a-uuid"
    twice = {**doc, "chats": [doc["chats"][0], doc["chats"][0]]}
    nan = text.replace('"created": ', '"created": NaN, "x": ', 1)
    return {
        "truncated": (text[: len(text) // 2], "invalid JSON at line"),
        "not json": ("hello", "invalid JSON at line 1 column 1"),
        "empty": ("", "invalid JSON"),
        "another format": (json.dumps({"format": "something", "chats": []}), 'no "format": "tailor-chats"'),
        "a list": ("[1, 2]", "not a Tailor chat export"),
        "newer version": (json.dumps(newer), "written by a newer Tailor (export version 2"),
        "unknown role": (json.dumps(unknown_role), "chat 2 ('Code / <b>HTML</b>\\x07'): message 3: unknown role 'robot'"),
        "missing content": (json.dumps(missing), 'message 1: "content" is missing'),
        "bad id": (json.dumps(bad_id), "id 'not-a-uuid' is not a UUID"),
        "same chat twice": (json.dumps(twice), "appears twice"),
        "not a number": (nan, '"created" must be a number'),
    }


@pytest.mark.parametrize("case", [
    "truncated", "not json", "empty", "another format", "a list", "newer version", "unknown role",
    "missing content", "bad id", "same chat twice", "not a number",
])
def test_a_bad_file_is_one_clear_line_and_changes_nothing(exported: Path, tmp_path: Path, case: str):
    text, expected = _bad_files(exported)[case]
    bad = tmp_path / "bad.json"
    bad.write_text(text, encoding="utf-8")
    store = ChatStore(tmp_path / "target.sqlite3")
    mine = store.create_conversation("Mine")
    store.add_message(mine.id, "user", "keep me")
    with pytest.raises(ChatImportError) as caught:
        import_file(store, bad)
    message = str(caught.value)
    assert expected in message and "\n" not in message and str(bad) in message
    assert chats_of(store) == [("Mine", ["keep me"])]
    store.close()


def test_a_file_over_the_limit_is_refused_by_its_size_before_reading(tmp_path: Path, monkeypatch):
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate(2 << 30)  # 2 GiB, sparse: no time or disk spent
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail("the file was read"))
    with pytest.raises(ChatImportError, match=r"huge.json is 2.0 GiB; an export larger than 1 GiB is refused"):
        read_export(huge)


def test_not_utf8_and_missing_files_are_one_line(tmp_path: Path):
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"format": "caf\xe9"}')
    with pytest.raises(ChatImportError, match="not UTF-8 text"):
        read_export(latin)
    with pytest.raises(ChatImportError, match="Cannot read .*nope.json: No such file"):
        read_export(tmp_path / "nope.json")


def test_a_chat_that_fails_while_it_is_written_leaves_no_half_of_it(exported: Path, tmp_path: Path):
    store = ChatStore(tmp_path / "target.sqlite3")
    good = parse_export(exported.read_text())
    # The database itself refuses the third message (its role CHECK): the chat's first rows go back too.
    bad = ParsedChat("11111111-1111-4111-8111-111111111111", Conversation(0, "Broken", 1.0, 2.0), [
        Message(0, 0, "user", "one", "complete", None, 1.0),
        Message(0, 0, "assistant", "two", "complete", None, 1.5),
        Message(0, 0, "robot", "three", "complete", None, 2.0),  # type: ignore[arg-type]
    ])
    with pytest.raises(sqlite3.IntegrityError):
        import_chats(store, [good[0], bad, good[1]])
    titles = [c.title for c in store.list_conversations()]
    assert titles == ["Maths"]  # the chat before it is in, whole; nothing of the broken one
    assert store.find_conversation_by_uid(bad.uid) is None
    assert store._db.execute("SELECT count(*) FROM messages WHERE content IN ('one', 'two')").fetchone() == (0,)
    store.close()


# ---------------------------------------------------------------- ChatGPT's conversations.json


def node(node_id: str, parent: str | None, role: str | None = None, text: str | None = None, *,
         created: float | None = None, content: dict | None = None, **message: object) -> tuple[str, dict]:
    """One entry of a ChatGPT mapping; no role: a node without a message (the root)."""
    entry: dict = {"id": node_id, "parent": parent, "children": [], "message": None}
    if role is not None:
        entry["message"] = {
            "id": node_id, "author": {"role": role, "name": None, "metadata": {}}, "create_time": created,
            "content": content or {"content_type": "text", "parts": [text]}, "status": "finished_successfully",
            "recipient": "all", "metadata": {}, "weight": 1.0, **message,
        }
    return node_id, entry


def chatgpt_conversation(cid: str, title: str, nodes: list[tuple[str, dict]], current: str) -> dict:
    mapping = dict(nodes)
    for node_id, entry in nodes:  # children as ChatGPT lists them
        if entry["parent"] in mapping:
            mapping[entry["parent"]]["children"].append(node_id)
    return {"title": title, "create_time": 1700000000.5, "update_time": 1700000300.25, "mapping": mapping,
            "current_node": current, "conversation_id": cid, "id": cid, "default_model_slug": "gpt-4o"}


def chatgpt_export() -> list[dict]:
    branches = chatgpt_conversation("c-branches", "Greetings", [
        node("root", None),
        node("sys", "root", "system", "", metadata={"is_visually_hidden_from_conversation": True}),
        node("u1", "sys", "user", "Hi", created=1700000001.0),
        node("a1-old", "u1", "assistant", "Hello (the first try)", created=1700000002.0),
        node("a1", "u1", "assistant", "Hey!", created=1700000003.0),
        node("u2", "a1", "user", "Some code?", created=1700000004.0),
        node("t", "u2", "assistant", None, content={"content_type": "thoughts", "thoughts": [
            {"summary": "Plan", "content": "A one-liner will do."}]}),
        node("a2", "t", "assistant", "```python\nprint('hi')\n```", created=1700000005.0),
    ], current="a2")
    cycle = chatgpt_conversation("c-cycle", "Round and round", [
        node("x", "y", "user", "x"), node("y", "x", "assistant", "y"),
    ], current="x")
    orphan = chatgpt_conversation("c-orphan", "Orphan", [node("a", "gone", "assistant", "lost")], current="a")
    tools = chatgpt_conversation("c-tools", "Tools and images", [
        node("root", None),
        node("u", "root", "user", None, content={"content_type": "multimodal_text", "parts": [
            {"content_type": "image_asset_pointer", "asset_pointer": "file-service://x"}, "What is this?"]}),
        node("call", "u", "assistant", None, content={"content_type": "code", "text": "look()"}, recipient="python"),
        node("out", "call", "tool", "result"),
        node("a", "out", "assistant", "A cat."),
    ], current="a")
    return [branches, cycle, orphan, tools]


def test_chatgpt_chats_follow_the_visible_path_and_bad_ones_are_skipped(tmp_path: Path):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(chatgpt_export()), encoding="utf-8")
    found = read_export(path)
    assert found.source == "chatgpt"
    assert found.problems == [
        "Skipped conversation 2 ('Round and round'): its messages' parents form a cycle (at node 'x')",
        "Skipped conversation 3 ('Orphan'): message 'gone' is missing from its mapping",
    ]
    store = ChatStore(tmp_path / "target.sqlite3")
    result = import_file(store, path)
    assert result.imported == ["Greetings", "Tools and images"] and len(result.problems) == 2
    assert chats_of(store) == [
        ("Greetings", ["Hi", "Hey!", "Some code?", "```python\nprint('hi')\n```"]),
        ("Tools and images", ["[image]\nWhat is this?", "A cat."]),
    ]
    greetings = next(c for c in store.list_conversations() if c.title == "Greetings")
    messages = store.list_messages(greetings.id)
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert [m.reasoning for m in messages] == ["", "", "", "A one-liner will do."]
    assert [m.created for m in messages] == [1700000001.0, 1700000003.0, 1700000004.0, 1700000005.0]
    assert (greetings.created, greetings.updated) == (1700000000.5, 1700000300.25)
    again = import_file(store, path)
    assert again.imported == [] and again.skipped == ["Greetings", "Tools and images"]
    assert len(store.list_conversations()) == 2
    store.close()


def test_an_imported_chatgpt_chat_exports_and_reimports_as_tailors_own(tmp_path: Path):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(chatgpt_export()), encoding="utf-8")
    store = ChatStore(tmp_path / "one.sqlite3")
    import_file(store, path)
    text = to_json(load_chats(store))
    store.close()
    other = ChatStore(tmp_path / "two.sqlite3")
    import_chats(other, parse_export(text))
    assert to_json(load_chats(other)) == text
    other.close()
