"""Versions and branches in the window, over a scripted engine whose events come from a thread of their
own (as the engine client's reader thread), with real widgets offscreen and a real SQLite file: the
‹ 2/3 › bar switches replies, any message of yours can be edited into a new branch, a branch becomes a
new chat, and a chat opened from a search shows the branch of its hit with the hit marked."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QTextCursor
from PySide6.QtWidgets import QMenu

from app.gui.chat_controller import ChatController
from app.gui.main_window import MainWindow
from app.services.history.store import ChatSettings, ChatStore, Message
from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from engine.starter import starter_model_path
from models.hardware.profile import profile_for
from tests.fixtures.fake_engine import FakeEngine

WAIT_MS = 10_000


class Scripted:
    """A MainWindow over a FakeEngine; `pump` hands the engine's events over from another thread."""

    def __init__(self, qtbot, tmp_path: Path):
        self.qtbot = qtbot
        self._menus: list[QMenu] = []  # kept: a menu's actions go with it
        self.engine = FakeEngine()
        self.store = ChatStore(tmp_path / "chats.sqlite3")
        planner = LoadPlanner(profile_for(ram_gib=16), status_dir=tmp_path)

        def make_engine(deliver):
            self.engine.handle = deliver
            return self.engine

        self.controller = ChatController(self.store, str(starter_model_path()), planner, make_engine)
        self.window = MainWindow(self.controller)
        qtbot.addWidget(self.window)
        self.window.resize(900, 700)
        self.window.show()
        self.window.session.update_settings(ChatSettings(load=LoadSettings(n_ctx=2048)))
        self.window.settings_panel.set_settings(ChatSettings(load=LoadSettings(n_ctx=2048)))
        with qtbot.waitSignal(self.controller.loaded, timeout=WAIT_MS):
            self.window.session.start()
            self.pump()

    @property
    def view(self):
        return self.window.chat

    def pump(self) -> None:
        thread = threading.Thread(target=self.engine.pump)
        thread.start()
        thread.join()

    def answer(self, text: str) -> Message:
        """Stream and finish the reply being written; the finished message."""
        request_id = self.engine.last_request
        self.engine.stream(request_id, text)
        self.engine.finish(request_id, text)
        with self.qtbot.waitSignal(self.controller.stream_finished, timeout=WAIT_MS) as finished:
            self.pump()
        self.qtbot.waitUntil(lambda: not self.window.session.busy, timeout=WAIT_MS)
        return finished.args[0]

    def send(self, text: str, reply: str) -> Message:
        with self.qtbot.waitSignal(self.controller.stream_started, timeout=WAIT_MS):
            self.window.submit(text)
        return self.answer(reply)

    def shown(self) -> list[str]:
        return [m.content for m in self.store.list_messages(self.window.session.current.id)]

    def view_messages(self) -> list[Message]:
        return self.store.list_messages(self.window.session.current.id)

    def message(self, content: str) -> Message:
        return next(m for m in self.store.all_messages(self.window.session.current.id) if m.content == content)

    def menu_texts(self, message_id: int) -> list[str]:
        """What the context menu over a message's header offers."""
        return [a.text() for a in self._menu(message_id).actions() if a.text()]

    def menu_action(self, message_id: int, text: str):
        """The action `text` of the context menu over a message's header."""
        return next(a for a in self._menu(message_id).actions() if a.text() == text)

    def _menu(self, message_id: int) -> QMenu:
        menu = self.view.transcript_actions.message_menu(self.view.marks.header_point(message_id))
        self._menus.append(menu)
        return menu

    def close(self) -> None:
        self.window.close()
        self.store.close()


@pytest.fixture
def chat(qtbot, tmp_path):
    made = Scripted(qtbot, tmp_path)
    yield made
    made.close()


def test_the_version_bar_switches_between_a_reply_and_its_regenerated_one(qtbot, chat):
    chat.send("Name a colour.", "Blue.")
    assert chat.view.version_bars.bars == {}  # one version: no bar
    with qtbot.waitSignal(chat.controller.stream_started, timeout=WAIT_MS):
        chat.window.regenerate_action.trigger()
    streaming = chat.store.list_messages(chat.window.session.current.id)[-1]
    bar = chat.view.version_bars.bars[streaming.id]
    assert bar.label.text() == "2/2"
    assert not bar.previous.isEnabled() and not bar.next.isEnabled()  # not while the reply is written
    red = chat.answer("Red.")
    qtbot.waitUntil(lambda: chat.view.version_bars.bars[red.id].previous.isEnabled(), timeout=WAIT_MS)
    bar = chat.view.version_bars.bars[red.id]
    assert bar.previous.accessibleName() == "Previous version" and bar.next.accessibleName() == "Next version"
    assert not bar.next.isEnabled()  # the last version
    assert bar.isVisible() and chat.view.viewport().rect().contains(bar.geometry())
    header = chat.view.marks.header_point(red.id)
    assert abs(bar.geometry().center().y() - header.y()) < bar.height()  # beside its header
    assert "Red." in chat.view.plain_text() and "Blue." not in chat.view.plain_text()

    qtbot.mouseClick(bar.previous, Qt.MouseButton.LeftButton)
    blue = chat.message("Blue.")
    qtbot.waitUntil(lambda: "Blue." in chat.view.plain_text(), timeout=WAIT_MS)
    assert "Red." not in chat.view.plain_text() and chat.shown() == ["Name a colour.", "Blue."]
    bar = chat.view.version_bars.bars[blue.id]
    assert bar.label.text() == "1/2" and not bar.previous.isEnabled() and bar.next.isEnabled()
    qtbot.mouseClick(bar.next, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "Red." in chat.view.plain_text(), timeout=WAIT_MS)
    assert chat.shown() == ["Name a colour.", "Red."]


def test_the_hover_bar_regenerates_the_last_reply_and_copies_a_message(qtbot, chat):
    chat.send("Name a colour.", "Blue.")
    view = chat.view
    found = view.document().find("Blue.")
    cursor = QTextCursor(view.document())
    cursor.setPosition(found.selectionStart() + 1)
    qtbot.mouseMove(view.viewport(), view.cursorRect(cursor).center())
    qtbot.waitUntil(lambda: view.message_actions.bar.isVisible(), timeout=WAIT_MS)
    bar = view.message_actions.bar
    qtbot.mouseClick(bar.copy, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == "Blue."
    assert chat.window.statusBar().currentMessage()  # "Copied the reply"
    with qtbot.waitSignal(chat.controller.stream_started, timeout=WAIT_MS):
        qtbot.mouseClick(bar.regenerate, Qt.MouseButton.LeftButton)
    chat.answer("Red.")
    assert chat.shown() == ["Name a colour.", "Red."]
    assert [m.content for m in chat.store.all_messages(chat.window.session.current.id)] == [
        "Name a colour.", "Blue.", "Red."]


def test_editing_an_earlier_message_from_its_menu_starts_a_branch_there(qtbot, chat):
    chat.send("Capital of France?", "Paris.")
    chat.send("And of Italy?", "Rome.")
    first = chat.message("Capital of France?")
    reply = chat.message("Paris.")
    assert {"Copy message", "Branch to new chat"} <= set(chat.menu_texts(reply.id))
    assert "Edit message" not in chat.menu_texts(reply.id)  # only your own messages are edited
    assert {"Edit message", "Branch to new chat"} <= set(chat.menu_texts(first.id))
    chat.menu_action(first.id, "Edit message").trigger()
    composer = chat.window.composer
    assert composer.editing and composer.editing_id == first.id
    assert composer.toPlainText() == "Capital of France?"
    composer.selectAll()
    qtbot.keyClicks(composer, "Capital of Spain?")
    with qtbot.waitSignal(chat.controller.stream_started, timeout=WAIT_MS):
        qtbot.keyClick(composer, Qt.Key.Key_Return)
    sent = chat.engine.prompts[chat.engine.last_request]
    assert [m.content for m in sent if m.role != "system"] == ["Capital of Spain?"]  # nothing after it
    chat.answer("Madrid.")
    assert not composer.editing and composer.toPlainText() == ""
    text = chat.view.plain_text()
    assert "Capital of Spain?" in text and "Madrid." in text and "Italy" not in text
    spain = chat.message("Capital of Spain?")
    bar = chat.view.version_bars.bars[spain.id]
    assert bar.label.text() == "2/2"
    qtbot.mouseClick(bar.previous, Qt.MouseButton.LeftButton)  # the old branch, whole
    qtbot.waitUntil(lambda: "Rome." in chat.view.plain_text(), timeout=WAIT_MS)
    assert chat.shown() == ["Capital of France?", "Paris.", "And of Italy?", "Rome."]

    # Ctrl+E edits the last message of the branch shown, the same way.
    chat.window.composer.setFocus()
    qtbot.keyClick(chat.window, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    italy = chat.message("And of Italy?")
    assert composer.editing_id == italy.id and composer.toPlainText() == "And of Italy?"
    qtbot.keyClick(composer, Qt.Key.Key_Escape)  # cancelled: nothing changes
    assert not composer.editing and composer.editing_id is None and composer.toPlainText() == ""
    assert chat.store.message_count(chat.window.session.current.id) == 6


def test_an_edit_whose_message_is_no_longer_shown_ends_but_keeps_the_text(qtbot, chat):
    chat.send("Hi", "Hello")
    with qtbot.waitSignal(chat.controller.stream_started, timeout=WAIT_MS):
        chat.window.regenerate_action.trigger()
    chat.answer("Hey")
    chat.send("Tell me more", "More.")
    more = chat.message("Tell me more")
    chat.window.sending.edit_message(more.id)
    chat.window.composer.setPlainText("Tell me less")
    hey = chat.message("Hey")
    qtbot.mouseClick(chat.view.version_bars.bars[hey.id].previous, Qt.MouseButton.LeftButton)  # "Hello"'s branch
    qtbot.waitUntil(lambda: "Hello" in chat.view.plain_text(), timeout=WAIT_MS)
    assert not chat.window.composer.editing and chat.window.composer.toPlainText() == "Tell me less"
    assert "Not editing" in chat.window.statusBar().currentMessage()


def test_a_branch_becomes_a_new_chat_from_the_menu(qtbot, chat):
    chat.send("Plan a trip.", "Where to?")
    chat.send("Rome.", "Lovely.")
    original = chat.window.session.current.id
    where = chat.message("Where to?")
    chat.menu_action(where.id, "Branch to new chat").trigger()
    copy = chat.window.session.current
    assert copy.id != original and chat.shown() == ["Plan a trip.", "Where to?"]
    assert "Lovely." not in chat.view.plain_text() and "Where to?" in chat.view.plain_text()
    assert chat.window.conversations.current_id() == copy.id and copy.id in chat.window.conversations.ids()
    assert [m.content for m in chat.store.list_messages(original)] == ["Plan a trip.", "Where to?", "Rome.", "Lovely."]


def test_a_chat_opened_from_a_search_shows_the_hits_branch_with_the_hit_marked(qtbot, chat):
    chat.send("Capital of France?", "Paris, on the Seine.")
    chat.send("Its river?", "The Seine again.")
    france = chat.window.session.current.id
    first = chat.message("Capital of France?")
    chat.window.sending.edit_message(first.id)
    with qtbot.waitSignal(chat.controller.stream_started, timeout=WAIT_MS):
        chat.window.submit("Capital of Spain?")
    chat.answer("Madrid.")
    assert "Seine" not in chat.view.plain_text()  # the branch shown no longer holds it
    chat.window.new_conversation()
    other = chat.window.session.current.id
    chat.store.add_message(other, "user", "Unrelated words")

    qtbot.keyClicks(chat.window.conversations.search, "seine")
    qtbot.waitUntil(lambda: chat.window.conversations.ids() == [france], timeout=WAIT_MS)
    chat.window.conversations.list.setCurrentItem(chat.window.conversations.item_of(france))
    assert chat.window.session.current.id == france
    paris = chat.message("Paris, on the Seine.")
    assert chat.shown() == ["Capital of France?", "Paris, on the Seine.", "Its river?", "The Seine again."]
    assert chat.view.marks.highlights() == [(paris.id, "Seine")]  # the first hit's message, not the later one
    marks = chat.view.extraSelections()
    marked = chat.view.cursorRect(marks[0].cursor)
    assert chat.view.viewport().rect().contains(marked.center())  # scrolled into sight
    chat.view.set_messages(chat.view_messages())  # marks gone; a click on the chat open marks them again
    assert chat.view.marks.highlights() == []
    tree = chat.window.conversations.list
    qtbot.mouseClick(tree.viewport(), Qt.MouseButton.LeftButton,
                     pos=tree.visualItemRect(chat.window.conversations.item_of(france)).center())
    assert chat.view.marks.highlights() == [(paris.id, "Seine")]

    chat.window.conversations.search.clear()  # opened without a search: nothing marked
    qtbot.waitUntil(lambda: len(chat.window.conversations.ids()) == 2, timeout=WAIT_MS)
    opened = []
    chat.controller.conversation_opened.connect(lambda conversation, messages: opened.append(conversation.id))
    qtbot.mouseClick(tree.viewport(), Qt.MouseButton.LeftButton,
                     pos=tree.visualItemRect(chat.window.conversations.item_of(other)).center())
    assert opened == [other] and chat.view.marks.highlights() == []  # opened once, by the click


def test_a_hit_far_up_in_a_long_chat_is_scrolled_into_sight(qtbot, chat):
    long_chat = chat.store.create_conversation("Long")
    for i in range(40):
        chat.store.add_message(long_chat.id, "user", f"Question {i}: " + "words " * 40)
        chat.store.add_message(long_chat.id, "assistant", "The needle is here." if i == 2 else f"Answer {i}.")
    chat.window.refresh_list()
    qtbot.keyClicks(chat.window.conversations.search, "needle")
    qtbot.waitUntil(lambda: chat.window.conversations.ids() == [long_chat.id], timeout=WAIT_MS)
    chat.window.conversations.list.setCurrentItem(chat.window.conversations.item_of(long_chat.id))
    bar = chat.view.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() < bar.maximum()  # not at the end, where a chat opens
    needle = chat.message("The needle is here.")
    assert chat.view.marks.highlights() == [(needle.id, "needle")]
    marks = chat.view.extraSelections()
    assert chat.view.viewport().rect().contains(chat.view.cursorRect(marks[0].cursor).center())
    header = chat.view.marks.header_point(needle.id)
    assert chat.view.viewport().rect().contains(header)  # its message's header too
