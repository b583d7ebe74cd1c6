"""Conversation list, settings panel and start-up, on a real SQLite file (the engine is not needed)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLineEdit

from app.gui.chat_list import conversation_list
from app.services.history.store import ChatSettings, ChatStore
from app.services.load_settings import LoadSettings


def titles(window) -> list[str]:
    return [item.text(0) for item in window.conversations.chat_items()]


def test_new_rename_delete_and_search(qtbot, make_window, monkeypatch):
    window = make_window(start=False)
    store = window.session.store
    assert titles(window) == ["New chat"]
    assert QApplication.focusWidget() is window.composer

    qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert len(store.list_conversations()) == 2 and len(window.conversations.ids()) == 2
    assert window.conversations.current_id() == window.session.current.id

    window.conversations.list.setFocus()
    qtbot.keyClick(window, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.focusWidget() is window.composer

    # Rename with F2: an inline editor opens; Enter commits.
    window.conversations.list.setFocus()
    qtbot.keyClick(window.conversations.list, Qt.Key.Key_F2)
    editor = QApplication.focusWidget()
    assert isinstance(editor, QLineEdit)
    editor.selectAll()
    qtbot.keyClicks(editor, "Holiday plans")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.session.current.title == "Holiday plans", timeout=2000)
    assert store.get_conversation(window.session.current.id).title == "Holiday plans"
    assert window.windowTitle() == "Tailor — Holiday plans"

    other = [c for c in store.list_conversations() if c.title == "New chat"][0]
    store.add_message(other.id, "user", "How do I parse JSON in Python?")

    # Search filters by title and by message text.
    qtbot.keyClicks(window.conversations.search, "json")
    qtbot.waitUntil(lambda: titles(window) == ["New chat"], timeout=2000)
    window.conversations.search.clear()
    qtbot.waitUntil(lambda: len(titles(window)) == 2, timeout=2000)
    qtbot.keyClicks(window.conversations.search, "holiday")
    qtbot.waitUntil(lambda: titles(window) == ["Holiday plans"], timeout=2000)
    window.conversations.search.clear()
    qtbot.waitUntil(lambda: len(titles(window)) == 2, timeout=2000)

    # Delete asks first; "No" keeps it.
    asked = []
    monkeypatch.setattr(
        conversation_list, "confirm_delete", lambda parent, title: asked.append(title) or False
    )
    current = window.session.current.id
    window.conversations.delete_current()
    assert asked == ["Holiday plans"] and store.get_conversation(current) is not None
    monkeypatch.setattr(conversation_list, "confirm_delete", lambda parent, title: True)
    window.conversations.delete_current()
    assert store.get_conversation(current) is None
    assert titles(window) == ["New chat"] and window.session.current.id == other.id
    assert "How do I parse JSON" in window.chat.plain_text()

    # Deleting the last one leaves a fresh empty chat.
    window.conversations.delete_current()
    assert titles(window) == ["New chat"] and store.list_messages(window.session.current.id) == []


def test_settings_are_per_conversation(qtbot, make_window):
    window = make_window(start=False)
    panel = window.settings_panel
    first = window.session.current.id
    panel.system_prompt.setPlainText("You are a pirate.")
    panel.temperature.setValue(1.25)
    panel.top_p.setValue(0.5)
    panel.max_tokens.setValue(100)
    panel.n_ctx.setValue(1024)
    qtbot.waitUntil(
        lambda: window.session.store.get_conversation(first).settings.load.n_ctx == 1024, timeout=2000
    )
    assert window.session.store.get_conversation(first).settings == ChatSettings(
        "You are a pirate.", 1.25, 0.5, 100, LoadSettings(1024)
    )
    window.new_conversation()
    second = window.session.current.id
    panel.system_prompt.setPlainText("Be terse.")
    window.conversations.list.setCurrentItem(window.conversations.item_of(first))  # switch away at once
    assert window.session.current.id == first
    assert panel.system_prompt.toPlainText() == "You are a pirate." and panel.n_ctx.value() == 1024
    assert window.session.store.get_conversation(second).settings.system_prompt == "Be terse."


def test_start_up_marks_crashed_replies_interrupted(qtbot, make_window, tmp_path):
    store = ChatStore(tmp_path / "chats.sqlite3")
    conv = store.create_conversation("Before the crash")
    store.add_message(conv.id, "user", "Tell me a story")
    reply = store.add_message(conv.id, "assistant", "", state="streaming")
    store.update_message_content(reply.id, "Once upon a time")
    store.close()
    window = make_window(start=False)
    assert window.session.current.title == "Before the crash"
    assert window.session.store.get_message(reply.id).state == "interrupted"
    assert (
        "Once upon a time" in window.chat.plain_text() and "(reply interrupted)" in window.chat.plain_text()
    )
