"""A conversation's replies, against a scripted engine: no Qt, no process, milliseconds each."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from app.chat.replies import SAVE_INTERVAL_S
from app.chat.session import BUSY_HINT, DEAD_HINT
from app.services.load_settings import LoadSettings
from engine.protocol import Error, MemoryReport
from tests.app.chat.conftest import FIXED


def test_a_message_loads_the_model_then_streams_and_saves_its_reply(chat):
    chat.started()
    assert chat.engine.loads[-1].n_ctx == 2048 and chat.heard.last("model_changed") == ("Scripted · context 2048",)
    assert chat.heard.last("context_loaded") == ("Context: 2,048 tokens",)
    chat.heard.clear()
    assert chat.session.send("  What is the capital of France?  ")
    chat.engine.pump()
    request_id = chat.engine.last_request
    sent = chat.engine.prompts[request_id]
    assert [m.role for m in sent] == ["system", "user"] and sent[-1].content == "What is the capital of France?"
    assert chat.session.busy and chat.heard.of("busy_changed") == [(True,)]
    chat.engine.stream(request_id, "Par", "is.")
    chat.engine.finish(request_id, "Paris.")
    chat.engine.pump()
    assert [a[0] for a in chat.heard.of("stream_text")] == ["Par", "is."]
    (final,) = chat.heard.last("stream_finished")
    assert (final.content, final.state, final.stats["decode_tok_s"]) == ("Paris.", "complete", 25.0)
    assert chat.on_disk(final.id) == "Paris." and not chat.session.busy
    assert chat.heard.last("busy_changed") == (False,)
    assert "decode 25.0 tok/s" in chat.heard.last("stats_changed")[0]
    assert chat.session.current.title == "What is the capital of France?"  # titled by its first message
    assert len(chat.engine.loads) == 1  # the same settings: no second load


def test_a_reply_is_saved_while_the_model_pauses_and_as_it_streams(chat, monkeypatch):
    chat.started()
    assert chat.session.send("Tell me a story.")
    chat.engine.pump()
    request_id = chat.engine.last_request
    (message,) = chat.heard.last("stream_started")
    clock = [1000.0]
    monkeypatch.setattr("app.chat.replies.time.monotonic", lambda: clock[0])
    chat.session.replies.save_partial()  # the save clock starts now
    chat.engine.stream(request_id, "Once")
    chat.engine.pump()
    (timer,) = chat.timers
    assert timer.active and 0 < timer.due <= SAVE_INTERVAL_S and chat.on_disk(message.id) == ""
    timer.fire()  # no other token came: what was received reaches the file all the same
    assert chat.on_disk(message.id) == "Once"
    clock[0] += 2 * SAVE_INTERVAL_S  # a token more than an interval later is written at once
    chat.engine.stream(request_id, " upon")
    chat.engine.pump()
    assert chat.on_disk(message.id) == "Once upon" and not timer.active


def test_a_reply_streaming_into_another_chat_is_saved_but_not_shown(chat):
    chat.started()
    first = chat.session.current.id
    assert chat.session.send("Hello")
    chat.engine.pump()
    request_id = chat.engine.last_request
    chat.session.new_conversation()
    chat.heard.clear()
    chat.engine.stream(request_id, "Hi ", "there")
    chat.engine.finish(request_id, "Hi there")
    chat.engine.pump()
    assert chat.heard.of("stream_text") == [] and chat.heard.of("stream_finished") == []
    assert chat.store.list_messages(first)[-1].content == "Hi there"
    assert chat.heard.last("busy_changed") == (False,)


def test_opening_the_chat_a_reply_streams_into_shows_what_it_has(chat):
    chat.started()
    first = chat.session.current.id
    chat.session.send("Hello")
    chat.engine.pump()
    chat.engine.stream(chat.engine.last_request, "Hi ")
    chat.engine.pump()
    chat.session.new_conversation()
    chat.heard.clear()
    chat.session.open_conversation(first)
    _conversation, shown = chat.heard.last("conversation_opened")
    assert [m.role for m in shown] == ["user"]  # the streaming reply is shown as a stream
    assert chat.heard.last("stream_started")[0].state == "streaming" and chat.heard.last("stream_text") == ("Hi ",)


def test_a_message_while_a_reply_streams_is_refused_with_a_hint(chat):
    chat.started()
    chat.session.send("First")
    chat.engine.pump()
    assert not chat.session.send("Second") and chat.heard.last("notice") == (BUSY_HINT,)
    assert not chat.session.regenerate() and not chat.session.load_model("/elsewhere/other.gguf")


def test_stop_cancels_and_keeps_what_came(chat):
    chat.started()
    chat.session.send("Count to a hundred.")
    chat.engine.pump()
    request_id = chat.engine.last_request
    chat.engine.stream(request_id, "1, 2, 3")
    chat.engine.pump()
    chat.session.stop()
    assert chat.engine.cancelled == [request_id] and chat.heard.last("notice") == ("Stopping…",)
    chat.engine.finish(request_id, "1, 2, 3", "cancelled")
    chat.engine.pump()
    (final,) = chat.heard.last("stream_finished")
    assert (final.content, final.state) == ("1, 2, 3", "cancelled") and chat.heard.last("notice") == ("Stopped.",)


def test_regenerate_and_edit_answer_again(chat):
    chat.started()
    chat.reply("Name a colour.", "Blue.")
    assert chat.session.regenerate()
    chat.engine.pump()
    chat.engine.stream(chat.engine.last_request, "Red.")
    chat.engine.finish(chat.engine.last_request, "Red.")
    chat.engine.pump()
    assert [m.content for m in chat.store.list_messages(chat.session.current.id)] == ["Name a colour.", "Red."]
    assert chat.session.last_reply() == "Red." and chat.session.last_user_text() == "Name a colour."
    assert chat.session.edit_last_user_message("Name a fruit.")
    chat.engine.pump()
    assert chat.engine.prompts[chat.engine.last_request][-1].content == "Name a fruit."
    texts = [(m.role, m.content, m.state) for m in chat.store.list_messages(chat.session.current.id)]
    assert texts == [("user", "Name a fruit.", "complete"), ("assistant", "", "streaming")]  # Red. is gone


def test_deleting_the_chat_a_reply_streams_into_drops_its_late_events(chat):
    chat.started()
    first = chat.session.current.id
    chat.session.send("Write a long story.")
    chat.engine.pump()
    request_id = chat.engine.last_request
    chat.session.delete_conversation(first)
    assert chat.engine.cancelled == [request_id] and not chat.session.busy
    assert chat.store.get_conversation(first) is None and chat.session.current.id != first
    chat.heard.clear()
    chat.engine.stream(request_id, "Once upon a time")
    chat.engine.finish(request_id, "Once upon a time", "cancelled")
    chat.engine.pump()
    assert chat.session.replies.ignored == set() and chat.heard.of("stream_finished") == []
    chat.reply("Say hi.", "Hi")  # the new chat works
    assert chat.heard.last("stream_finished")[0].conversation_id == chat.session.current.id


def test_a_new_context_length_loads_the_model_again_before_the_reply(chat):
    chat.started()
    chat.session.update_settings(replace(FIXED, load=LoadSettings(n_ctx=1024)))
    chat.session.send("Hello")
    assert chat.engine.prompts == {}  # the reply waits for the load
    chat.engine.pump()
    assert [r.n_ctx for r in chat.engine.loads] == [2048, 1024] and len(chat.engine.prompts) == 1


def test_memory_reports_and_finished_replies_reach_the_listener(chat):
    chat.started()
    report = MemoryReport(devices=(), kv_tokens_used=4, kv_tokens_total=8)
    chat.engine.say(report)
    request_id = chat.reply("Hi", "Hello")
    assert chat.heard.last("memory") == (report,) and chat.heard.last("reply_done")[0].request_id == request_id


# ------------------------------------------------------------ failures


def test_the_engine_dying_mid_reply_keeps_the_text_and_offers_reload(chat):
    chat.started()
    chat.session.send("Tell me a story.")
    chat.engine.pump()
    chat.engine.stream(chat.engine.last_request, "Once upon")
    chat.engine.die()
    chat.engine.pump()
    (final,) = chat.heard.last("stream_finished")
    assert (final.content, final.state) == ("Once upon", "interrupted")
    text, can_reload = chat.heard.last("problem")
    assert can_reload and "The engine stopped. The engine process was killed (signal 9)." in text
    assert chat.heard.last("model_changed") == ("Engine stopped",)
    assert not chat.session.send("Go on.") and chat.heard.last("notice") == (DEAD_HINT,)
    chat.session.reload_engine()
    chat.engine.pump()
    assert chat.heard.last("problem_cleared") == () and chat.engine.starts == 2
    chat.reply("Go on.", "...there was a fox.")
    assert chat.heard.last("stream_finished")[0].state == "complete"


def test_an_engine_gone_before_the_request_is_reported_once(chat):
    chat.started()
    chat.engine.running = False  # died without a word yet: the send finds out
    assert chat.session.send("Hello")
    assert chat.heard.last("model_changed") == ("Engine stopped",) and not chat.session.busy
    chat.engine.die()  # the reader's own report comes later: not said twice
    chat.engine.pump()
    assert len(chat.heard.of("problem")) == 1


def test_a_model_that_fails_to_load_goes_back_to_the_one_that_worked(chat, tmp_path):
    chat.started()
    good = chat.session.model_path
    chat.engine.load_error = "Not a GGUF file (bad magic)."
    assert chat.session.load_model(str(tmp_path / "broken.gguf"))
    chat.engine.pump()
    text, can_reload = chat.heard.last("problem")
    assert "Could not load the model" in text and "broken.gguf" in text and "bad magic" in text and not can_reload
    assert chat.session.model_path == good and "loads again with the next message" in chat.heard.last("model_changed")[0]
    chat.reply("Still there?", "Yes.")  # the next message loads the good model again
    assert chat.engine.loads[-1].path == good and chat.heard.last("stream_finished")[0].content == "Yes."


def test_a_failed_reply_keeps_what_streamed_or_leaves_no_empty_message(chat):
    chat.started()
    chat.session.send("One")
    chat.engine.pump()
    request_id = chat.engine.last_request
    chat.engine.stream(request_id, "Half a")
    chat.engine.say(Error("generation_failed", "llama_decode returned -3", request_id))
    chat.engine.pump()
    assert chat.heard.last("stream_finished")[0].state == "interrupted"
    assert chat.heard.last("problem") == ("The reply failed (generation_failed): llama_decode returned -3", False)
    chat.session.send("Two")
    chat.engine.pump()
    chat.engine.say(Error("context_overflow", "The prompt is longer than the context.", chat.engine.last_request))
    chat.engine.pump()
    assert [m.content for m in chat.store.list_messages(chat.session.current.id)] == ["One", "Half a", "Two"]
    assert not chat.session.busy


def test_a_full_disk_while_streaming_is_said_once_and_the_reply_goes_on(chat, monkeypatch):
    chat.started()
    chat.session.send("Tell me a story.")
    chat.engine.pump()
    request_id = chat.engine.last_request
    from app.services.history.store import StoreError

    def full(*_args):
        raise StoreError("database or disk is full")

    monkeypatch.setattr(chat.store, "update_message_content", full)
    monkeypatch.setattr(chat.store, "finish_message", full)
    chat.engine.stream(request_id, "Once")
    chat.engine.pump()
    chat.timers[0].fire()
    chat.engine.finish(request_id, "Once upon a time")
    chat.engine.pump()
    assert len(chat.heard.of("history_failed")) == 2  # the partial save and the final one, each refused
    (final,) = chat.heard.last("stream_finished")
    assert (final.content, final.state) == ("Once upon a time", "complete")  # shown as it ended


def test_each_reply_keeps_the_model_that_wrote_it(chat):
    chat.started()
    chat.reply("Hi", "Hello")
    (final,) = chat.heard.last("stream_finished")
    assert final.stats["model"] == Path(chat.session.model_path).name
    assert chat.store.get_message(final.id).stats["model"] == final.stats["model"]
