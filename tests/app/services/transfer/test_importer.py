"""Importing Tailor's JSON export into a real history file: exact round trip with branches, folders and pins,
version 1 files, no duplicates, bad files refused in one line with nothing changed, bad chats left out by name,
damaged files kept up to the damage, each chat whole or not at all."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.services.history.store import ChatStore, Conversation, Message
from app.services.transfer.export import VERSION, load_chats, to_json
from app.services.transfer.importer import ChatImportError, ParsedChat, import_chats, import_file, probe_file
from tests.app.services.history.history_files import chats_of
from tests.app.services.transfer.test_export import add_branches, make_history


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    """The two chats of make_history and the branched, filed and pinned one of add_branches, exported."""
    store = make_history(tmp_path / "source.sqlite3")
    add_branches(store)
    path = tmp_path / "chats.json"
    path.write_text(to_json(load_chats(store)), encoding="utf-8")
    store.close()
    return path


@pytest.fixture
def target(tmp_path: Path):
    """A history holding one chat of its own, which no import may touch."""
    store = ChatStore(tmp_path / "target.sqlite3")
    mine = store.create_conversation("Mine")
    store.add_message(mine.id, "user", "keep me")
    yield store
    store.close()


def test_export_import_export_gives_the_same_bytes_with_branches_folder_and_pin(exported: Path, tmp_path: Path):
    store = ChatStore(tmp_path / "empty.sqlite3")
    result = import_file(store, exported)
    assert result.imported == ["Maths", "Code / <b>HTML</b>\x07", "Branches"] and result.skipped == []
    assert (result.error, result.cancelled, result.problems, result.source) == (None, False, [], "tailor")
    assert to_json(load_chats(store)).encode() == exported.read_bytes()
    branches = store.list_conversations()[0]  # pinned: first
    assert (branches.title, branches.pinned) == ("Branches", True)
    assert [f.name for f in store.list_folders()] == ["Work"] and branches.folder_id == store.list_folders()[0].id
    assert [m.content for m in store.list_messages(branches.id)] == ["Name a colour", "Blue", "Another?", "Green"]
    versions = store.versions(branches.id)
    assert sorted((v.index, v.count) for v in versions.values()).count((2, 2)) == 2  # "Blue" and "Name a fruit"
    store.close()


def test_a_folder_of_the_same_name_is_used_not_made_again(exported: Path, target: ChatStore):
    work = target.create_folder("WORK")
    import_file(target, exported)
    assert [f.name for f in target.list_folders()] == ["WORK"]
    assert [c.title for c in target.list_conversations(folder_id=work.id)] == ["Branches"]


def test_a_chat_of_first_messages_only_keeps_them_all_first(tmp_path: Path):
    source = ChatStore(tmp_path / "source.sqlite3")
    chat = source.create_conversation("Two tries")
    source.add_message(chat.id, "user", "first try")
    second = source.add_message(chat.id, "user", "second try", parent_id=None)
    assert source.list_messages(chat.id) == [second]
    text = to_json(load_chats(source))
    source.close()
    path = tmp_path / "tries.json"
    path.write_text(text, encoding="utf-8")
    store = ChatStore(tmp_path / "target.sqlite3")
    import_file(store, path)
    (copy,) = store.list_conversations()
    assert [m.content for m in store.list_messages(copy.id)] == ["second try"]
    assert all(m.parent_id is None for m in store.all_messages(copy.id))
    assert to_json(load_chats(store)) == text
    store.close()


def test_importing_twice_adds_each_chat_once(exported: Path, target: ChatStore):
    import_file(target, exported)
    before = chats_of(target)
    again = import_file(target, exported)
    assert again.imported == [] and len(again.skipped) == 3
    assert chats_of(target) == before and len(before) == 4
    assert ("Mine", ["keep me"]) in before


def test_imported_chats_keep_their_times_states_reasoning_and_stats(exported: Path, target: ChatStore):
    import_file(target, exported)
    maths = next(c for c in target.list_conversations() if c.title == "Maths")
    source = json.loads(exported.read_text())["chats"][0]
    assert (maths.created, maths.updated) == (source["created"], source["updated"])
    assert maths.settings.reasoning == "high" and maths.settings.think_budget == 256
    _, answer, cut = target.list_messages(maths.id)
    assert answer.stats == {"gen_tokens": 12, "reasoning_tokens": 40, "ttft_s": 0.25}
    assert (cut.state, cut.reasoning, cut.reasoning_closed) == ("cancelled", "Let me think again about", False)
    assert target.conversation_uid(maths.id) == source["id"]


def _version_1(exported: Path) -> str:
    """The chats of `exported` as the previous release wrote them: version 1, one line per chat, every key
    sorted (so "chats" comes before "format" and "version")."""
    chats = json.loads(exported.read_text())["chats"][:2]  # the two chats without branches
    for chat in chats:
        for key in ("folder", "pinned", "leaf"):
            del chat[key]
        for message in chat["messages"]:
            del message["id"], message["parent"]
    document = {"format": "tailor-chats", "version": 1, "chats": chats}
    return json.dumps(document, sort_keys=True, ensure_ascii=False, indent=2) + "\n"


def test_a_version_1_export_imports_as_one_line_per_chat(exported: Path, tmp_path: Path):
    old = tmp_path / "v1.json"
    old.write_text(_version_1(exported), encoding="utf-8")
    assert probe_file(old) == "tailor"
    store = ChatStore(tmp_path / "target.sqlite3")
    assert import_file(store, old).imported == ["Maths", "Code / <b>HTML</b>\x07"]
    maths = next(c for c in store.list_conversations() if c.title == "Maths")
    first, answer, cut = store.all_messages(maths.id)
    assert (first.parent_id, answer.parent_id, cut.parent_id) == (None, first.id, answer.id)
    assert store.list_messages(maths.id) == [first, answer, cut]
    store.close()


def test_a_cut_version_1_export_is_refused_whole(exported: Path, target: ChatStore, tmp_path: Path):
    text = _version_1(exported)
    old = tmp_path / "v1.json"
    old.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(ChatImportError, match="is damaged .*the file ends early at byte .* before its format and"
                                              " version.*nothing was imported"):
        import_file(target, old)
    assert chats_of(target) == [("Mine", ["keep me"])]


def _refused(exported: Path) -> dict[str, tuple[str, str]]:
    """name: (file text, what the error says) for files refused before anything is written."""
    doc = json.loads(exported.read_text())
    return {
        "not json": ("hello", "is not a Tailor chat export: invalid JSON (Expecting value) at byte 0"),
        "empty": ("", "is not a Tailor chat export: it is empty"),
        "another format": (json.dumps({"format": "something", "chats": []}), 'no "format": "tailor-chats"'),
        "a list": ("[1, 2]", "not a Tailor chat export (nor ChatGPT's conversations.json)"),
        "a number": ("42", "is not a Tailor chat export"),
        "newer version": (json.dumps({**doc, "version": VERSION + 1}),
                          f"written by a newer Tailor (export version {VERSION + 1}; this one reads up to {VERSION})"),
        "version 0": (json.dumps({**doc, "version": 0}), "unknown export version 0"),
        "chats not a list": (json.dumps({"format": "tailor-chats", "version": 2, "chats": {}}), '"chats" must be a list'),
        "no chats": (json.dumps({"format": "tailor-chats", "version": 2}), '"chats" must be a list'),
        "broken before its header": ('{"format": "tailor-chats", "version": ', "the file ends early at byte 38"),
        "not utf-8": ('{"format": "caf\xe9"}', "not UTF-8 text at byte 15"),
    }


@pytest.mark.parametrize("case", [
    "not json", "empty", "another format", "a list", "a number", "newer version", "version 0", "chats not a list",
    "no chats", "broken before its header", "not utf-8",
])
def test_a_file_that_is_no_export_is_one_clear_line_and_changes_nothing(exported: Path, target: ChatStore,
                                                                        tmp_path: Path, case: str):
    text, expected = _refused(exported)[case]
    bad = tmp_path / "bad.json"
    bad.write_bytes(text.encode("latin-1") if case == "not utf-8" else text.encode("utf-8"))
    with pytest.raises(ChatImportError) as caught:
        import_file(target, bad)
    message = str(caught.value)
    assert expected in message and "\n" not in message and str(bad) in message
    with pytest.raises(ChatImportError, match="bad.json"):
        probe_file(bad)
    assert chats_of(target) == [("Mine", ["keep me"])]


def _bad_chats(exported: Path) -> dict[str, tuple[dict, str]]:
    """name: (the document with its second chat spoiled, the line that names it)."""
    cases: dict[str, tuple[str, object, str]] = {
        "unknown role": ("messages.2.role", "robot", "message 3: unknown role 'robot'"),
        "unknown state": ("messages.0.state", "typing", "message 1: unknown state 'typing'"),
        "missing content": ("messages.0.content", KeyError, 'message 1: "content" is missing'),
        "bad id": ("id", "not-a-uuid", "id 'not-a-uuid' is not a UUID"),
        # A number out of range (NaN, 1e308) is mended, not refused: tests/app/services/transfer/test_hostile_imports.py.
        "not a number": ("created", "yesterday", '"created" must be a number or null, not str'),
        "message numbered out of order": ("messages.1.id", 7, "message 2: its id is 7, not 2"),
        "parent after it": ("messages.1.parent", 3, "message 2: its parent 3 is not an earlier message"),
        "leaf not a message": ("leaf", 9, "its leaf 9 is not one of its messages"),
        "pinned not a bool": ("pinned", "yes", '"pinned" must be a bool'),
        "folder too long": ("folder", "x" * 200, "its folder 'xxx"),
        "not an object": ("", "chat", "it is not an object"),
    }
    found = {}
    for name, (where, value, line) in cases.items():
        doc = json.loads(exported.read_text())
        if not where:
            doc["chats"][1] = value
            found[name] = (doc, line)
            continue
        *path, last = where.split(".")
        node = doc["chats"][1]
        for step in path:
            node = node[int(step)] if step.isdigit() else node[step]
        if value is KeyError:
            del node[last]
        else:
            node[int(last) if last.isdigit() else last] = value
        found[name] = (doc, line)
    return found


@pytest.mark.parametrize("case", [
    "unknown role", "unknown state", "missing content", "bad id", "not a number",
    "message numbered out of order", "parent after it", "leaf not a message", "pinned not a bool",
    "folder too long", "not an object",
])
def test_a_bad_chat_is_left_out_by_name_and_the_others_imported(exported: Path, target: ChatStore, tmp_path: Path,
                                                                case: str):
    doc, expected = _bad_chats(exported)[case]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    result = import_file(target, bad)
    (line,) = result.problems
    assert line.startswith("Skipped ") and expected in line and "\n" not in line
    assert case == "not an object" or line.startswith("Skipped chat 2 ('Code / <b>HTML</b>\\x07'): ")
    assert result.imported == ["Maths", "Branches"] and result.error is None
    assert sorted(t for t, _ in chats_of(target)) == ["Branches", "Maths", "Mine"]
    assert [f.name for f in target.list_folders()] == ["Work"]


def test_the_same_chat_twice_in_a_file_is_added_once(exported: Path, target: ChatStore, tmp_path: Path):
    doc = json.loads(exported.read_text())
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps({**doc, "chats": [doc["chats"][0], doc["chats"][0]]}), encoding="utf-8")
    result = import_file(target, twice)
    assert (result.imported, result.skipped) == (["Maths"], ["Maths"])


def test_a_file_over_the_limit_is_refused_by_its_size_before_reading(tmp_path: Path, target: ChatStore, monkeypatch):
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate(2 << 30)  # 2 GiB, sparse: no time or disk spent
    monkeypatch.setattr("app.services.transfer.importer.open", lambda *a: pytest.fail("the file was opened"), raising=False)
    for attempt in (import_file, probe_file):
        with pytest.raises(ChatImportError, match=r"huge.json is 2.0 GiB; an export larger than 1 GiB is refused"):
            attempt(target, huge) if attempt is import_file else attempt(huge)
    assert chats_of(target) == [("Mine", ["keep me"])]


def test_a_missing_file_is_one_line(tmp_path: Path, target: ChatStore):
    with pytest.raises(ChatImportError, match="Cannot read .*nope.json: no such file"):
        import_file(target, tmp_path / "nope.json")


def test_a_chat_that_fails_while_it_is_written_leaves_no_half_of_it(exported: Path, target: ChatStore):
    source = ChatStore(exported.with_name("source.sqlite3"))
    good = [ParsedChat(r.uid, r.conversation, list(r.messages), None, None) for r in load_chats(source)[:2]]
    source.close()
    # The database itself refuses the third message (its role CHECK): the chat's first rows go back too.
    bad = ParsedChat("11111111-1111-4111-8111-111111111111", Conversation(0, "Broken", 1.0, 2.0), [
        Message(1, 0, "user", "one", "complete", None, 1.0),
        Message(2, 0, "assistant", "two", "complete", None, 1.5, parent_id=1),
        Message(3, 0, "robot", "three", "complete", None, 2.0, parent_id=2),  # type: ignore[arg-type]
    ])
    with pytest.raises(sqlite3.IntegrityError):
        import_chats(target, [good[0], bad, good[1]])
    assert sorted(t for t, _ in chats_of(target)) == ["Maths", "Mine"]  # the chat before it is in, whole
    assert target.find_conversation_by_uid(bad.uid) is None
    assert target._db.execute("SELECT count(*) FROM messages WHERE content IN ('one', 'two')").fetchone() == (0,)
