"""A reply's tool steps in the transcript: each step's text, then its calls as collapsed cards, before the
answer; cards rewritten in place as calls run and end, while the reply streams around them (real widgets,
offscreen; no engine, no MCP server: the messages are the data the chat would give)."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication, QTextCursor

from app.gui.common.tool_text import size_text
from app.gui.transcript.tool_card import CUT_CHARS
from app.gui.transcript.view import ChatView
from app.services.history.store import Message
from app.services.history.tool_steps import ToolCallRecord, ToolStep
from tests.app.gui.transcript.shown_view import shown_view

WAIT_MS = 3000
ARGS = '{"path": "notes.txt", "lines": [1, 2]}'


def call(status: str = "ok", result: str = "hello from the file", cid: str = "c1", name: str = "read_file",
         seconds: float = 0.4, arguments: str = ARGS) -> ToolCallRecord:
    return ToolCallRecord(cid, name, arguments, "files", status, result, seconds)  # type: ignore[arg-type]


def reply(content: str = "", steps: tuple[ToolStep, ...] = (), state: str = "complete", mid: int = 2,
          reasoning: str = "") -> Message:
    return Message(mid, 1, "assistant", content, state, None, time.time(), reasoning, True, tool_steps=steps)


def question() -> Message:
    return Message(1, 1, "user", "What is in notes.txt?", "complete", None, 0.0)


@pytest.fixture
def view(qtbot) -> ChatView:
    return shown_view(qtbot, height=900)


def header(view: ChatView, key: str) -> str:
    return view.state.tool_cards[key].header()


def header_point(view: ChatView, key: str) -> QPoint:
    cursor = view.state.tool_cards[key].header_cursor()
    cursor.setPosition(cursor.selectionStart() + 3)
    return view.cursorRect(cursor).center()


def point_of(view: ChatView, text: str) -> QPoint:
    found = view.document().find(text)
    assert not found.isNull(), text
    cursor = QTextCursor(view.document())
    cursor.setPosition(found.selectionStart() + 1)
    return view.cursorRect(cursor).center()


def test_a_finished_reply_shows_its_steps_collapsed_before_its_answer(view):
    steps = (ToolStep("Let me look at the file.", (call(result="x" * 2100),)),
             ToolStep("", (call("failed", "Server files exited (code 1)", cid="c2"),
                           call("denied", "The user denied this call.", cid="c3", name="delete_file"))))
    view.set_messages([question(), reply("The file says **hello**.", steps)])
    text = view.plain_text()
    assert header(view, "2.0.0") == "▸ Called read_file (files) · 0.4 s · 2.1 kB"
    assert header(view, "2.1.0") == "▸ Called read_file (files) · Failed: Server files exited (code 1)"
    assert header(view, "2.1.1") == "▸ delete_file (files) · Denied"
    assert text.index("What is in") < text.index("Let me look") < text.index("0.4 s") < text.index("Failed")
    assert text.index("Denied") < text.index("The file says hello.")
    assert '"path"' not in text and "xxxx" not in text  # collapsed: no arguments, no result


@pytest.mark.parametrize(("status", "result", "words"), [
    ("pending", "", "Waiting for permission…"),
    ("running", "", "Running… 0 s"),
    ("cancelled", "Stopped before it answered.", "Cancelled"),
    ("skipped", "step cap", "Skipped: step cap"),
    ("ok", "", "<0.1 s"),
])
def test_each_status_has_its_words(view, status, result, words):
    view.set_messages([reply("", (ToolStep("", (call(status, result, seconds=0.0),)),))])
    assert header(view, "2.0.0") == f"▸ {'Called ' if status == 'ok' else ''}read_file (files) · {words}"


def test_a_click_expands_a_card_to_its_arguments_and_result_and_back(qtbot, view):
    view.set_messages([question(), reply("Done.", (ToolStep("", (call(),)),))])
    with qtbot.waitSignal(view.anchorClicked, timeout=WAIT_MS):
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=header_point(view, "2.0.0"))
    text = view.plain_text()
    assert ('▾ Called read_file (files) · 0.4 s · 19 B\nArguments\n{\n  "path": "notes.txt",\n  "lines": [\n'
            '    1,\n    2\n  ]\n}\nResult\nhello from the file\n') in text
    assert text.index("hello from the file") < text.index("Done.")
    mono = view.document().find('"path"').charFormat()
    assert mono.fontFixedPitch() or mono.fontStyleHint().name == "Monospace"
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=header_point(view, "2.0.0"))
    qtbot.waitUntil(lambda: '"path"' not in view.plain_text(), timeout=WAIT_MS)
    assert header(view, "2.0.0").startswith("▸ ")


def test_enter_and_space_on_a_focused_card_toggle_it(qtbot, view):
    view.set_messages([reply("Done.", (ToolStep("", (call(),)),))])
    view.setFocus()
    qtbot.keyClick(view, Qt.Key.Key_Tab)  # the first link: the card's header
    assert view.textCursor().selectedText() == header(view, "2.0.0")
    qtbot.keyClick(view, Qt.Key.Key_Return)
    assert "hello from the file" in view.plain_text() and view.state.tool_cards["2.0.0"].expanded
    assert view.textCursor().selectedText() == header(view, "2.0.0")  # the focus stays on it
    qtbot.keyClick(view, Qt.Key.Key_Space)
    assert "hello from the file" not in view.plain_text()


def test_markup_in_arguments_and_results_shows_as_text(view):
    evil = '<script>alert(1)</script> <b>bold</b> **not bold** <img src="x.png"> [link](http://x)'
    view.set_messages([reply("", (ToolStep("", (call(result=evil, arguments='{"q": "<i>hi</i>"}'),)),))])
    view.toggle_link("tailor-tool:2.0.0")
    text = view.plain_text()
    assert evil in text and '"q": "<i>hi</i>"' in text
    assert "<script>" not in view.toHtml().replace("&lt;script&gt;", "")  # no element made of it


def test_a_long_result_is_cut_on_screen_until_show_all(qtbot, view):
    long = "".join(f"line {i}\n" for i in range(2000))
    view.set_messages([reply("", (ToolStep("", (call(result=long),)),))])
    view.toggle_link("tailor-tool:2.0.0")
    text = view.plain_text()
    assert "line 39\n" in text and "line 40\n" not in text and f"Show all ({size_text(long)})" in text
    with qtbot.waitSignal(view.anchorClicked, timeout=WAIT_MS):
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=point_of(view, "Show all"))
    text = view.plain_text()
    assert "line 1999" in text and "Show all" not in text
    assert len(long) > CUT_CHARS


def test_a_call_rewrites_in_place_while_the_reply_streams_on(qtbot, view):
    """text → step → running → ok → more text → finished: the document says each once, in order."""
    view.set_messages([question()])
    view.begin_stream(reply(state="streaming"))
    view.append_stream("Let me ")
    view.append_stream("look.")
    qtbot.waitUntil(lambda: "Let me look." in view.plain_text(), timeout=WAIT_MS)
    pending = call("pending", "")
    view.on_tool_step(reply("", (ToolStep("Let me look.", (pending,)),), state="streaming"))
    assert header(view, "2.0.0") == "▸ read_file (files) · Waiting for permission…"
    view.toggle_link("tailor-tool:2.0.0")  # expanded while it waits: it stays so
    view.on_tool_call_changed(2, 0, replace(pending, status="running"))
    assert header(view, "2.0.0") == "▾ read_file (files) · Running… 0 s"
    qtbot.waitUntil(lambda: "Running… 1 s" in header(view, "2.0.0"), timeout=3 * WAIT_MS)  # the seconds move
    view.append_stream("The file says ")
    qtbot.waitUntil(lambda: "The file says" in view.plain_text(), timeout=WAIT_MS)
    done = pending.ended("ok", "hello", 1.25)
    view.on_tool_call_changed(2, 0, done)
    view.append_stream("hello.")
    qtbot.waitUntil(lambda: "The file says hello." in view.plain_text(), timeout=WAIT_MS)
    final = reply("The file says hello.", (ToolStep("Let me look.", (done,)),))
    view.end_stream(final)
    streamed = view.plain_text()
    assert streamed == (
        "\nYou\nWhat is in notes.txt? \n\nAssistant\n\nLet me look. \n\n▾ Called read_file (files) · 1.2 s · 5 B\n"
        'Arguments\n{\n  "path": "notes.txt",\n  "lines": [\n    1,\n    2\n  ]\n}\nResult\nhello\n\n\n'
        "The file says hello. ")
    view.set_messages([question(), final])  # the chat opened again shows the same
    view.toggle_link("tailor-tool:2.0.0")
    assert view.plain_text() == streamed
    assert not view.streaming and not view.tool_steps.clock.isActive()


def test_the_streaming_reasoning_goes_with_its_step_and_new_reasoning_gets_a_block_of_its_own(qtbot, view):
    view.begin_stream(reply(state="streaming"))
    view.append_reasoning("I should read it.", 4, 0.5)
    view.append_stream("Reading.")
    qtbot.waitUntil(lambda: "Reading." in view.plain_text(), timeout=WAIT_MS)
    first = call()
    view.on_tool_step(reply("", (ToolStep("Reading.", (first,), "I should read it."),), state="streaming"))
    assert 2 not in view.reasoning_blocks and view.state.step_reasoning["2.0"].text == "I should read it."
    view.append_reasoning("It says hello.", 3, 0.2)
    view.append_stream("Hello.")
    qtbot.waitUntil(lambda: "Hello." in view.plain_text() and 2 in view.reasoning_blocks, timeout=WAIT_MS)
    final = reply("Hello.", (ToolStep("Reading.", (first,), "I should read it."),), reasoning="It says hello.")
    view.end_stream(final)
    text = view.plain_text()
    assert text.index("▸ Thought") < text.index("Reading.") < text.index("read_file") < text.rindex("▸ Thought")
    assert text.rindex("▸ Thought") < text.index("Hello.") and "I should read it." not in text
    menu = view.transcript_actions.message_menu(point_of(view, "Hello."))
    {a.text(): a for a in menu.actions()}["Copy with reasoning"].trigger()
    assert QGuiApplication.clipboard().text() == (
        'Thinking:\nI should read it.\n\nReading.\n\n[Tool call: read_file (files): ok, 0.4 s]\nArguments:\n{\n'
        '  "path": "notes.txt",\n  "lines": [\n    1,\n    2\n  ]\n}\nResult:\nhello from the file\n\n'
        "Thinking:\nIt says hello.\n\nAnswer:\nHello.")


def test_copy_message_gives_the_steps_and_the_answer(qtbot, view):
    view.set_messages([reply("It says hello.", (ToolStep("Let me look.", (call(result="hello"),)),))])
    view.message_actions.bar.message_id = 2
    view.transcript_actions.copy_message(2)
    assert QGuiApplication.clipboard().text() == (
        'Let me look.\n\n[Tool call: read_file (files): ok, 0.4 s]\nArguments:\n{\n  "path": "notes.txt",\n'
        '  "lines": [\n    1,\n    2\n  ]\n}\nResult:\nhello\n\nIt says hello.')


def test_code_in_a_step_and_in_the_answer_copy_their_own_blocks(view):
    steps = (ToolStep("First:\n\n```python\nstep = 1\n```\n", (call(),)),)
    view.set_messages([reply("Then:\n\n```bash\necho answer\n```\n", steps)])
    assert view.transcript_actions.copy_code(2, 0) == "step = 1"
    assert view.transcript_actions.copy_code(2, 1) == "echo answer"


def test_steps_never_shown_while_streaming_appear_when_it_ends(qtbot, view):
    view.begin_stream(reply(state="streaming"))
    view.append_stream("Answer")
    qtbot.waitUntil(lambda: "Answer" in view.plain_text(), timeout=WAIT_MS)
    view.end_stream(reply("Answer.", (ToolStep("Looked.", (call(),)),)))
    text = view.plain_text()
    assert text.index("Looked.") < text.index("Called read_file") < text.index("Answer.")
    assert text.count("Answer") == 1 and not view.streaming


def test_a_call_of_a_reply_not_shown_changes_nothing(view):
    view.set_messages([question()])
    before = view.plain_text()
    view.on_tool_call_changed(9, 0, call())
    view.on_tool_step(reply("", (ToolStep("", (call(),)),), mid=9))  # not the streaming reply
    assert view.plain_text() == before
