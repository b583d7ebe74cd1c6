"""The chat history keeps each reply's reasoning apart from its answer: schema 4 adds the columns,
older files open upgraded with their chats, a chat's reasoning settings live in its JSON."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

from app.chat.reasoning_text import copy_text, finished_header, reasoning_header
from app.chat.stats_line import format_stats
from app.services.history.recovery import recover_history
from app.services.history.store import SCHEMA_VERSION, ChatSettings, ChatStore, Message, migrate
from app.services.load_settings import LoadSettings
from tests.app.services.history.history_files import old_history


def test_a_schema_3_file_is_upgraded_and_its_replies_have_no_reasoning(tmp_path):
    path = tmp_path / "chats.sqlite3"
    made = old_history(path, 3)
    store = ChatStore(path)
    assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conversation = store.list_conversations()[-1]
    messages = store.list_messages(conversation.id)
    assert [m.content for m in messages] == made[0][1]
    assert [(m.reasoning, m.reasoning_closed) for m in messages] == [("", True), ("", True)]
    assert conversation.settings.reasoning == "auto" and conversation.settings.think_budget is None
    reply = store.add_message(conversation.id, "assistant", "", state="streaming")
    store.update_message_content(reply.id, "", "Thinking about it", False)
    assert (store.get_message(reply.id).reasoning, store.get_message(reply.id).reasoning_closed) == (
        "Thinking about it", False)
    store.close()


def test_the_answer_and_the_reasoning_are_saved_apart_and_a_save_without_reasoning_keeps_it(tmp_path):
    store = ChatStore(tmp_path / "chats.sqlite3")
    conversation = store.create_conversation()
    reply = store.add_message(conversation.id, "assistant", "", state="streaming")
    store.update_message_content(reply.id, "", "step one", False)
    store.update_message_content(reply.id, "The answer")  # no reasoning given: what is stored stays
    assert (store.get_message(reply.id).content, store.get_message(reply.id).reasoning) == ("The answer", "step one")
    store.finish_message(reply.id, "The answer.", "complete", {"reasoning_tokens": 2}, "step one, two", True)
    message = store.get_message(reply.id)
    assert (message.content, message.reasoning, message.reasoning_closed, message.state) == (
        "The answer.", "step one, two", True, "complete")
    store.finish_message(reply.id, "Edited.", "complete")
    assert store.get_message(reply.id).reasoning == "step one, two"
    store.close()


def test_recovering_a_history_keeps_the_reasoning(tmp_path):
    path = tmp_path / "chats.sqlite3"
    store = ChatStore(path)
    conversation = store.create_conversation("Thinking")
    reply = store.add_message(conversation.id, "assistant", "", state="streaming")
    store.finish_message(reply.id, "391.", "complete", None, "17 * 23", False)
    store.close()
    recover_history(path)
    store = ChatStore(path)
    (message,) = store.list_messages(store.list_conversations()[0].id)
    assert (message.content, message.reasoning, message.reasoning_closed) == ("391.", "17 * 23", False)
    store.close()


def test_reasoning_settings_round_trip_and_old_or_bad_json_gets_the_defaults():
    settings = ChatSettings(reasoning="low", think_budget=2048)
    data = json.loads(settings.to_json())
    assert (data["reasoning"], data["think_budget"]) == ("low", 2048)
    assert ChatSettings.from_json(settings.to_json()) == settings
    old = json.dumps({"temperature": 0.3, "n_ctx": 4096})  # written before reasoning existed
    assert ChatSettings.from_json(old) == ChatSettings(temperature=0.3, load=LoadSettings(n_ctx=4096))
    bad = json.dumps({"reasoning": "maximum", "think_budget": -5})
    assert (ChatSettings.from_json(bad).reasoning, ChatSettings.from_json(bad).think_budget) == ("auto", None)
    assert ChatSettings.from_json(json.dumps({"think_budget": True})).think_budget is None


def test_the_reasoning_columns_come_after_those_of_schema_3(tmp_path):
    """Added at the end (ALTER TABLE), as in an upgraded file: a fresh file has the same table."""
    path = tmp_path / "chats.sqlite3"
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        migrate(db, target=4)
        columns = [row[1] for row in db.execute("PRAGMA table_info(messages)")]
    assert columns[-2:] == ["reasoning", "reasoning_closed"]


def _reply(reasoning: str = "", closed: bool = True, stats: dict | None = None) -> Message:
    return Message(1, 1, "assistant", "391.", "complete", stats, 0.0, reasoning, closed)


def test_the_reasoning_header_while_thinking_after_and_cut_off():
    assert reasoning_header(3.7, 120, streaming=True) == "Thinking… 3 s · 120 tokens"
    assert reasoning_header(None, None, streaming=True) == "Thinking…"
    assert reasoning_header(12.2, 340, streaming=False) == "Thought for 12 s · 340 tokens"
    assert reasoning_header(0.4, 1, streaming=False, closed=False) == "Thought for <1 s · 1 token (cut off)"
    assert finished_header(_reply("x", stats={"reasoning_tokens": 1234, "reasoning_s": 61.0})) == (
        "Thought for 61 s · 1,234 tokens")
    assert finished_header(_reply("x", closed=False)) == "Thought (cut off)"  # interrupted: no stats


def test_copy_gives_the_answer_and_with_reasoning_both():
    assert copy_text(_reply("17 * 23")) == "391."
    assert copy_text(_reply("17 * 23"), with_reasoning=True) == "Thinking:\n17 * 23\n\nAnswer:\n391."
    assert copy_text(_reply("17", closed=False), with_reasoning=True).startswith("Thinking (cut off):\n17")
    assert copy_text(_reply(), with_reasoning=True) == "391."


def test_the_stats_line_counts_thinking_apart_from_the_answer():
    stats = {"ttft_s": 0.1, "prompt_tokens": 40, "cached_tokens": 0, "gen_tokens": 392, "prefill_tok_s": 150.0,
             "decode_tok_s": 30.0, "reasoning_tokens": 340}
    assert format_stats(stats).startswith("decode 30.0 tok/s · 340 thinking + 52 answer tokens · TTFT 0.10 s")
    assert "thinking" not in format_stats({**stats, "reasoning_tokens": 0})
