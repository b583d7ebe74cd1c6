"""A chat's messages as a tree (store schema 6): versions, branches, copies, search across branches, folders
and pins, and the upgrade of a file the previous release wrote."""

from __future__ import annotations

import shutil
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from app.services.history.store import SCHEMA_VERSION, ChatSettings, ChatStore, Conversation, Message
from app.services.load_settings import LoadSettings
from tests.paths import FIXTURES

RELEASE_FILE = FIXTURES / "history_release_v5.sqlite3"


@pytest.fixture
def store(tmp_path: Path):
    s = ChatStore(tmp_path / "chats.sqlite3")
    yield s
    s.close()


def _texts(store: ChatStore, cid: int) -> list[str]:
    return [m.content for m in store.list_messages(cid)]


def test_messages_added_in_turn_form_one_branch(store: ChatStore):
    c = store.create_conversation()
    ids = [store.add_message(c.id, role, text).id for role, text in
           [("user", "Hi"), ("assistant", "Hello"), ("user", "Bye")]]
    messages = store.list_messages(c.id)
    assert [m.parent_id for m in messages] == [None, ids[0], ids[1]]
    assert store.leaf_id(c.id) == ids[2]
    assert {v.count for v in store.versions(c.id).values()} == {1}


def test_a_regenerated_reply_is_a_version_beside_the_old_one(store: ChatStore):
    c = store.create_conversation()
    user = store.add_message(c.id, "user", "Name a colour.")
    first = store.add_message(c.id, "assistant", "Red.")
    second = store.add_message(c.id, "assistant", "Blue.", parent_id=user.id)
    assert _texts(store, c.id) == ["Name a colour.", "Blue."]
    versions = store.versions(c.id)
    assert (versions[second.id].index, versions[second.id].count) == (2, 2)
    assert versions[first.id].ids == (first.id, second.id)
    store.show_branch(first.id)  # ‹ 1/2 ›
    assert _texts(store, c.id) == ["Name a colour.", "Red."]
    # The conversation goes on from the version shown.
    store.add_message(c.id, "user", "Darker?")
    assert _texts(store, c.id) == ["Name a colour.", "Red.", "Darker?"]
    assert store.message_count(c.id) == 4


def test_editing_an_earlier_message_starts_a_branch_and_keeps_the_old_one(store: ChatStore):
    c = store.create_conversation()
    q1 = store.add_message(c.id, "user", "Capital of France?")
    a1 = store.add_message(c.id, "assistant", "Paris.")
    store.add_message(c.id, "user", "And Italy?")
    old_end = store.add_message(c.id, "assistant", "Rome.")
    edited = store.add_message(c.id, "user", "Capital of Spain?", parent_id=q1.parent_id)
    store.add_message(c.id, "assistant", "Madrid.")
    assert _texts(store, c.id) == ["Capital of Spain?", "Madrid."]
    assert store.versions(c.id)[edited.id].ids == (q1.id, edited.id)
    store.show_branch(q1.id)  # back to the first version: its newest branch, to its end
    assert store.leaf_id(c.id) == old_end.id
    assert _texts(store, c.id) == ["Capital of France?", "Paris.", "And Italy?", "Rome."]
    assert store.get_message(a1.id).parent_id == q1.id


def test_deleting_a_version_shows_the_newest_one_left(store: ChatStore):
    c = store.create_conversation()
    user = store.add_message(c.id, "user", "Hi")
    old = store.add_message(c.id, "assistant", "Hello")
    failed = store.add_message(c.id, "assistant", "", state="streaming", parent_id=user.id)
    store.delete_message(failed.id)
    assert store.leaf_id(c.id) == old.id and _texts(store, c.id) == ["Hi", "Hello"]
    store.delete_message(old.id)
    assert _texts(store, c.id) == ["Hi"]


def test_a_branch_copied_to_a_new_chat_leaves_the_original_untouched(store: ChatStore):
    settings = ChatSettings(temperature=0.2, load=LoadSettings(n_ctx=8192))
    c = store.create_conversation("Trip", settings)
    store.add_message(c.id, "user", "Plan a trip.")
    middle = store.add_message(c.id, "assistant", "Where to?")
    store.add_message(c.id, "user", "Rome.")
    copy = store.copy_branch(middle.id)
    assert copy is not None and copy.id != c.id and copy.title == "Trip (branch)" and copy.settings == settings
    assert _texts(store, copy.id) == ["Plan a trip.", "Where to?"]
    assert _texts(store, c.id) == ["Plan a trip.", "Where to?", "Rome."]
    assert store.conversation_uid(copy.id) != store.conversation_uid(c.id)
    assert store.copy_branch(999) is None


def test_search_finds_text_in_any_branch_and_the_hit_s_branch_can_be_shown(store: ChatStore):
    c = store.create_conversation("Colours")
    user = store.add_message(c.id, "user", "Name a colour.")
    hidden = store.add_message(c.id, "assistant", "Vermilion, 100% sure_ly.")
    store.add_message(c.id, "assistant", "Blue.", parent_id=user.id)
    assert [x.id for x in store.list_conversations("vermilion")] == [c.id]
    assert [x.id for x in store.list_conversations("100% sure_")] == [c.id]  # LIKE's wildcards are literal
    assert store.list_conversations("100%% sure") == []
    hit = store.find_in_conversation(c.id, "VERMILION")
    assert hit == hidden.id
    store.show_branch(hit)
    assert _texts(store, c.id)[-1].startswith("Vermilion")
    assert store.find_in_conversation(c.id, "green") is None and store.find_in_conversation(c.id, "  ") is None


def test_folders_hold_chats_and_pinned_chats_list_first(store: ChatStore):
    a, b, c = (store.create_conversation(t) for t in ("A", "B", "C"))
    work = store.create_folder("  Work   stuff ")
    assert work.name == "Work stuff"
    with pytest.raises(ValueError, match="exists already"):
        store.create_folder("work STUFF")
    with pytest.raises(ValueError, match="needs a name"):
        store.create_folder(" \n ")
    with pytest.raises(ValueError, match="at most 80"):
        store.create_folder("x" * 81)
    store.move_conversation(a.id, work.id)
    store.move_conversation(b.id, work.id)
    with pytest.raises(ValueError, match="no folder"):
        store.move_conversation(c.id, 12345)
    assert [x.title for x in store.list_conversations(folder_id=work.id)] == ["B", "A"]
    assert [x.title for x in store.list_conversations(folder_id=None)] == ["C"]
    store.set_pinned(a.id, True)
    assert [x.title for x in store.list_conversations()] == ["A", "C", "B"]
    assert store.get_conversation(a.id).pinned and store.get_conversation(a.id).folder_id == work.id
    store.rename_folder(work.id, "Job")
    assert [f.name for f in store.list_folders()] == ["Job"]
    store.delete_folder(work.id)  # its chats stay, in no folder
    assert {x.title for x in store.list_conversations(folder_id=None)} == {"A", "B", "C"}


def test_a_whole_tree_is_inserted_with_its_branch_shown(store: ChatStore):
    at = time.time()
    tree = [Message(10, 0, "user", "Q", "complete", None, at),
            Message(11, 0, "assistant", "A1", "complete", None, at, parent_id=10),
            Message(12, 0, "assistant", "A2", "complete", None, at, parent_id=10)]
    cid = store.insert_conversation(Conversation(0, "Tree", at, at, pinned=True), tree, "u-1", leaf_id=11)
    assert _texts(store, cid) == ["Q", "A1"] and store.get_conversation(cid).pinned
    assert [m.content for m in store.all_messages(cid)] == ["Q", "A1", "A2"]
    firsts = [Message(1, 0, "user", "Q1", "complete", None, at), Message(2, 0, "user", "Q2", "complete", None, at)]
    both = store.insert_conversation(Conversation(0, "Two first versions", at, at), firsts, "u-3")
    assert [m.parent_id for m in store.all_messages(both)] == [None, None] and _texts(store, both) == ["Q2"]
    backwards = [Message(1, 0, "user", "Q", "complete", None, at, parent_id=2),
                 Message(2, 0, "assistant", "A", "complete", None, at)]
    with pytest.raises(ValueError, match="not an earlier message"):
        store.insert_conversation(Conversation(0, "Bad", at, at), backwards, "u-2")
    assert store.find_conversation_by_uid("u-2") is None  # nothing of it was added


def test_a_chat_of_100000_messages_opens_at_once(store: ChatStore):
    at = time.time()
    many = [Message(i, 0, "user" if i % 2 == 0 else "assistant", f"m{i}", "complete", None, at)
            for i in range(100_000)]
    cid = store.insert_conversation(Conversation(0, "Long", at, at), many, "u-long", linear=True)
    t0 = time.perf_counter()
    branch = store.list_messages(cid)
    versions = store.versions(cid)
    spent = time.perf_counter() - t0
    assert len(branch) == 100_000 and branch[-1].content == "m99999" and len(versions) == 100_000
    assert spent < 5.0, f"{spent:.2f} s"


def test_the_previous_release_s_file_upgrades_to_one_branch_per_chat_with_nothing_lost(tmp_path: Path):
    path = tmp_path / "chats.sqlite3"
    shutil.copy(RELEASE_FILE, path)
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 5
        before = db.execute("SELECT id, conversation_id, role, content, state, stats, created, reasoning,"
                            " reasoning_closed FROM messages ORDER BY id").fetchall()
        chats = db.execute("SELECT id, title, created, updated, settings, external_id FROM conversations").fetchall()
    store = ChatStore(path)
    try:
        with closing(sqlite3.connect(path)) as db:
            assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
            after = db.execute("SELECT id, conversation_id, role, content, state, stats, created, reasoning,"
                               " reasoning_closed FROM messages ORDER BY id").fetchall()
            assert after == before
            assert db.execute("SELECT id, title, created, updated, settings, external_id FROM conversations"
                              ).fetchall() == chats
        capitals, empty, bread = sorted(store.list_conversations(), key=lambda c: c.id)
        branch = store.list_messages(capitals.id)
        assert [m.content for m in branch] == ["You are a geography tutor.", "What is the capital of France?",
                                               "Paris.", "And of Italy?", "Ro"]
        assert [m.parent_id for m in branch] == [None, *(m.id for m in branch[:-1])]
        assert branch[2].reasoning == "France's capital is Paris." and not branch[4].reasoning_closed
        assert capitals.settings.think_budget == 256 and capitals.folder_id is None and not capitals.pinned
        assert store.list_messages(empty.id) == []
        assert _texts(store, bread.id)[-1] == "Thanks!"
        assert [p.name for p in store.list_presets()] == ["Coder", "Tailor"]
        # Work goes on in the upgraded file: a new version of the last reply.
        again = store.add_message(capitals.id, "assistant", "Rome.", parent_id=branch[3].id)
        assert store.versions(capitals.id)[again.id].count == 2
    finally:
        store.close()
