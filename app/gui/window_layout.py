"""The window's layout: the chat list | the chat column | the side panel, in one splitter.

Each part is built here and handed back: the window keeps what it builds.
The chat column never gets narrower than CHAT_MIN_WIDTH, and on a wide window its transcript and
message box stay about READABLE_CHARS characters of the chat's font wide, centred (lines much
longer than that are hard to read). Above them, `chat_header` holds what belongs to the top of
the chat (the model picker), then the banners.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QAction, QKeySequence, QResizeEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QMenu,
    QSplitter,
    QStyle,
    QVBoxLayout,
    QWidget,
)

from app.gui.side_panel.memory.page import TITLE as MEMORY_TITLE
from app.gui.side_panel.panel import FitWidthScroll, SidePanel, Tab

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


def chat_header() -> tuple[QWidget, QHBoxLayout]:
    """The row above the banners (the model picker goes there), and its layout."""
    header = QWidget()
    header.setObjectName("chatHeader")
    layout = QHBoxLayout(header)
    layout.setContentsMargins(0, 0, 0, 0)
    return header, layout


def readable_chat(chat: QWidget, composer: QWidget, send_stop: QWidget, *, tools: QWidget | None = None,
                  attach: QWidget | None = None, knowledge: QWidget | None = None,
                  above_composer: tuple[QWidget, ...] = ()) -> ReadableColumn:
    """The transcript above the message box and its Send/Stop button, readable and centred; `tools` (the Tools
    button), `attach` (the Attach button) and `knowledge` (the Knowledge button) beside the box, `above_composer`
    (the images to send, the tool permission bar: each hidden while empty) between."""
    row = QHBoxLayout()
    for button in (tools, attach, knowledge):
        if button is not None:
            row.addWidget(button, 0, Qt.AlignmentFlag.AlignBottom)
    row.addWidget(composer, 1)
    row.addWidget(send_stop, 0, Qt.AlignmentFlag.AlignBottom)
    readable = ReadableColumn(chat)
    readable.column.addWidget(chat, 1)
    for widget in above_composer:
        readable.column.addWidget(widget)
    readable.column.addLayout(row)
    return readable


def chat_column(*tops: QWidget, readable: ReadableColumn) -> QWidget:
    """The chat column, at least CHAT_MIN_WIDTH wide: `tops` (the header, the banners), then `readable`."""
    column = QWidget()
    column.setObjectName("chatColumn")
    column.setMinimumWidth(CHAT_MIN_WIDTH)
    layout = QVBoxLayout(column)
    for top in tops:
        layout.addWidget(top)
    layout.addWidget(readable, 1)
    return column


def side_panel(settings: QWidget, memory: QWidget, plan: QWidget) -> SidePanel:
    """Chat settings, Memory & performance, Model plan: one panel, one tab each."""
    panel = SidePanel()
    panel.add_page(SETTINGS, FitWidthScroll(settings))
    panel.add_page(MEMORY, memory)
    panel.add_page(PLAN, plan)
    panel.set_shortcut_hint(PANEL_SHORTCUT)
    return panel


def main_splitter(chats: QWidget, column: QWidget, panel: SidePanel) -> QSplitter:
    """The chat list | the chat column | the side panel; the chat takes what is left over."""
    chats.setMinimumWidth(LIST_MIN_WIDTH)
    splitter = QSplitter()
    splitter.setObjectName("mainSplitter")
    splitter.addWidget(chats)
    splitter.addWidget(column)
    splitter.addWidget(panel)
    splitter.setCollapsible(1, False)
    splitter.setCollapsible(2, False)  # it has its own collapsed form: the rail
    splitter.setStretchFactor(1, 1)
    splitter.setSizes(list(DEFAULT_SIZES))
    return splitter


class ViewMenu(QMenu):
    """View: each tab of the side panel (Ctrl+Shift+M: memory; `plan_action`: the plan), and the panel itself
    (Ctrl+B); its shortcuts work anywhere in `window`.

    Args:
        panel: the side panel.
        plan_action: the window's Model plan… (Ctrl+I).
        window: the window (the shortcuts' widget, and the menu's parent).
    """

    def __init__(self, panel: SidePanel, plan_action: QAction, window: QWidget):
        super().__init__("&View", window)
        self.panel = panel
        self.settings_tab_action = QAction(SETTINGS.name, window)
        self.settings_tab_action.triggered.connect(lambda: panel.show_tab(SETTINGS.key))
        self.memory_action = _checkable(window, MEMORY_TITLE, "Ctrl+Shift+M", lambda: panel.toggle_tab(MEMORY.key))
        self.panel_action = _checkable(window, "Side panel", PANEL_SHORTCUT, panel.toggle_collapsed)
        panel.changed.connect(self.sync)
        self.sync()
        self.addActions([self.settings_tab_action, self.memory_action, plan_action])
        self.addSeparator()
        self.addAction(self.panel_action)

    def sync(self) -> None:
        """Check what the panel shows."""
        self.memory_action.setChecked(self.panel.showing(MEMORY.key))
        self.panel_action.setChecked(not self.panel.is_collapsed())


def _checkable(window: QWidget, text: str, shortcut: str, slot: object) -> QAction:
    action = QAction(text, window, shortcut=QKeySequence(shortcut), checkable=True)
    action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
    action.triggered.connect(lambda _checked: slot())
    window.addAction(action)
    return action
