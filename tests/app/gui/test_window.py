"""The window against the real engine and the starter model, with a real SQLite file."""

from __future__ import annotations

import os
import signal
import sqlite3

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from app.chat.session import BUSY_HINT
from tests.app.conftest import LONG, LONG_PROMPT, QUICK

TIMEOUT_MS = 90_000


def type_and_send(qtbot, window, text: str) -> None:
    window.composer.setFocus()
    qtbot.keyClicks(window.composer, text)
    qtbot.keyClick(window.composer, Qt.Key.Key_Return)


def messages(window):
    return window.session.store.list_messages(window.session.current.id)


def wait_for_partial(qtbot, window, chars: int = 20) -> None:
    qtbot.waitUntil(lambda: len(window.session.partial_reply or "") >= chars, timeout=TIMEOUT_MS)


def test_send_streams_a_reply_and_saves_it(qtbot, window):
    assert window.windowTitle().startswith("Tailor")
    assert QApplication.focusWidget() is window.composer
    qtbot.keyClicks(window.composer, "Hello.")
    qtbot.keyClick(window.composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(window.composer, "What is the capital of France?")
    assert window.composer.toPlainText() == "Hello.\nWhat is the capital of France?"
    with qtbot.waitSignal(window.controller.stream_finished, timeout=TIMEOUT_MS) as finished:
        qtbot.keyClick(window.composer, Qt.Key.Key_Return)
        assert window.composer.toPlainText() == ""
    reply = finished.args[0]
    assert reply.state == "complete" and reply.content.strip(), window.banner.text()
    assert "Paris" in reply.content
    assert reply.stats["prompt_tokens"] > 0 and reply.stats["decode_tok_s"] > 0
    user, assistant = messages(window)
    assert (user.role, user.content) == ("user", "Hello.\nWhat is the capital of France?")
    assert assistant.id == reply.id and assistant.content == reply.content
    assert "Paris" in window.chat.plain_text()
    assert "TTFT" in window.stats_label.text() and "decode" in window.stats_label.text()
    assert window.stats_label.toolTip() == window.stats_label.text()  # the whole line, when the bar cuts it
    assert "SmolLM2" in window.model_label.text() or "smollm2" in window.model_label.text().lower()
    assert window.session.current.title.startswith("Hello.")  # titled by its first message


def test_stop_regenerate_copy_and_edit(qtbot, window):
    window.session.update_settings(LONG)
    type_and_send(qtbot, window, LONG_PROMPT)
    wait_for_partial(qtbot, window)
    with qtbot.waitSignal(window.controller.stream_finished, timeout=TIMEOUT_MS) as stopped:
        qtbot.keyClick(window.composer, Qt.Key.Key_Escape)
    assert stopped.args[0].state == "cancelled" and stopped.args[0].content
    assert [m.state for m in messages(window)] == ["complete", "cancelled"]

    window.session.update_settings(QUICK)
    with qtbot.waitSignal(window.controller.stream_finished, timeout=TIMEOUT_MS) as regenerated:
        qtbot.keyClick(window, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    roles = [(m.role, m.state) for m in messages(window)]
    assert roles == [("user", "complete"), ("assistant", "complete")]  # the stopped reply was replaced
    assert messages(window)[1].id == regenerated.args[0].id

    qtbot.keyClick(
        window, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    )
    assert QGuiApplication.clipboard().text() == regenerated.args[0].content

    qtbot.keyClick(window, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    assert window.composer.editing and window.composer.toPlainText() == LONG_PROMPT
    window.composer.clear()
    with qtbot.waitSignal(window.controller.stream_finished, timeout=TIMEOUT_MS):
        type_and_send(qtbot, window, "What is the capital of France?")
    assert [(m.role, m.content) for m in messages(window)][0] == ("user", "What is the capital of France?")
    assert len(messages(window)) == 2 and not window.composer.editing
    assert LONG_PROMPT not in window.chat.plain_text()


def test_sending_while_a_reply_streams_keeps_the_text(qtbot, window):
    window.session.update_settings(LONG)
    type_and_send(qtbot, window, LONG_PROMPT)
    wait_for_partial(qtbot, window, 5)
    type_and_send(qtbot, window, "And another thing")
    assert window.composer.toPlainText() == "And another thing"
    assert window.statusBar().currentMessage() == BUSY_HINT
    assert len(messages(window)) == 2  # nothing new was stored
    with qtbot.waitSignal(window.controller.stream_finished, timeout=TIMEOUT_MS):
        window.send_stop.stop_button.click()
    window.session.update_settings(QUICK)
    with qtbot.waitSignal(window.controller.stream_finished, timeout=TIMEOUT_MS):
        qtbot.keyClick(window.composer, Qt.Key.Key_Return)  # now it goes
    assert [m.content for m in messages(window) if m.role == "user"] == [LONG_PROMPT, "And another thing"]


def test_a_new_context_length_reloads_the_model_first(qtbot, window):
    window.settings_panel.n_ctx.setValue(1024)
    window.settings_panel.system_prompt.setPlainText("Answer in one short sentence.")
    with (
        qtbot.waitSignal(window.controller.loaded, timeout=TIMEOUT_MS) as loaded,
        qtbot.waitSignal(window.controller.stream_finished, timeout=TIMEOUT_MS),
    ):
        type_and_send(qtbot, window, "Name a colour.")
    assert loaded.args[0].info.n_ctx == 1024
    assert "1024" in window.model_label.text()
    stored = window.session.store.get_conversation(window.session.current.id).settings
    assert (stored.load.n_ctx, stored.system_prompt) == (1024, "Answer in one short sentence.")


def test_bad_model_files_show_an_error_and_the_chat_stays_usable(
    qtbot, window, tmp_path, not_a_model, truncated_model
):
    with qtbot.waitSignal(window.controller.stream_finished, timeout=TIMEOUT_MS):
        type_and_send(qtbot, window, "Say hi.")
    for bad in (tmp_path / "missing.gguf", not_a_model, truncated_model):
        with qtbot.waitSignal(window.controller.problem, timeout=TIMEOUT_MS):
            window.session.load_model(str(bad))
        assert window.banner.isVisible()
        assert "Could not load the model" in window.banner.text() and bad.name in window.banner.text()
        assert not window.banner.reload_button.isVisible()
    with qtbot.waitSignal(window.controller.stream_finished, timeout=TIMEOUT_MS) as finished:
        type_and_send(qtbot, window, "What is the capital of France?")
    assert finished.args[0].state == "complete" and finished.args[0].content
    assert [m.role for m in messages(window)] == ["user", "assistant", "user", "assistant"]


def test_engine_killed_while_streaming(qtbot, window, tmp_path):
    window.session.update_settings(LONG)
    type_and_send(qtbot, window, LONG_PROMPT)
    wait_for_partial(qtbot, window, 40)
    # The partial reply reaches the file while it streams (another connection sees it).
    message_id = window.session.replies.streaming_in(window.session.current.id).message_id
    db = sqlite3.connect(tmp_path / "chats.sqlite3")

    def saved_while_streaming() -> bool:
        content, state = db.execute(
            "SELECT content, state FROM messages WHERE id = ?", (message_id,)
        ).fetchone()
        return state == "streaming" and len(content) > 0

    qtbot.waitUntil(saved_while_streaming, timeout=5000)
    db.close()
    with qtbot.waitSignal(window.controller.problem, timeout=TIMEOUT_MS):
        os.kill(window.session.engine.pid, signal.SIGKILL)
    assert window.banner.isVisible() and "engine stopped" in window.banner.text()
    assert window.banner.reload_button.isVisible()
    reply = messages(window)[-1]
    assert reply.state == "interrupted" and len(reply.content) >= 40
    # Straight from the file, as another process would see it.
    with sqlite3.connect(tmp_path / "chats.sqlite3") as db:
        assert db.execute("SELECT state FROM messages WHERE id = ?", (reply.id,)).fetchone() == (
            "interrupted",
        )
    type_and_send(qtbot, window, "Are you there?")
    assert window.composer.toPlainText() == "Are you there?"  # refused until the engine is back
    assert "Reload" in window.statusBar().currentMessage()

    with qtbot.waitSignal(window.controller.loaded, timeout=TIMEOUT_MS):
        window.banner.reload_button.click()
    assert not window.banner.isVisible()
    window.session.update_settings(QUICK)
    with qtbot.waitSignal(window.controller.stream_finished, timeout=TIMEOUT_MS) as finished:
        qtbot.keyClick(window.composer, Qt.Key.Key_Return)
    assert finished.args[0].state == "complete"


def test_closing_while_streaming_saves_the_partial_reply_and_stops_the_engine(qtbot, window):
    window.session.update_settings(LONG)
    type_and_send(qtbot, window, LONG_PROMPT)
    wait_for_partial(qtbot, window, 20)
    client = window.session.engine
    process = client._process
    window.close()
    assert not client.running and not process.is_alive()
    reply = window.session.store.list_messages(window.session.current.id)[-1]
    assert reply.role == "assistant" and reply.state == "cancelled" and len(reply.content) >= 20


def test_deleting_the_streaming_conversation(qtbot, window, monkeypatch):
    from app.gui.chat_list import conversation_list
    monkeypatch.setattr(conversation_list, "confirm_delete", lambda parent, title: True)
    first = window.session.current.id
    window.session.update_settings(LONG)
    type_and_send(qtbot, window, LONG_PROMPT)
    wait_for_partial(qtbot, window, 5)
    ignored = set(window.session.replies.ignored)
    window.conversations.delete_current()
    assert window.session.store.get_conversation(first) is None
    assert not window.session.busy and window.session.current.id != first
    assert window.session.replies.ignored != ignored  # the cancelled request is now ignored
    # Its late Done arrives and is dropped; the new conversation works.
    qtbot.waitUntil(lambda: not window.session.replies.ignored, timeout=TIMEOUT_MS)
    assert "dragon" not in window.chat.plain_text().lower()
    window.session.update_settings(QUICK)
    with qtbot.waitSignal(window.controller.stream_finished, timeout=TIMEOUT_MS) as finished:
        type_and_send(qtbot, window, "Say hi.")
    assert finished.args[0].conversation_id == window.session.current.id
