"""A reasoning model's replies, against a scripted engine: the thoughts stream before the answer, are
saved apart from it while they stream, come back from the store, and never go back to the model."""

from __future__ import annotations

import sqlite3
from dataclasses import replace

from app.chat.replies import SAVE_INTERVAL_S
from app.services.history.store import ChatStore
from engine.protocol import GenerationStats, ReplyShape
from tests.app.chat.conftest import FIXED
from tests.fixtures.fake_engine import STATS

THOUGHT = GenerationStats(ttft_s=0.05, prompt_tokens=40, cached_tokens=10, gen_tokens=392, prefill_tok_s=200.0,
                          decode_tok_s=25.0, reasoning_tokens=340, reasoning_s=12.2)


def reasoning_on_disk(chat, message_id: int) -> tuple[str, str, int]:
    """(content, reasoning, reasoning_closed) as the file has them (a connection of its own)."""
    with sqlite3.connect(chat.db) as reader:
        return reader.execute("SELECT content, reasoning, reasoning_closed FROM messages WHERE id = ?",
                              (message_id,)).fetchone()


def ask(chat, text: str = "What is 17 * 23?") -> int:
    assert chat.session.send(text)
    chat.engine.pump()
    return chat.engine.last_request


def test_reasoning_streams_before_the_answer_and_is_kept_apart_from_it(chat):
    chat.started()
    request_id = ask(chat)
    chat.engine.think(request_id, "\n17 * 23", " = 17 * 20 + 17 * 3", " = 391.")
    chat.engine.stream(request_id, "It is ", "391.")
    chat.engine.finish(request_id, "It is 391.", reasoning="\n17 * 23 = 17 * 20 + 17 * 3 = 391.", stats=THOUGHT)
    chat.engine.pump()
    thoughts = chat.heard.of("stream_reasoning")
    assert [(text, tokens) for text, tokens, _s in thoughts] == [
        ("\n17 * 23", 1), (" = 17 * 20 + 17 * 3", 2), (" = 391.", 3)]
    assert all(seconds >= 0 for _t, _n, seconds in thoughts)
    assert [a[0] for a in chat.heard.of("stream_text")] == ["It is ", "391."]  # the answer alone
    names = [name for name, _args in chat.heard.calls if name in ("stream_reasoning", "stream_text")]
    assert names == ["stream_reasoning"] * 3 + ["stream_text"] * 2
    (final,) = chat.heard.last("stream_finished")
    assert (final.content, final.reasoning, final.reasoning_closed) == (
        "It is 391.", "\n17 * 23 = 17 * 20 + 17 * 3 = 391.", True)
    assert (final.stats["reasoning_tokens"], final.stats["reasoning_s"]) == (340, 12.2)
    assert reasoning_on_disk(chat, final.id) == ("It is 391.", "\n17 * 23 = 17 * 20 + 17 * 3 = 391.", 1)
    assert "340 thinking + 52 answer tokens" in chat.heard.last("stats_changed")[0]
    assert chat.session.last_reply() == "It is 391."  # Copy last reply: the answer only


def test_reasoning_is_saved_while_it_streams_as_the_answer_is(chat, monkeypatch):
    chat.started()
    request_id = ask(chat)
    (message,) = chat.heard.last("stream_started")
    clock = [1000.0]
    monkeypatch.setattr("app.chat.replies.time.monotonic", lambda: clock[0])
    chat.session.replies.save_partial()  # the save clock starts now
    chat.engine.think(request_id, "Let me see")
    chat.engine.pump()
    (timer,) = chat.timers
    assert timer.active and reasoning_on_disk(chat, message.id) == ("", "", 1)
    timer.fire()  # the model pauses: what it thought so far reaches the file, still open
    assert reasoning_on_disk(chat, message.id) == ("", "Let me see", 0)
    clock[0] += 2 * SAVE_INTERVAL_S
    chat.engine.think(request_id, ": 391")
    chat.engine.pump()
    assert reasoning_on_disk(chat, message.id) == ("", "Let me see: 391", 0)
    clock[0] += 2 * SAVE_INTERVAL_S
    chat.engine.stream(request_id, "391.")  # the answer began: the reasoning ended
    chat.engine.pump()
    assert reasoning_on_disk(chat, message.id) == ("391.", "Let me see: 391", 1)


def test_a_reply_cut_off_while_it_thinks_keeps_its_reasoning_marked_so(chat):
    chat.started()
    request_id = ask(chat)
    chat.engine.think(request_id, "First, ", "consider")
    chat.engine.finish(request_id, "", "length", reasoning="First, consider", reasoning_closed=False,
                       stats=replace(THOUGHT, gen_tokens=2, reasoning_tokens=2))
    chat.engine.pump()
    (final,) = chat.heard.last("stream_finished")
    assert (final.content, final.reasoning, final.reasoning_closed, final.state) == (
        "", "First, consider", False, "complete")
    assert reasoning_on_disk(chat, final.id) == ("", "First, consider", 0)


def test_stop_while_thinking_and_a_dying_engine_keep_the_partial_reasoning(chat):
    chat.started()
    request_id = ask(chat)
    chat.engine.think(request_id, "Hmm, ")
    chat.engine.pump()
    chat.session.stop()
    chat.engine.finish(request_id, "", "cancelled", reasoning="Hmm, ", reasoning_closed=False)
    chat.engine.pump()
    (final,) = chat.heard.last("stream_finished")
    assert (final.state, final.reasoning, final.reasoning_closed) == ("cancelled", "Hmm, ", False)
    request_id = ask(chat, "Again?")
    chat.engine.think(request_id, "Well")
    chat.engine.die()
    chat.engine.pump()
    (final,) = chat.heard.last("stream_finished")
    assert (final.state, final.content, final.reasoning, final.reasoning_closed) == ("interrupted", "", "Well", False)
    assert reasoning_on_disk(chat, final.id) == ("", "Well", 0)


def test_reasoning_comes_back_from_the_store_and_a_crash_keeps_it(chat):
    chat.started()
    request_id = ask(chat)
    chat.engine.think(request_id, "Twenty")
    chat.engine.stream(request_id, "391.")
    chat.engine.finish(request_id, "391.", reasoning="Twenty", stats=THOUGHT)
    chat.engine.pump()
    request_id = ask(chat, "And 18 * 23?")
    chat.engine.think(request_id, "Add 23")
    chat.engine.pump()
    chat.session.replies.save_partial()  # saved as it streams; then the app is killed (no finish)
    reopened = ChatStore(chat.db)  # a new store on the same file, as the next start opens it
    assert reopened.recovered == 1
    first, second = [m for m in reopened.list_messages(chat.session.current.id) if m.role == "assistant"]
    assert (first.content, first.reasoning, first.reasoning_closed, first.stats["reasoning_s"]) == (
        "391.", "Twenty", True, 12.2)
    assert (second.content, second.reasoning, second.reasoning_closed, second.state) == (
        "", "Add 23", False, "interrupted")
    reopened.close()


def test_earlier_reasoning_is_not_sent_back_to_the_model(chat):
    chat.started()
    request_id = ask(chat)
    chat.engine.think(request_id, "SECRET THOUGHT")
    chat.engine.stream(request_id, "391.")
    chat.engine.finish(request_id, "391.", reasoning="SECRET THOUGHT")
    chat.engine.pump()
    request_id = ask(chat, "Why?")
    chat.engine.think(request_id, "ONLY THINKING")
    chat.engine.finish(request_id, "", "length", reasoning="ONLY THINKING", reasoning_closed=False)
    chat.engine.pump()
    request_id = ask(chat, "Well?")
    sent = chat.engine.prompts[request_id]
    assert [(m.role, m.content) for m in sent[1:]] == [
        ("user", "What is 17 * 23?"), ("assistant", "391."), ("user", "Why?"), ("user", "Well?")]
    assert not any("THOUGHT" in m.content or "THINKING" in m.content for m in sent)


def test_the_chat_settings_shape_every_reply(chat):
    chat.started()
    request_id = ask(chat)
    assert chat.engine.shapes[request_id] == ReplyShape()  # Auto, no cap
    chat.engine.finish(request_id, "391.")
    chat.engine.pump()
    chat.session.update_settings(replace(FIXED, reasoning="high", think_budget=512))
    request_id = ask(chat, "Again")
    assert chat.engine.shapes[request_id] == ReplyShape(reasoning="high", think_budget=512)
    assert len(chat.engine.loads) == 1  # no reload: the shape goes with the reply
    chat.engine.finish(request_id, "391.")
    chat.engine.pump()
    reopened = ChatStore(chat.db)
    stored = reopened.get_conversation(chat.session.current.id).settings
    reopened.close()
    assert (stored.reasoning, stored.think_budget) == ("high", 512)


def test_opening_the_chat_a_reply_thinks_in_shows_its_reasoning_once(chat):
    chat.started()
    first = chat.session.current.id
    request_id = ask(chat)
    chat.engine.think(request_id, "one ", "two ")
    chat.engine.stream(request_id, "Three")
    chat.engine.pump()
    chat.session.replies.save_partial()  # the store has it too: it must not be shown twice
    chat.session.new_conversation()
    chat.heard.clear()
    chat.session.open_conversation(first)
    (started,) = chat.heard.last("stream_started")
    assert (started.content, started.reasoning) == ("", "")
    text, tokens, _seconds = chat.heard.last("stream_reasoning")
    assert (text, tokens) == ("one two ", 2) and chat.heard.last("stream_text") == ("Three",)


def test_a_reply_without_reasoning_stores_none(chat):
    chat.started()
    request_id = ask(chat)
    chat.engine.stream(request_id, "391.")
    chat.engine.finish(request_id, "391.", stats=STATS)
    chat.engine.pump()
    (final,) = chat.heard.last("stream_finished")
    assert (final.reasoning, final.reasoning_closed) == ("", True) and "reasoning_s" not in final.stats
    assert chat.heard.of("stream_reasoning") == [] and "thinking" not in chat.heard.last("stats_changed")[0]
