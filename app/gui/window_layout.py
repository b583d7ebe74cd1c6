"""The window's layout: the chat list | the chat column | the side panel, in one splitter.

The chat column never gets narrower than CHAT_MIN_WIDTH, and on a wide window its transcript and
message box stay about READABLE_CHARS characters of the chat's font wide, centred (lines much
longer than that are hard to read). Above them, `chat_header` holds what belongs to the top of
the chat (the model picker), then the banners.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QAction, QKeySequence, QResizeEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QMenu,
    QSizePolicy,
    QSplitter,
    QStackedWidget,
    QStyle,
    QVBoxLayout,
    QWidget,
)

from app.gui.common.plan_view import PlanPage
from app.gui.side_panel.memory.page import TITLE as MEMORY_TITLE
from app.gui.side_panel.memory.page import MemoryPage
from app.gui.side_panel.panel import FitWidthScroll, SidePanel, Tab

if TYPE_CHECKING:
    from app.gui.main_window import MainWindow

CHAT_MIN_WIDTH = 480
READABLE_CHARS = 100
LIST_MIN_WIDTH = 160
DEFAULT_SIZES = (240, 760, 340)  # the chat list, the chat, the side panel: the chat takes what is left over
PANEL_SHORTCUT = "Ctrl+B"
# Average characters of running text: measured on a sentence, not on one letter (proportional fonts).
SAMPLE = "The quick brown fox jumps over the lazy dog, then reads a long reply. "

SETTINGS = Tab("settings", "Settings", "Chat settings", QStyle.StandardPixmap.SP_FileDialogDetailedView)
MEMORY = Tab("memory", "Memory", "Memory & performance", QStyle.StandardPixmap.SP_DriveHDIcon)
PLAN = Tab("plan", "Model plan", "Model plan", QStyle.StandardPixmap.SP_FileDialogInfoView)


class ReadableColumn(QWidget):
    """Its widgets, at most `chars` characters of `measure`'s font wide, centred by equal side margins."""

    def __init__(self, measure: QWidget, chars: int = READABLE_CHARS, parent: QWidget | None = None):
        super().__init__(parent)
        self._measure = measure
        self._chars = chars
        self.column = QVBoxLayout(self)
        self.column.setContentsMargins(0, 0, 0, 0)

    def readable_width(self) -> int:
        """`chars` characters of text, plus what the view around the text takes (frame, scroll bar, margins)."""
        metrics = self._measure.fontMetrics()
        text = round(metrics.horizontalAdvance(SAMPLE) * self._chars / len(SAMPLE))
        # The scroll bar is counted whether shown or not: the column must not jump when it appears.
        frame = getattr(self._measure, "frameWidth", lambda: 0)()
        chrome = 2 * frame + self._measure.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        document = getattr(self._measure, "document", None)
        margin = 2 * round(document().documentMargin()) if callable(document) else 0
        return text + chrome + margin

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self.centre()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self.centre()

    def centre(self) -> None:
        side = max(0, (self.width() - self.readable_width()) // 2)
        if self.column.contentsMargins().left() != side:
            self.column.setContentsMargins(side, 0, side, 0)


class LayoutState:
    """Keeps the splitter sensible as the side panel collapses and expands.

    Collapsing gives the panel's width to the chat; expanding takes back the width the panel last
    had (`panel_width`, remembered between starts), from the chat down to its minimum, then from
    the chat list.
    """

    def __init__(self, splitter: QSplitter, panel: SidePanel):
        self.splitter = splitter
        self.panel = panel
        self.panel_width = DEFAULT_SIZES[2]
        splitter.splitterMoved.connect(lambda _pos, _index: self._remember())
        panel.collapsed_changed.connect(self._on_collapsed)

    def _remember(self) -> None:
        if not self.panel.is_collapsed():
            self.panel_width = self.splitter.sizes()[2]

    def _on_collapsed(self, collapsed: bool) -> None:
        if not self.splitter.isVisible():
            return  # laid out when shown (from the saved state, or the defaults)
        chats, chat, panel = self.splitter.sizes()
        if collapsed:
            self.panel_width = max(panel, self.panel.minimumWidth())
            chat += panel - self.panel.width()
            panel = self.panel.width()
        else:
            want = max(self.panel_width, self.panel.minimumWidth())
            grow = want - panel
            from_chat = min(grow, max(0, chat - CHAT_MIN_WIDTH))
            from_list = min(grow - from_chat, max(0, chats - LIST_MIN_WIDTH))
            chat, chats, panel = chat - from_chat, chats - from_list, panel + from_chat + from_list
        self.splitter.setSizes([chats, chat, panel])


def build_chat_column(window: MainWindow) -> QWidget:
    """The model picker's header, the banners, then the transcript and the message box (readable, centred)."""
    window.send_stop = QStackedWidget()  # Send, or Stop while a reply streams: the same place
    window.send_stop.addWidget(window.send_button)
    window.send_stop.addWidget(window.stop_button)
    window.send_stop.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
    row = QHBoxLayout()
    row.addWidget(window.composer, 1)
    row.addWidget(window.send_stop, 0, Qt.AlignmentFlag.AlignBottom)
    window.chat_header = QWidget()
    window.chat_header.setObjectName("chatHeader")
    window.chat_header_layout = QHBoxLayout(window.chat_header)
    window.chat_header_layout.setContentsMargins(0, 0, 0, 0)
    window.readable = ReadableColumn(window.chat)
    window.readable.column.addWidget(window.chat, 1)
    window.readable.column.addLayout(row)
    column = QWidget()
    column.setObjectName("chatColumn")
    column.setMinimumWidth(CHAT_MIN_WIDTH)
    layout = QVBoxLayout(column)
    layout.addWidget(window.chat_header)
    layout.addWidget(window.history_banner)
    layout.addWidget(window.banner)
    layout.addWidget(window.readable, 1)
    return column


def build_side_panel(window: MainWindow) -> SidePanel:
    """Chat settings, Memory & performance, Model plan: one panel, one tab each."""
    panel = SidePanel()
    panel.add_page(SETTINGS, FitWidthScroll(window.settings_panel))
    window.memory_page = MemoryPage(window.controller, window.session.plan)
    panel.add_page(MEMORY, window.memory_page)
    window.plan_page = PlanPage()
    window.plan_page.show_plan(window.session.plan)
    window.controller.planned.connect(window.plan_page.show_plan)
    panel.add_page(PLAN, window.plan_page)
    panel.set_shortcut_hint(PANEL_SHORTCUT)
    return panel


def build_layout(window: MainWindow) -> None:
    window.chat_column = build_chat_column(window)
    window.side_panel = build_side_panel(window)
    window.conversations.setMinimumWidth(LIST_MIN_WIDTH)
    splitter = window.splitter = QSplitter()
    splitter.setObjectName("mainSplitter")
    splitter.addWidget(window.conversations)
    splitter.addWidget(window.chat_column)
    splitter.addWidget(window.side_panel)
    splitter.setCollapsible(1, False)
    splitter.setCollapsible(2, False)  # it has its own collapsed form: the rail
    splitter.setStretchFactor(1, 1)
    splitter.setSizes(list(DEFAULT_SIZES))
    window.layout_state = LayoutState(splitter, window.side_panel)
    window.setCentralWidget(splitter)


def build_view_menu(window: MainWindow) -> QMenu:
    """View: each tab of the side panel (Ctrl+Shift+M: memory; Ctrl+I: the plan), and the panel itself (Ctrl+B)."""
    panel = window.side_panel
    window.settings_tab_action = QAction(SETTINGS.name, window)
    window.settings_tab_action.triggered.connect(lambda: panel.show_tab(SETTINGS.key))
    window.memory_action = _checkable(window, MEMORY_TITLE, "Ctrl+Shift+M", lambda: panel.toggle_tab(MEMORY.key))
    window.panel_action = _checkable(window, "Side panel", PANEL_SHORTCUT, panel.toggle_collapsed)

    def sync() -> None:
        window.memory_action.setChecked(panel.showing(MEMORY.key))
        window.panel_action.setChecked(not panel.is_collapsed())

    panel.changed.connect(sync)
    sync()
    view = QMenu("&View", window)
    view.addActions([window.settings_tab_action, window.memory_action, window.plan_action])
    view.addSeparator()
    view.addAction(window.panel_action)
    help_menu = next((a for a in window.menuBar().actions() if a.text() == "&Help"), None)
    if help_menu is not None:
        window.menuBar().insertMenu(help_menu, view)
    else:
        window.menuBar().addMenu(view)
    return view


def _checkable(window: MainWindow, text: str, shortcut: str, slot: object) -> QAction:
    action = QAction(text, window, shortcut=QKeySequence(shortcut), checkable=True)
    action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
    action.triggered.connect(lambda _checked: slot())
    window.addAction(action)
    return action
