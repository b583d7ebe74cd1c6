"""The question before a tool call runs: each button and key gives its decision, the arguments show in full,
Enter and Esc are the bar's while it has the focus (not the window's Stop), and the focus goes back to the
message box (real widgets, offscreen)."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow, QPlainTextEdit, QVBoxLayout, QWidget

from app.chat.tool_permissions import PermissionAsk
from app.gui.tools.permission_bar import PermissionBar
from app.services.history.tool_steps import ToolCallRecord

WAIT_MS = 3000


def ask(arguments: str = '{"path": "notes.txt"}', cid: str = "call-1") -> PermissionAsk:
    call = ToolCallRecord(cid, "read_file", arguments, "files")
    return PermissionAsk(call, "Reads a file of the project.", 1, 2)


class Window(QMainWindow):
    """A window like Tailor's: a message box, the bar above it, and Esc as Stop."""

    def __init__(self, key_delay_ms: int = 0):
        super().__init__()
        self.composer = QPlainTextEdit()
        self.bar = PermissionBar(self.composer, key_delay_ms=key_delay_ms)
        self.stops = 0
        stop = QAction("Stop", self, shortcut=QKeySequence("Esc"))
        stop.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        stop.triggered.connect(self._stop)
        self.addAction(stop)
        column = QWidget()
        layout = QVBoxLayout(column)
        layout.addWidget(self.bar)
        layout.addWidget(self.composer)
        self.setCentralWidget(column)

    def _stop(self) -> None:
        self.stops += 1


@pytest.fixture
def window(qtbot) -> Window:
    window = Window()
    qtbot.addWidget(window)
    window.resize(700, 500)
    window.show()
    window.activateWindow()
    qtbot.waitActive(window)
    window.composer.setFocus()
    return window


def answers(qtbot, window: Window, act) -> list[tuple[str, str]]:
    got: list[tuple[str, str]] = []
    window.bar.answered.connect(lambda cid, decision: got.append((cid, decision)))
    window.bar.ask(ask())
    qtbot.waitUntil(lambda: window.bar.arguments.hasFocus(), timeout=WAIT_MS)
    act()
    return got


@pytest.mark.parametrize(("decision", "key"), [("once", Qt.Key.Key_A), ("chat", Qt.Key.Key_I),
                                               ("tool", Qt.Key.Key_T), ("deny", Qt.Key.Key_D)])
def test_each_button_and_its_alt_key_answer(qtbot, window, decision, key):
    got = answers(qtbot, window, lambda: window.bar.buttons[decision].click())
    assert got == [("call-1", decision)] and not window.bar.isVisible()
    got.clear()
    window.bar.ask(ask())
    qtbot.keyClick(window.composer, key, Qt.KeyboardModifier.AltModifier)  # from anywhere in the window
    assert got == [("call-1", decision)]


def test_the_question_shows_the_tool_its_server_and_its_description(window):
    window.bar.ask(ask())
    assert window.bar.isVisible()
    assert window.bar.question.text() == "Allow <code>read_file</code> (server <b>files</b>) to run?"
    assert window.bar.description.text() == "Reads a file of the project."
    assert "Alt+T" in window.bar.buttons["tool"].toolTip() and "read_file" in window.bar.buttons["tool"].toolTip()


def test_enter_allows_once_and_the_focus_goes_back_to_the_message_box(qtbot, window):
    got = answers(qtbot, window, lambda: qtbot.keyClick(window.bar.arguments, Qt.Key.Key_Return))
    assert got == [("call-1", "once")]
    assert window.composer.hasFocus()


def test_escape_denies_and_is_not_the_windows_stop(qtbot, window):
    got = answers(qtbot, window, lambda: qtbot.keyClick(window.bar.arguments, Qt.Key.Key_Escape))
    assert got == [("call-1", "deny")] and window.stops == 0
    qtbot.keyClick(window.composer, Qt.Key.Key_Escape)  # the bar gone, Esc is Stop again
    assert window.stops == 1


def test_enter_on_a_focused_button_presses_that_button(qtbot, window):
    def tab_to_deny_and_enter():
        window.bar.buttons["deny"].setFocus()
        qtbot.keyClick(window.bar.buttons["deny"], Qt.Key.Key_Return)
    assert answers(qtbot, window, tab_to_deny_and_enter) == [("call-1", "deny")]


def test_keys_right_after_the_question_appeared_are_not_an_answer(qtbot):
    window = Window(key_delay_ms=60_000)
    qtbot.addWidget(window)
    window.show()
    got: list[tuple[str, str]] = []
    window.bar.answered.connect(lambda cid, decision: got.append((cid, decision)))
    window.bar.ask(ask())
    qtbot.keyClick(window.bar.arguments, Qt.Key.Key_Return)
    qtbot.keyClick(window.bar.arguments, Qt.Key.Key_A, Qt.KeyboardModifier.AltModifier)
    assert got == [] and window.bar.isVisible()
    window.bar.buttons["once"].click()  # a click is deliberate
    assert got == [("call-1", "once")]


def test_long_arguments_are_shown_in_full_and_scroll(window):
    arguments = json.dumps({"path": "big.txt", "lines": [f"line {i}" for i in range(300)]})
    window.bar.ask(ask(arguments))
    shown = window.bar.arguments.toPlainText()
    assert shown == json.dumps(json.loads(arguments), indent=2)
    assert '"line 299"' in shown
    assert window.bar.arguments.verticalScrollBar().maximum() > 0  # the box stays small; it scrolls


def test_broken_json_is_shown_as_the_model_wrote_it(window):
    window.bar.ask(ask('{"path": "a.txt",'))
    assert window.bar.arguments.toPlainText() == '{"path": "a.txt",'


def test_none_hides_the_question_and_a_later_click_answers_nothing(qtbot, window):
    got = answers(qtbot, window, lambda: window.bar.ask(None))
    assert not window.bar.isVisible() and window.composer.hasFocus()
    window.bar.buttons["once"].click()
    assert got == []
