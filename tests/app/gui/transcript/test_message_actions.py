"""A message's actions in the transcript: Copy, Regenerate (the last reply) and Edit (yours) at its header while
the mouse is over it, the same from the keyboard's context menu, and each reply's stats line in small type
(real widgets, offscreen; real mouse events; no engine)."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QEvent, QPoint, Qt, QTimer
from PySide6.QtGui import QColor, QContextMenuEvent, QGuiApplication, QPalette, QTextCursor, QTextFormat
from PySide6.QtWidgets import QApplication, QMenu

from app.gui.transcript.view import ChatView
from app.services.history.store import Message
from tests.app.gui.transcript.shown_view import shown_view

WAIT_MS = 3000
STATS = {"ttft_s": 0.1, "prompt_tokens": 30, "cached_tokens": 21, "gen_tokens": 12, "prefill_tok_s": 100.0,
         "decode_tok_s": 20.0}
STATS_LINE = "20.0 tok/s · TTFT 0.10 s · 21 of 30 prompt tokens from cache"


def msg(mid: int, role: str, content: str, stats: dict | None = None, reasoning: str = "",
        state: str = "complete") -> Message:
    return Message(mid, 1, role, content, state, stats, time.time(), reasoning)


CHAT = [msg(1, "user", "Capital of France?"), msg(2, "assistant", "Paris.", STATS, reasoning="Easy one."),
        msg(3, "user", "And of Italy?"), msg(4, "assistant", "Rome.", {**STATS, "decode_tok_s": 31.25})]


@pytest.fixture
def view(qtbot) -> ChatView:
    return shown_view(qtbot, height=600)


def point_of(view: ChatView, text: str) -> QPoint:
    found = view.document().find(text)
    assert not found.isNull(), text
    cursor = QTextCursor(view.document())
    cursor.setPosition(found.selectionStart() + 1)
    return view.cursorRect(cursor).center()


def between_text_and_base(view: ChatView, color: QColor) -> bool:
    text, base = (view.palette().color(role).lightness() for role in (QPalette.ColorRole.Text, QPalette.ColorRole.Base))
    return min(text, base) + 20 < color.lightness() < max(text, base) - 20


def line_height(view: ChatView, text: str) -> float:
    return view.document().find(text).block().layout().lineAt(0).height()


def hover(qtbot, view: ChatView, text: str) -> None:
    qtbot.mouseMove(view.viewport(), point_of(view, text))
    qtbot.waitUntil(lambda: view.message_actions.bar.isVisible(), timeout=WAIT_MS)


def assert_at_header(view: ChatView, message_id: int) -> None:
    bar = view.message_actions.bar
    assert bar.message_id == message_id
    header = view.marks.header_point(message_id)
    assert abs(bar.geometry().center().y() - header.y()) < bar.height()  # on the header's line
    assert bar.geometry().left() > header.x() + 20  # right of the sender's name, not over it
    assert view.viewport().rect().contains(bar.geometry())


def test_hovering_a_message_shows_its_buttons_at_its_header(qtbot, view):
    view.set_messages(CHAT)
    bar = view.message_actions.bar
    assert not bar.isVisible()
    hover(qtbot, view, "France")
    assert_at_header(view, 1)
    assert bar.copy.accessibleName() == "Copy message" and bar.edit.accessibleName() == "Edit message"
    assert bar.copy.isVisible() and bar.edit.isVisible() and bar.edit.isEnabled()
    assert not bar.regenerate.isVisible()  # your message: nothing to regenerate

    hover(qtbot, view, "Rome.")
    qtbot.waitUntil(lambda: bar.message_id == 4, timeout=WAIT_MS)
    assert_at_header(view, 4)
    assert bar.regenerate.accessibleName() == "Regenerate reply"
    assert bar.regenerate.isVisible() and bar.regenerate.isEnabled() and not bar.edit.isVisible()

    qtbot.mouseMove(view.viewport(), point_of(view, "Paris."))
    qtbot.waitUntil(lambda: bar.message_id == 2, timeout=WAIT_MS)
    assert_at_header(view, 2)
    assert not bar.regenerate.isVisible()  # only the last reply is regenerated
    with qtbot.waitSignal(view.copied, timeout=WAIT_MS) as copied:
        qtbot.mouseClick(bar.copy, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == "Paris."  # the answer, not its reasoning
    assert copied.args == ["Copied the reply"]

    QApplication.sendEvent(view.viewport(), QEvent(QEvent.Type.Leave))  # the mouse left the chat
    assert not bar.isVisible()


def test_regenerate_and_edit_ask_the_window_and_wait_while_a_reply_is_written(qtbot, view):
    view.set_messages(CHAT)
    bar = view.message_actions.bar
    hover(qtbot, view, "Rome.")
    with qtbot.waitSignal(view.regenerate_requested, timeout=WAIT_MS):
        qtbot.mouseClick(bar.regenerate, Qt.MouseButton.LeftButton)
    qtbot.mouseMove(view.viewport(), point_of(view, "Italy"))
    qtbot.waitUntil(lambda: bar.message_id == 3, timeout=WAIT_MS)
    with qtbot.waitSignal(view.edit_requested, timeout=WAIT_MS) as edit:
        qtbot.mouseClick(bar.edit, Qt.MouseButton.LeftButton)
    assert edit.args == [3]

    view.set_busy(True)  # the session would refuse: the buttons say so
    qtbot.waitUntil(lambda: not bar.edit.isEnabled(), timeout=WAIT_MS)
    edits = []
    view.edit_requested.connect(edits.append)
    qtbot.mouseClick(bar.edit, Qt.MouseButton.LeftButton)
    assert edits == [] and bar.copy.isEnabled()
    view.set_busy(False)
    qtbot.waitUntil(bar.edit.isEnabled, timeout=WAIT_MS)


def test_the_buttons_follow_a_streaming_reply_and_copy_what_it_has(qtbot, view):
    view.set_messages(CHAT[:1])
    view.begin_stream(msg(2, "assistant", "", state="streaming"))
    view.append_stream("First words")
    qtbot.waitUntil(lambda: "First words" in view.plain_text(), timeout=WAIT_MS)
    hover(qtbot, view, "First words")
    bar = view.message_actions.bar
    assert_at_header(view, 2)
    assert bar.regenerate.isVisible() and not bar.regenerate.isEnabled()  # not while it is written
    view.append_stream(" and more.\n\n" + "\n\n".join(f"Line {i}." for i in range(5)))
    qtbot.waitUntil(lambda: "Line 4." in view.plain_text(), timeout=WAIT_MS)
    assert_at_header(view, 2)
    qtbot.mouseClick(bar.copy, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text().startswith("First words and more.\n\nLine 0.")
    view.end_stream(msg(2, "assistant", "First words and more.", STATS))
    qtbot.waitUntil(bar.regenerate.isEnabled, timeout=WAIT_MS)


def test_a_long_message_keeps_its_buttons_in_sight_when_its_header_is_scrolled_away(qtbot, view):
    long = "\n\n".join(f"Paragraph {i} of a long answer." for i in range(80))
    view.set_messages([CHAT[0], msg(2, "assistant", long, STATS)])
    view.verticalScrollBar().setValue(view.verticalScrollBar().maximum() // 2)
    qtbot.waitUntil(lambda: view.marks.header_point(2).y() < 0, timeout=WAIT_MS)
    qtbot.mouseMove(view.viewport(), QPoint(100, 200))
    qtbot.waitUntil(lambda: view.message_actions.bar.isVisible(), timeout=WAIT_MS)
    bar = view.message_actions.bar
    assert bar.message_id == 2 and bar.geometry().top() == 0


def keyboard_menu(view: ChatView, trigger: str = "") -> dict[str, bool]:
    """Open the context menu as the Menu key does (for the message at the text cursor): what it offers (and
    whether each is enabled), triggering `trigger` there."""
    offered: dict[str, bool] = {}

    def look() -> None:
        menu = QApplication.activePopupWidget()
        if isinstance(menu, QMenu):
            actions = {a.text(): a for a in menu.actions()}
            offered.update({text: action.isEnabled() for text, action in actions.items()})
            menu.close()
            if trigger in actions:
                actions[trigger].trigger()

    QTimer.singleShot(0, look)
    QApplication.sendEvent(view, QContextMenuEvent(QContextMenuEvent.Reason.Keyboard, QPoint(0, 0), QPoint(0, 0)))
    return offered


def test_the_keyboards_context_menu_offers_the_same_actions(qtbot, view):
    view.set_messages(CHAT)
    view.setFocus()
    view.setTextCursor(view.document().find("Rome"))  # where the keyboard is: the menu is for that message
    with qtbot.waitSignal(view.regenerate_requested, timeout=WAIT_MS):
        offered = keyboard_menu(view, "Regenerate reply")
    assert {"Copy message", "Regenerate reply", "Branch to new chat"} <= set(offered)
    assert "Edit message" not in offered
    view.setTextCursor(view.document().find("Italy"))
    offered = keyboard_menu(view, "Copy message")
    assert "Regenerate reply" not in offered and offered["Edit message"]
    assert QGuiApplication.clipboard().text() == "And of Italy?"
    view.set_busy(True)
    assert not keyboard_menu(view)["Edit message"]


def test_each_reply_has_its_stats_line_in_small_type(qtbot, view):
    view.set_messages(CHAT)
    text = view.plain_text()
    assert text.count(STATS_LINE) == 1 and "31.2 tok/s · TTFT 0.10 s" in text  # Paris's, then Rome's
    assert text.index("Paris.") < text.index(STATS_LINE) < text.index("And of Italy?")
    found = view.document().find(STATS_LINE)
    fmt = found.charFormat()
    assert fmt.intProperty(QTextFormat.Property.FontSizeAdjustment) < 0  # small type: laid out smaller
    assert line_height(view, STATS_LINE) < line_height(view, "Paris.")
    assert between_text_and_base(view, fmt.foreground().color())  # muted, from the theme

    view.begin_stream(msg(5, "assistant", "", state="streaming"))
    view.append_stream("Streaming.")
    qtbot.waitUntil(lambda: "Streaming." in view.plain_text(), timeout=WAIT_MS)
    assert view.plain_text().count("tok/s") == 2  # no figures before the reply ends
    view.end_stream(msg(5, "assistant", "Streaming.", {**STATS, "cached_tokens": None, "decode_tok_s": 9.0}))
    text = view.plain_text()
    assert text.count("9.0 tok/s · TTFT 0.10 s · 30 prompt tokens, from cache unknown") == 1
    assert text.index("Streaming.") < text.index("9.0 tok/s")
    view.set_messages([msg(6, "assistant", "Cut short.", state="interrupted")])  # no stats: no line
    assert "tok/s" not in view.plain_text()


def test_the_stats_line_is_muted_in_a_dark_theme_too(qtbot, view):
    dark = QPalette(view.palette())
    dark.setColor(QPalette.ColorRole.Base, QColor(20, 20, 24))
    dark.setColor(QPalette.ColorRole.Text, QColor(235, 235, 235))
    dark.setColor(QPalette.ColorRole.PlaceholderText, QColor(235, 235, 235, 128))
    view.setPalette(dark)
    view.set_messages(CHAT)
    muted = view.document().find(STATS_LINE).charFormat().foreground().color()
    assert between_text_and_base(view, muted) and muted.lightness() > 100  # readable on the dark base
