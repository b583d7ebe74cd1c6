"""The window's layout, offscreen: its first size and what it remembers, the one side panel (tabs, the
icon rail, the shortcuts), Send that becomes Stop, the readable chat column, status bar labels that
shorten to whole words, and the chat list's elided titles. The same geometry checks as the Xvfb test
(tests/app/gui/xvfb_layout.py) run here at 1280×720, so a machine without Xvfb still checks the layout."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import QLabel, QPushButton, QWidget

from app.gui.common.app_settings import app_settings
from app.gui.common.status_labels import ELLIPSIS, FittingLabel, short_form
from app.gui.side_panel.memory.bar import MemoryBar
from app.gui.window_geometry import GEOMETRY_KEY, first_geometry
from app.gui.window_layout import CHAT_MIN_WIDTH, MEMORY, PLAN, SETTINGS
from engine.protocol import DeviceMemory
from tests.app.gui.xvfb_layout import label_problem, layout_problems, settle
from tests.app.gui.xvfb_window import ANSWER, TITLES, ScriptedWindow

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


@pytest.fixture
def scripted(qtbot, tmp_path: Path):
    made: list[ScriptedWindow] = []

    def make(show: bool = True) -> ScriptedWindow:
        chat = ScriptedWindow(tmp_path / f"window-{len(made)}")
        made.append(chat)
        qtbot.addWidget(chat.window)
        if show:
            chat.window.show()
            chat.window.activateWindow()  # window shortcuts (Ctrl+B, Ctrl+I) go to the active window
            qtbot.waitUntil(chat.window.isActiveWindow, timeout=5000)
        return chat

    yield make
    for chat in made:
        chat.close()


# ------------------------------------------------------------ size and memory


@pytest.mark.parametrize(("screen", "expected"), [
    (QRect(0, 0, 1920, 1080), QRect(192, 108, 1536, 864)),  # 80 %, centred
    (QRect(0, 0, 1280, 720), QRect(128, 40, 1024, 640)),  # 80 % would be under 1024 × 640
    (QRect(0, 0, 1000, 600), QRect(0, 0, 1000, 600)),  # never more than the screen
    (QRect(1920, 30, 2560, 1410), QRect(2176, 171, 2048, 1128)),  # a second screen, under a top bar
])
def test_the_first_window_is_80_percent_of_the_screen_centred(screen, expected):
    assert first_geometry(screen) == expected


def test_the_window_remembers_its_size_splitter_and_side_panel(scripted, qtbot, tmp_path):
    """(The offscreen screen is 800 × 800, narrower than the window with its panel open can be: the panel is
    collapsed here for a size that fits. The Xvfb test restores a larger size, and a place, on a larger screen.)"""
    first = scripted().window
    assert app_settings().value(GEOMETRY_KEY) is None  # a first start: nothing saved yet
    first.side_panel.show_tab(PLAN.key)
    first.side_panel.set_collapsed(True)
    qtbot.waitUntil(lambda: first.minimumWidth() < 780)  # the rail, not the panel, counted in it
    first.resize(780, 700)
    qtbot.waitUntil(lambda: (first.width(), first.height()) == (780, 700))
    chats, chat, rail = first.splitter.sizes()
    first.splitter.setSizes([chats + 40, chat - 40, rail])  # as a drag of the chat list's handle would
    sizes = first.splitter.sizes()
    assert sizes[0] == chats + 40
    first.close()
    assert Path(app_settings().fileName()).is_relative_to(tmp_path)  # the test's TAILOR_HOME, not the user's
    again = scripted().window
    assert (again.width(), again.height()) == (780, 700)
    assert again.splitter.sizes() == sizes
    assert again.side_panel.is_collapsed() and again.side_panel.rail.isVisible()
    assert again.side_panel.current_key() == PLAN.key
    again.side_panel.rail_buttons[SETTINGS.key].click()
    assert not again.side_panel.is_collapsed() and again.side_panel.current_key() == SETTINGS.key
    again.close()
    third = scripted().window
    assert not third.side_panel.is_collapsed() and third.side_panel.current_key() == SETTINGS.key


# ------------------------------------------------------------ the side panel


def test_the_side_panel_collapses_to_a_rail_with_ctrl_b_and_the_rail_reopens_a_tab(scripted, qtbot):
    window = scripted().window
    panel, column = window.side_panel, window.chat_column
    assert [panel.tabs.tabText(i) for i in range(panel.tabs.count())] == ["Settings", "Memory", "Model plan"]
    assert panel.tabs.isVisible() and not panel.rail.isVisible() and panel.current_key() == SETTINGS.key
    wide, chat = panel.width(), column.width()
    qtbot.keyClick(window.composer, Qt.Key.Key_B, CTRL)
    assert panel.is_collapsed() and panel.rail.isVisible() and not panel.tabs.isVisible()
    qtbot.waitUntil(lambda: column.width() > chat)
    assert panel.width() < 60 and column.width() - chat == wide - panel.width()  # the chat got the room
    assert not window.view_menu.panel_action.isChecked()
    for tab in (SETTINGS, MEMORY, PLAN):
        button = panel.rail_buttons[tab.key]
        assert button.isVisible() and button.accessibleName() == tab.name and button.toolTip() == tab.name
        assert not button.icon().isNull()
    assert panel.expand_button.toolTip() == "Expand the side panel (Ctrl+B)"
    panel.rail_buttons[MEMORY.key].click()
    assert not panel.is_collapsed() and panel.current_key() == MEMORY.key and window.memory_page.isVisible()
    qtbot.waitUntil(lambda: panel.width() == wide)
    qtbot.keyClick(window.composer, Qt.Key.Key_B, CTRL)
    assert panel.is_collapsed()
    qtbot.keyClick(window.composer, Qt.Key.Key_B, CTRL)
    assert not panel.is_collapsed() and panel.current_key() == MEMORY.key


def test_ctrl_shift_m_toggles_the_memory_tab_and_ctrl_i_opens_the_plan(scripted, qtbot):
    chat = scripted()
    chat.start()
    window = chat.window
    panel = window.side_panel
    view = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    assert {window.view_menu.memory_action, window.plan_action, window.view_menu.panel_action} <= set(view.actions())
    qtbot.keyClick(window.composer, Qt.Key.Key_M, CTRL | SHIFT)
    assert panel.showing(MEMORY.key) and window.memory_page.isVisible() and window.view_menu.memory_action.isChecked()
    qtbot.keyClick(window.composer, Qt.Key.Key_M, CTRL | SHIFT)
    assert panel.is_collapsed() and not window.memory_page.isVisible() and not window.view_menu.memory_action.isChecked()
    qtbot.keyClick(window.composer, Qt.Key.Key_I, CTRL)
    assert panel.showing(PLAN.key) and window.plan_page.isVisible()
    text = window.plan_page.text()
    assert text.startswith("CPU · KV f16 · forecast ") and "Why:" in text
    assert window.show_plan() is window.plan_page


def test_the_memory_tab_has_no_sideways_scroll_and_its_texts_wrap(scripted, qtbot):
    chat = scripted()
    chat.start()
    chat.fill()
    window = chat.window
    window.side_panel.show_tab(MEMORY.key)
    qtbot.waitUntil(lambda: window.memory_page.hardware.profile is not None)
    settle(window, 1280, 720)
    memory = window.memory_page.memory
    assert memory.room_label.text().startswith("Room for 4,047 more tokens of context")
    assert not window.memory_page.horizontalScrollBar().isVisible()
    assert window.memory_page.widget().width() <= window.memory_page.viewport().width()
    for label in window.memory_page.findChildren(QLabel):
        assert label.wordWrap(), label.text()
        assert label_problem(label) is None


# ------------------------------------------------------------ the chat column


def test_send_becomes_stop_in_the_same_place_while_a_reply_streams(scripted, qtbot):
    chat = scripted()
    chat.start()
    window = chat.window
    send, stop = window.send_stop.send_button, window.send_stop.stop_button
    assert send.isVisible() and not stop.isVisible()
    place = send.geometry()
    with qtbot.waitSignal(window.controller.stream_started, timeout=5000):
        window.submit("Hello")
    assert stop.isVisible() and stop.isEnabled() and not send.isVisible()
    assert stop.geometry() == place
    chat.engine.stream(chat.engine.last_request, "Hi")
    chat.pump()
    qtbot.keyClick(window.composer, Qt.Key.Key_Escape)  # Esc stops, as before
    assert chat.engine.cancelled == [chat.engine.last_request]
    chat.engine.finish(chat.engine.last_request, "Hi", reason="cancelled")
    chat.pump()
    qtbot.waitUntil(lambda: send.isVisible() and not stop.isVisible(), timeout=5000)
    assert send.geometry() == place


def test_the_chat_column_keeps_its_minimum_and_a_readable_centred_transcript(scripted, qtbot):
    window = scripted().window
    header = window.chat_header
    # The row at the top of the chat column holds the model picker (app/gui/model_picker/picker.py) alone.
    assert header.layout() is window.chat_header_layout and window.chat_header_layout.count() == 1
    assert window.chat_header_layout.itemAt(0).widget() is window.model_picker
    assert window.chat_header_layout.contentsMargins().left() == 0
    settle(window, 1920, 1080)
    column, transcript = window.chat_column, window.chat
    readable = window.readable.readable_width()
    assert abs(transcript.width() - readable) <= 1 and column.width() > readable + 200
    left = transcript.mapTo(column, transcript.rect().topLeft()).x()
    right = column.width() - left - transcript.width()
    assert abs(left - right) <= 12  # centred (the column's own margins aside)
    assert header.geometry().top() < transcript.mapTo(column, transcript.rect().topLeft()).y()
    picker = QPushButton("A model picker")
    window.chat_header_layout.addWidget(picker)
    qtbot.waitUntil(picker.isVisible)
    window.side_panel.show_tab(MEMORY.key)
    window.splitter.setSizes([2000, 10, 2000])  # a drag as far as it goes
    assert window.splitter.sizes()[1] >= CHAT_MIN_WIDTH


def test_long_chat_titles_are_elided_with_the_whole_title_in_a_tooltip(scripted, qtbot):
    chat = scripted()
    chat.start()
    chat.fill()
    settle(chat.window, 1280, 720)
    tree = chat.window.conversations.list
    longest = next(i for i in chat.window.conversations.chat_items() if i.text(0) == TITLES[0])
    assert longest.toolTip(0) == TITLES[0]
    assert tree.fontMetrics().horizontalAdvance(TITLES[0]) > tree.viewport().width()  # it is too long to show
    assert tree.header().sectionSize(0) <= tree.viewport().width()
    assert not tree.horizontalScrollBar().isVisible() and tree.textElideMode() == Qt.TextElideMode.ElideRight


def test_nothing_is_cut_at_1280_by_720_offscreen(scripted, qtbot):
    chat = scripted()
    chat.start()
    chat.fill()
    window = chat.window
    assert ANSWER.split()[0] in window.chat.toPlainText()
    for tab in (SETTINGS.key, MEMORY.key, PLAN.key):
        window.side_panel.show_tab(tab)
        # The hardware is detected on a thread when the tab first shows: its text comes in a moment later.
        if tab == MEMORY.key:
            qtbot.waitUntil(lambda: window.memory_page.hardware.profile is not None)
        settle(window, 1280, 720)
        problems = layout_problems(window)
        assert problems == [], f"{tab}: {problems}"


def test_the_geometry_check_finds_a_cut_label(qtbot):
    holder = QWidget()
    qtbot.addWidget(holder)
    label = QLabel("Room for 4,047 more tokens of context; the free memory would hold more", holder)
    label.setGeometry(0, 0, 120, 20)
    holder.show()
    assert "needs" in label_problem(label)
    label.setWordWrap(True)
    label.setGeometry(0, 0, 120, label.heightForWidth(120))
    assert label_problem(label) is None


# ------------------------------------------------------------ status bar labels and the memory bar


def test_short_forms_keep_whole_parts_then_whole_words():
    line = "decode 38.6 tok/s · TTFT 0.21 s · prefill 412 tok/s · 21 of 41 prompt tokens from cache"
    assert short_form(line, lambda s: True) == line
    assert short_form(line, lambda s: len(s) <= 40) == "decode 38.6 tok/s · TTFT 0.21 s " + ELLIPSIS
    assert short_form(line, lambda s: len(s) <= 14) == "decode 38.6" + ELLIPSIS
    assert short_form(line, lambda s: len(s) <= 3) == ELLIPSIS
    assert short_form("", lambda s: len(s) <= 3) == ""


def test_a_status_label_shows_what_fits_and_keeps_the_whole_text(qtbot):
    line = "decode 38.6 tok/s · TTFT 0.21 s · prefill 412 tok/s · 21 of 41 prompt tokens from cache"
    label = FittingLabel(line)
    qtbot.addWidget(label)
    label.show()
    margins = label.contentsMargins().left() + label.contentsMargins().right()
    label.resize(label.fontMetrics().horizontalAdvance("decode 38.6 tok/s · TTFT 0.21 s …") + margins + 8, 20)
    qtbot.waitUntil(label.is_shortened)
    assert label.shown_text() == "decode 38.6 tok/s · TTFT 0.21 s " + ELLIPSIS
    assert label.text() == line and label.toolTip() == line
    assert label.minimumSizeHint().width() < 30  # the bar can always make room
    label.resize(label.sizeHint())
    qtbot.waitUntil(lambda: not label.is_shortened())
    label.setText("Short")
    assert label.shown_text() == "Short" and label.toolTip() == "Short"


def test_a_memory_bar_wraps_a_long_device_name_and_keeps_its_legend_whole(qtbot):
    bar = MemoryBar()
    qtbot.addWidget(bar)
    gpu = DeviceMemory("cuda:0", 8 * 10**9, 2 * 10**9, 10**9, 5 * 10**8, 3 * 10**8, 10 * 10**9, 24 * 10**9,
                       name="NVIDIA GeForce RTX 4090 Laptop GPU with a very long board name")
    bar.set_device(gpu)
    bar.resize(bar.minimumWidth(), bar.height())
    bar.show()
    qtbot.waitUntil(lambda: bar.height() == bar.height_for(bar.width()))
    assert bar.title_rect(bar.width() - 2).height() > bar.ROW_HEIGHT  # the title took two lines
    assert bar.overflows() == []
    one_row = bar.height()
    bar.resize(900, bar.height())
    qtbot.waitUntil(lambda: bar.height() < one_row)  # wider: one title line, two legend columns
    assert bar.columns(bar.width()) == 2 and bar.overflows() == []
