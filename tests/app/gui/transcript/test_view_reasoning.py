"""A reply's reasoning in the transcript: a collapsed block above the answer, counting while it streams,
expanded by a click, Enter or Space, copied only when asked (real widgets, offscreen; no engine)."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication, QPalette, QTextCursor

from app.gui.transcript.view import ChatView
from app.services.history.store import Message
from tests.app.gui.transcript.shown_view import shown_view

WAIT_MS = 3000
THOUGHT_STATS = {"ttft_s": 0.1, "prompt_tokens": 30, "cached_tokens": 0, "gen_tokens": 392, "prefill_tok_s": 100.0,
                 "decode_tok_s": 20.0, "reasoning_tokens": 340, "reasoning_s": 12.2}


def reply(content: str = "", reasoning: str = "", state: str = "complete", mid: int = 2, closed: bool = True,
          stats: dict | None = None) -> Message:
    return Message(mid, 1, "assistant", content, state, stats, time.time(), reasoning, closed)


@pytest.fixture
def view(qtbot) -> ChatView:
    return shown_view(qtbot, height=900)


def header_point(view: ChatView, message_id: int) -> QPoint:
    """A point inside the header's link, in viewport coordinates."""
    cursor = view.reasoning_blocks[message_id].header_cursor()
    cursor.setPosition(cursor.selectionStart() + 4)
    return view.cursorRect(cursor).center()


def click_header(qtbot, view: ChatView, message_id: int) -> None:
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=header_point(view, message_id))


def header_text(view: ChatView, message_id: int) -> str:
    return view.reasoning_blocks[message_id].header_cursor().selectedText()


def point_of(view: ChatView, text: str) -> QPoint:
    found = view.document().find(text)
    assert not found.isNull(), text
    cursor = QTextCursor(view.document())
    cursor.setPosition(found.selectionStart() + 1)
    return view.cursorRect(cursor).center()


def test_reasoning_streams_into_a_collapsed_block_then_the_answer_below_it(qtbot, view):
    view.set_messages([Message(1, 1, "user", "What is 17 * 23?", "complete", None, 0.0)])
    view.begin_stream(reply(state="streaming"))
    for i, piece in enumerate(["\n17 * 23", " = 340", " + 51"], start=1):
        view.append_reasoning(piece, i, 0.2 * i)
    qtbot.waitUntil(lambda: 2 in view.reasoning_blocks and "3 tokens" in header_text(view, 2), timeout=WAIT_MS)
    assert header_text(view, 2) == "▸ Thinking… 0 s · 3 tokens"
    assert "17 * 23 = 340" not in view.plain_text()  # collapsed by default
    assert view.reasoning_blocks[2].text == "\n17 * 23 = 340 + 51"
    view.append_stream("It is ")
    view.append_stream("**391**.")
    qtbot.waitUntil(lambda: "It is 391." in view.plain_text(), timeout=WAIT_MS)
    assert header_text(view, 2).startswith("▸ Thought for ")  # the answer began: the thinking ended
    view.end_stream(reply("It is **391**.", "\n17 * 23 = 340 + 51", stats=THOUGHT_STATS))
    text = view.plain_text()
    assert "▸ Thought for 12 s · 340 tokens" in text and not view.streaming
    assert text.index("What is 17") < text.index("Thought for 12 s") < text.index("It is 391.")
    assert text.count("It is 391.") == 1


def test_a_reply_cut_off_while_thinking_says_so(qtbot, view):
    view.begin_stream(reply(state="streaming"))
    view.append_reasoning("First, consider", 2, 1.0)
    qtbot.waitUntil(lambda: 2 in view.reasoning_blocks, timeout=WAIT_MS)
    stats = {**THOUGHT_STATS, "reasoning_tokens": 2, "reasoning_s": 1.5}
    view.end_stream(reply("", "First, consider", closed=False, stats=stats))
    assert header_text(view, 2) == "▸ Thought for 2 s · 2 tokens (cut off)"
    view.set_messages([reply("", "First, consider", state="interrupted", closed=False)])  # as reloaded: no stats
    assert header_text(view, 2) == "▸ Thought (cut off)" and "(reply interrupted)" in view.plain_text()


def test_the_header_counts_seconds_while_no_token_comes(qtbot, view):
    view.begin_stream(reply(state="streaming"))
    view.append_reasoning("Hmm", 1, 0.0)
    qtbot.waitUntil(lambda: 2 in view.reasoning_blocks, timeout=WAIT_MS)
    assert header_text(view, 2) == "▸ Thinking… 0 s · 1 token"
    qtbot.waitUntil(lambda: header_text(view, 2) == "▸ Thinking… 1 s · 1 token", timeout=2 * WAIT_MS)


def test_a_click_on_the_header_shows_and_hides_the_reasoning(qtbot, view):
    stored = reply("The answer is 391.", "\n\nSeventeen times twenty-three.\nThat is 391.", stats=THOUGHT_STATS)
    view.set_messages([Message(1, 1, "user", "Compute", "complete", None, 0.0), stored])
    assert header_text(view, 2) == "▸ Thought for 12 s · 340 tokens"  # reloaded from the store, collapsed
    assert "Seventeen" not in view.plain_text()
    with qtbot.waitSignal(view.anchorClicked, timeout=WAIT_MS):
        click_header(qtbot, view, 2)
    text = view.plain_text()
    assert "▾ Thought for 12 s · 340 tokens\nSeventeen times twenty-three.\nThat is 391.\n" in text
    assert text.index("That is 391.") < text.index("The answer is 391.")
    grey = view.document().find("Seventeen").charFormat().foreground().color()
    text_color = view.palette().color(QPalette.ColorRole.Text)
    assert grey.name() != text_color.name()  # told apart from the answer: between the text and the base
    base = view.palette().color(QPalette.ColorRole.Base)
    assert min(text_color.lightness(), base.lightness()) < grey.lightness() < max(text_color.lightness(), base.lightness())
    click_header(qtbot, view, 2)
    qtbot.waitUntil(lambda: "Seventeen" not in view.plain_text(), timeout=WAIT_MS)
    assert header_text(view, 2).startswith("▸ ")


def test_enter_and_space_on_the_focused_header_toggle_it(qtbot, view):
    view.set_messages([reply("391.", "Seventeen times twenty-three.", stats=THOUGHT_STATS)])
    view.setFocus()
    qtbot.keyClick(view, Qt.Key.Key_Tab)  # the keyboard moves to the first link: the header
    assert view.textCursor().selectedText() == header_text(view, 2)
    qtbot.keyClick(view, Qt.Key.Key_Return)
    assert "Seventeen" in view.plain_text() and view.reasoning_blocks[2].expanded
    assert view.textCursor().selectedText() == header_text(view, 2)  # the focus stays on it
    qtbot.keyClick(view, Qt.Key.Key_Space)
    assert "Seventeen" not in view.plain_text() and not view.reasoning_blocks[2].expanded


def test_an_expanded_block_shows_reasoning_live_and_the_answer_stays_below(qtbot, view):
    view.begin_stream(reply(state="streaming"))
    view.append_reasoning("one", 1, 0.1)
    qtbot.waitUntil(lambda: 2 in view.reasoning_blocks, timeout=WAIT_MS)
    assert view.toggle_reasoning(2)
    for i in range(2, 200):
        view.append_reasoning(f" {i}", i, 0.1 * i)
    qtbot.waitUntil(lambda: " 199" in view.plain_text(), timeout=WAIT_MS)
    assert view.renders < 20  # coalesced: far fewer renders than tokens
    view.append_stream("First paragraph.\n\nSecond")
    qtbot.waitUntil(lambda: "Second" in view.plain_text(), timeout=WAIT_MS)
    view.toggle_reasoning(2)  # collapsing moves the answer's blocks up; it goes on streaming below
    view.append_stream(" paragraph.")
    qtbot.waitUntil(lambda: "Second paragraph." in view.plain_text(), timeout=WAIT_MS)
    view.end_stream(reply("First paragraph.\n\nSecond paragraph.", "one" + "".join(f" {i}" for i in range(2, 200))))
    text = view.plain_text()
    assert text.count("First paragraph.") == 1 and text.count("Second paragraph.") == 1
    assert text.index("Thought for") < text.index("First paragraph.") and "one 2 3" not in text


def test_toggling_an_earlier_reply_while_another_streams_keeps_the_stream_in_place(qtbot, view):
    view.set_messages([reply("Old answer.", "Old thoughts.", mid=1, stats=THOUGHT_STATS)])
    view.begin_stream(reply(state="streaming", mid=3))
    view.append_stream("New ")
    qtbot.waitUntil(lambda: "New" in view.plain_text(), timeout=WAIT_MS)
    view.toggle_reasoning(1)
    view.append_stream("answer.")
    qtbot.waitUntil(lambda: "New answer." in view.plain_text(), timeout=WAIT_MS)
    view.end_stream(reply("New answer.", mid=3))
    text = view.plain_text()
    assert "Old thoughts." in text and text.count("New answer.") == 1 and text.count("Old answer.") == 1
    assert text.index("Old thoughts.") < text.index("Old answer.") < text.index("New answer.")


def test_copying_a_message_gives_its_answer_and_with_reasoning_when_asked(qtbot, view):
    view.set_messages([Message(1, 1, "user", "Compute", "complete", None, 0.0),
                       reply("The answer is 391.", "Seventeen times twenty-three.", stats=THOUGHT_STATS)])
    menu = view.transcript_actions.message_menu(point_of(view, "The answer is"))
    actions = {a.text(): a for a in menu.actions()}
    assert "Copy message" in actions and "Copy with reasoning" in actions
    actions["Copy message"].trigger()
    assert QGuiApplication.clipboard().text() == "The answer is 391."
    actions["Copy with reasoning"].trigger()
    assert QGuiApplication.clipboard().text() == (
        "Thinking:\nSeventeen times twenty-three.\n\nAnswer:\nThe answer is 391.")
    user_actions = {a.text(): a for a in view.transcript_actions.message_menu(point_of(view, "Compute")).actions()}
    assert "Copy with reasoning" not in user_actions  # a reply's menu only
    user_actions["Copy message"].trigger()  # yours are copied too
    assert QGuiApplication.clipboard().text() == "Compute"


def test_copying_the_reply_that_streams_gives_what_it_has(qtbot, view):
    view.begin_stream(reply(state="streaming"))
    view.append_reasoning("Thinking hard", 2, 0.5)
    view.append_stream("Partial answer")
    qtbot.waitUntil(lambda: "Partial answer" in view.plain_text(), timeout=WAIT_MS)
    actions = {a.text(): a for a in view.transcript_actions.message_menu(point_of(view, "Partial answer")).actions()}
    actions["Copy with reasoning"].trigger()
    assert QGuiApplication.clipboard().text() == "Thinking:\nThinking hard\n\nAnswer:\nPartial answer"


def test_reasoning_that_comes_only_with_the_final_message_goes_above_the_answer(qtbot, view):
    view.begin_stream(reply(state="streaming"))
    view.append_stream("First paragraph.\n\nThe answer")
    qtbot.waitUntil(lambda: "The answer" in view.plain_text(), timeout=WAIT_MS)
    view.end_stream(reply("First paragraph.\n\nThe answer.", "Late thoughts.", stats=THOUGHT_STATS))
    text = view.plain_text()
    assert text.index("Thought for 12 s · 340 tokens") < text.index("First paragraph.") < text.index("The answer.")
    assert text.count("The answer.") == 1
