"""A reply's tool steps in the chat history: schema 7 adds their column, the chat loop saves them while the
reply streams, everything that copies a message carries them, a search reads what the model wrote in them
(not what tools answered), a damaged value costs the steps and nothing else, and a chat's tool settings are
checked like the others."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

import pytest

from app.services.history.opening import CALL_CUT_OFF
from app.services.history.recovery import recover_history
from app.services.history.settings_fields import parse_settings
from app.services.history.store import SCHEMA_VERSION, ChatSettings, ChatStore, ToolCallRecord, ToolStep
from app.services.history.tool_steps import (
    MAX_CALLS,
    ToolStepsError,
    steps_from_data,
    steps_from_json,
    steps_to_json,
)
from tests.app.services.history.history_files import old_history

READ = ToolCallRecord("call-1", "read_file", '{"path": "notes.txt"}', "files", "ok", "SECRET-RESULT <b>", 0.4)
GREP = ToolCallRecord("call-2", "grep", '{"pattern": "TODO"}', "files", "failed", "grep: no such file", 0.1)
STEPS = (
    ToolStep("Let me read the notes first.", (READ,), reasoning="The notes hold the plan."),
    ToolStep("", (GREP, ToolCallRecord("call-3", "web_search", '{"q": "lisbon"}', "", "denied", "Denied by you."))),
)


@pytest.fixture
def store(tmp_path):
    s = ChatStore(tmp_path / "chats.sqlite3")
    yield s
    s.close()


def _reply_with_steps(store: ChatStore, title: str = "Tools") -> tuple[int, int]:
    """A chat with a question and a finished reply that called tools; (chat id, reply id)."""
    chat = store.create_conversation(title)
    store.add_message(chat.id, "user", "Summarise my notes.")
    reply = store.add_message(chat.id, "assistant", "", state="streaming")
    store.update_message_tool_steps(reply.id, STEPS, "")
    store.finish_message(reply.id, "The notes say: ship it.", "complete", {"decode_tok_s": 40.0})
    return chat.id, reply.id


# ---------------------------------------------------------------- the column


def test_a_schema_6_file_is_upgraded_and_its_replies_have_no_steps(tmp_path):
    path = tmp_path / "chats.sqlite3"
    made = old_history(path, 6)
    store = ChatStore(path)
    assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 7
    chat = store.list_conversations()[-1]
    messages = store.list_messages(chat.id)
    assert [m.content for m in messages] == made[0][1]
    assert [m.tool_steps for m in messages] == [(), ()]
    assert chat.settings.tool_servers == () and chat.settings.tool_step_cap == 10
    store.update_message_tool_steps(messages[1].id, STEPS, "so far")
    assert store.get_message(messages[1].id).tool_steps == STEPS
    store.close()


def test_steps_round_trip_through_their_json_with_every_field():
    assert steps_from_json(steps_to_json(STEPS)) == STEPS
    assert steps_to_json(()) == "" and steps_from_json("") == ()
    data = json.loads(steps_to_json(STEPS))
    assert data[0] == {"text": "Let me read the notes first.", "reasoning": "The notes hold the plan.", "calls": [
        {"id": "call-1", "name": "read_file", "arguments": '{"path": "notes.txt"}', "server": "files",
         "status": "ok", "result": "SECRET-RESULT <b>", "seconds": 0.4}]}


@pytest.mark.parametrize(("data", "error"), [
    ({"text": "x"}, "the tool steps must be a list, not dict"),
    (["x"], "step 1 must be an object, not str"),
    ([{"text": "x", "calls": []}], 'step 1: "calls" must be a list of one call or more'),
    ([{"text": 5, "calls": [READ.to_dict()]}], 'step 1: "text" must be text, not 5'),
    ([{"text": "", "calls": [{**READ.to_dict(), "status": "exploded"}]}],
     'step 1, call 1: "status" must be one of pending, running, ok, failed, denied, cancelled, skipped, not \'exploded\''),
    ([{"text": "", "calls": [{**READ.to_dict(), "seconds": float("nan")}]}],
     'step 1, call 1: "seconds" must be a number from 0 to 1000000, not nan'),
    ([{"text": "", "calls": [{**READ.to_dict(), "seconds": True}]}],
     'step 1, call 1: "seconds" must be a number from 0 to 1000000, not true'),
    ([{"text": "", "calls": [{**READ.to_dict(), "name": "n" * 300}]}],
     'step 1, call 1: "name" is 300 characters long (at most 256 are read)'),
    ([{"text": "", "calls": [{"id": "1", "name": "x"}]}], 'step 1, call 1: "arguments" is missing'),
    ([{"text": "", "calls": [READ.to_dict()] * (MAX_CALLS + 1)}], "1,001 tool calls in one reply (at most 1,000 are read)"),
])
def test_hostile_steps_are_refused_with_one_line_naming_the_place(data, error):
    with pytest.raises(ToolStepsError) as caught:
        steps_from_data(data)
    assert str(caught.value) == error


def test_server_status_result_seconds_and_reasoning_may_be_left_out():
    (step,) = steps_from_data([{"text": "t", "calls": [{"id": "1", "name": "x", "arguments": "{}"}]}])
    assert step == ToolStep("t", (ToolCallRecord("1", "x", "{}"),))


# ---------------------------------------------------------------- while a reply streams


def test_the_chat_loop_saves_steps_and_text_as_the_reply_streams_and_finish_keeps_them(store):
    chat = store.create_conversation()
    store.add_message(chat.id, "user", "Read my notes.")
    reply = store.add_message(chat.id, "assistant", "", state="streaming")
    store.update_message_content(reply.id, "Let me read the notes first.")
    running = ToolStep("Let me read the notes first.", (ToolCallRecord("call-1", "read_file", "{}", "files", "running"),))
    store.update_message_tool_steps(reply.id, (running,))  # the text streamed so far is the step's now
    saved = store.get_message(reply.id)
    assert (saved.tool_steps, saved.content, saved.state) == ((running,), "", "streaming")
    done = running.with_call(running.calls[0].ended("ok", "ship it", 0.4))
    store.update_message_tool_steps(reply.id, (done,), "The notes")
    store.finish_message(reply.id, "The notes say: ship it.", "complete", None)  # steps left out: kept
    finished = store.get_message(reply.id)
    assert (finished.tool_steps, finished.content, finished.state) == ((done,), "The notes say: ship it.", "complete")
    store.finish_message(reply.id, "Edited.", "complete", tool_steps=())  # given: replaced (here by none)
    assert store.get_message(reply.id).tool_steps == ()


def test_a_reply_cut_off_by_a_crash_mid_call_opens_interrupted_with_the_call_cancelled(tmp_path):
    path = tmp_path / "chats.sqlite3"
    store = ChatStore(path)
    chat = store.create_conversation()
    reply = store.add_message(chat.id, "assistant", "", state="streaming")
    waiting = ToolStep("Reading.", (READ, ToolCallRecord("call-9", "grep", "{}", "files", "running")))
    store.update_message_tool_steps(reply.id, (waiting,))
    store.close()  # the window died here
    store = ChatStore(path)
    assert store.recovered == 1
    message = store.get_message(reply.id)
    assert message.state == "interrupted"
    assert message.tool_steps[0].calls == (READ, ToolCallRecord("call-9", "grep", "{}", "files", "cancelled", CALL_CUT_OFF))
    store.close()


# ---------------------------------------------------------------- copies


def test_copy_branch_carries_the_steps_and_a_regenerated_reply_has_its_own(store):
    chat_id, reply_id = _reply_with_steps(store)
    question = store.get_message(reply_id).parent_id
    again = store.add_message(chat_id, "assistant", "", state="streaming", parent_id=question)
    other = (ToolStep("", (ToolCallRecord("call-7", "list_dir", '{"path": "."}', "files", "ok", "a b c", 0.1),)),)
    store.update_message_tool_steps(again.id, other)
    store.finish_message(again.id, "Three files.", "complete")
    versions = store.versions(chat_id)
    assert (versions[reply_id].count, versions[again.id].index) == (2, 2)
    assert store.get_message(reply_id).tool_steps == STEPS and store.get_message(again.id).tool_steps == other
    copy = store.copy_branch(reply_id)
    assert [m.tool_steps for m in store.list_messages(copy.id)] == [(), STEPS]
    store.show_branch(again.id)
    assert store.list_messages(chat_id)[-1].tool_steps == other


def test_recovering_a_history_keeps_the_steps_and_drops_only_those_it_cannot_read(tmp_path):
    path = tmp_path / "chats.sqlite3"
    store = ChatStore(path)
    chat_id, reply_id = _reply_with_steps(store)
    _, bad_id = _reply_with_steps(store, "Damaged")
    store._db.execute("UPDATE messages SET tool_steps = '[{\"text\": ' WHERE id = ?", (bad_id,))
    store.close()
    recover_history(path)
    store = ChatStore(path)
    assert store.get_message(reply_id).tool_steps == STEPS
    bad = store.get_message(bad_id)
    assert (bad.content, bad.tool_steps) == ("The notes say: ship it.", ())
    with closing(sqlite3.connect(path)) as raw:
        assert raw.execute("SELECT tool_steps FROM messages WHERE id = ?", (bad_id,)).fetchone() == ("",)
    store.close()


# ---------------------------------------------------------------- damage


@pytest.mark.parametrize("damaged", ["[{\"text\": ", "{\"a\": 1}", '[{"text": "x", "calls": [{"id": 5}]}]', "x" * 10])
def test_a_damaged_value_reads_as_no_steps_with_a_warning_and_nothing_else_breaks(store, caplog, damaged):
    chat_id, reply_id = _reply_with_steps(store)
    store._db.execute("UPDATE messages SET tool_steps = ? WHERE id = ?", (damaged, reply_id))
    shown = store.list_messages(chat_id)
    assert [(m.content, m.tool_steps) for m in shown] == [("Summarise my notes.", ()), ("The notes say: ship it.", ())]
    assert f"The tool steps of message {reply_id} cannot be read" in caplog.text
    assert store.find_in_conversation(chat_id, "ship it") == reply_id  # the search reads past it
    assert store.find_in_conversation(chat_id, "read_file") is None
    assert [c.id for c in store.list_conversations("notes")] == [chat_id]


def test_a_value_of_another_type_reads_as_no_steps(store, caplog):
    chat_id, reply_id = _reply_with_steps(store)
    store._db.execute("UPDATE messages SET tool_steps = x'00ff' WHERE id = ?", (reply_id,))
    assert store.get_message(reply_id).tool_steps == ()
    assert "cannot be read (the tool steps are bytes, not text)" in caplog.text


# ---------------------------------------------------------------- search


def test_a_search_finds_what_the_model_wrote_in_steps_not_what_tools_answered(store):
    chat_id, reply_id = _reply_with_steps(store)
    other = store.create_conversation("Elsewhere")
    store.add_message(other.id, "user", "nothing here")
    for found in ("read the NOTES first", "read_file", "notes.txt", "TODO", "web_search", "lisbon"):
        assert store.find_in_conversation(chat_id, found) == reply_id, found
        assert [c.id for c in store.list_conversations(found)] == [chat_id], found
    assert store.find_in_conversation(chat_id, "hold the plan") == reply_id  # a step's reasoning, as a reply's
    assert store.list_conversations("hold the plan") == []  # the list searches no reasoning
    for result in ("SECRET-RESULT", "no such file", "Denied by you"):
        assert store.find_in_conversation(chat_id, result) is None, result
        assert store.list_conversations(result) == [], result
    assert store.list_conversations("files") == []  # a call's server is not what the model wrote


# ---------------------------------------------------------------- settings


def test_tool_settings_round_trip_and_are_stored_flat(store):
    settings = ChatSettings(tool_servers=("files", "web"), allowed_tools=("read_file",), tool_step_cap=25,
                            tool_choice="required")
    data = json.loads(settings.to_json())
    assert (data["tool_servers"], data["allowed_tools"], data["tool_step_cap"], data["tool_choice"]) == (
        ["files", "web"], ["read_file"], 25, "required")
    chat = store.create_conversation("Tools", settings)
    assert store.get_conversation(chat.id).settings == settings
    assert ChatSettings.from_json("{}").tool_servers == () and ChatSettings().tool_step_cap == 10
    assert ChatSettings.from_json("{}").tool_choice == "auto"  # chats stored before the choice existed


@pytest.mark.parametrize(("key", "value", "default"), [
    ("tool_servers", "files", ()), ("tool_servers", ["files", 3], ()), ("tool_servers", [""], ()),
    ("tool_servers", ["a\nb"], ()), ("allowed_tools", ["x" * 257], ()), ("allowed_tools", ["t"] * 257, ()),
    ("allowed_tools", None, ()), ("tool_step_cap", 0, 10), ("tool_step_cap", 101, 10), ("tool_step_cap", 2.5, 10),
    ("tool_step_cap", True, 10), ("tool_step_cap", "10", 10), ("tool_choice", "always", "auto"),
    ("tool_choice", "echo", "auto"), ("tool_choice", True, "auto"), ("tool_choice", None, "auto"),
])
def test_a_tool_setting_of_the_wrong_type_or_range_falls_back_with_a_line(key, value, default):
    parsed = parse_settings({key: value, "tool_servers" if key != "tool_servers" else "allowed_tools": ["kept"]})
    settings = ChatSettings(**parsed.fields)
    assert getattr(settings, key) == default
    assert ("kept",) in (settings.tool_servers, settings.allowed_tools)  # the good one beside it stays
    (problem,) = parsed.problems
    assert problem.startswith(f"setting {key!r} must be ") and problem.endswith(" is used")


def test_a_search_for_quotes_backslashes_and_wildcards_in_a_step_finds_them_literally(store):
    chat = store.create_conversation("Odd characters")
    reply = store.add_message(chat.id, "assistant", "Done.")
    text = 'I said "hi" in C:\\temp\\new\tthen 100% of a_b'
    store.update_message_tool_steps(reply.id, (ToolStep(text, (READ,)),), "Done.")
    for found in ('"hi" in C:\\temp\\new', "new\tthen", "100% of a_b"):
        assert store.find_in_conversation(chat.id, found) == reply.id, found
        assert [c.id for c in store.list_conversations(found)] == [chat.id], found
    for missing in ("100%% of", "a%b", "C:\\\\temp"):
        assert store.find_in_conversation(chat.id, missing) is None, missing
        assert store.list_conversations(missing) == [], missing
