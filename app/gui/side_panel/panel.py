"""SidePanel: the window's one right-hand panel, with tabs, that collapses to a narrow icon rail.

Expanded, it is a tab widget (Chat settings, Memory & performance, Model plan) with a collapse
button in its corner. Collapsed, only a column of icon buttons is left (one per tab, each with an
accessible name and a tooltip): a click opens the panel again at that tab. `FitWidthScroll` holds
a page that must never scroll sideways: its width follows the panel and its height is what its
word-wrapped texts need at that width.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import (
    QFrame,
    QScrollArea,
    QSizePolicy,
    QStyle,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

EXPANDED_MIN_WIDTH = 300  # the panel's narrowest: a memory bar's legend and the settings' fields still fit
QWIDGETSIZE_MAX = (1 << 24) - 1


class FitWidthScroll(QScrollArea):
    """A vertical-only scroll area: the page is as wide as the viewport, as tall as it asks at that width.

    QScrollArea sizes a resizable page by its minimum size hint, which for word-wrapped labels is a
    guess made at some other width; the page would then be squeezed and its labels cut. Here the
    page's minimum height is set to its layout's height-for-width at the viewport's width, each time
    either changes.
    """

    def __init__(self, page: QWidget, parent: QWidget | None = None):
        super().__init__(parent)
        self.page = page
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setWidget(page)
        page.installEventFilter(self)
        self.viewport().installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() in (QEvent.Type.LayoutRequest, QEvent.Type.Resize):
            self.fit_height()
        return super().eventFilter(watched, event)

    def fit_height(self) -> None:
        layout = self.page.layout()
        if layout is None:
            return
        width = self.viewport().width()
        height = layout.heightForWidth(width) if layout.hasHeightForWidth() else layout.minimumSize().height()
        height = max(height, layout.minimumSize().height())
        if height != self.page.minimumHeight():
            self.page.setMinimumHeight(height)

    def minimumSizeHint(self):  # noqa: N802 (Qt override)
        # As narrow as the page can be, plus the vertical scroll bar it may need.
        hint = super().minimumSizeHint()
        bar = self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        hint.setWidth(self.page.minimumSizeHint().width() + bar + 2 * self.frameWidth())
        return hint


@dataclass(slots=True, frozen=True)
class Tab:
    key: str
    title: str  # on the tab
    name: str  # the whole name: tooltips, accessible names, the View menu
    icon: QStyle.StandardPixmap


class SidePanel(QWidget):
    """Tabs on the right of the chat; collapsed, a rail of icon buttons.

    Signals:
        changed(): the tab shown, or collapsed / expanded (the window remembers both).
        collapsed_changed(bool): the panel was collapsed (True) or expanded again.
    """

    changed = Signal()
    collapsed_changed = Signal(bool)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("sidePanel")
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.setUsesScrollButtons(False)  # tab titles are short; scroll arrows would hide one
        self.collapse_button = self._tool_button(QStyle.StandardPixmap.SP_ArrowRight, "Collapse the side panel")
        self.collapse_button.clicked.connect(lambda: self.set_collapsed(True))
        self.tabs.setCornerWidget(self.collapse_button, Qt.Corner.TopRightCorner)
        self.rail = QWidget()
        self.rail.setObjectName("sidePanelRail")
        self._rail_layout = QVBoxLayout(self.rail)
        self._rail_layout.setContentsMargins(2, 4, 2, 4)
        self.expand_button = self._tool_button(QStyle.StandardPixmap.SP_ArrowLeft, "Expand the side panel")
        self.expand_button.clicked.connect(lambda: self.set_collapsed(False))
        self._rail_layout.addWidget(self.expand_button)
        self._rail_layout.addStretch(1)
        self.rail.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tabs)
        layout.addWidget(self.rail)
        self.rail_buttons: dict[str, QToolButton] = {}
        self._keys: list[str] = []
        self._collapsed = False
        self.tabs.currentChanged.connect(lambda _i: self.changed.emit())
        self._apply_width()

    def _tool_button(self, icon: QStyle.StandardPixmap, name: str) -> QToolButton:
        button = QToolButton()
        button.setIcon(self.style().standardIcon(icon))
        button.setAutoRaise(True)
        button.setAccessibleName(name)
        button.setToolTip(name)
        button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # reachable by Tab, with a focus ring
        return button

    # ------------------------------------------------------------ pages

    def add_page(self, tab: Tab, page: QWidget) -> None:
        """Add a tab, and its button on the rail."""
        index = self.tabs.addTab(page, tab.title)
        self.tabs.setTabToolTip(index, tab.name)
        self._keys.append(tab.key)
        button = self._tool_button(tab.icon, tab.name)
        button.clicked.connect(lambda: self.show_tab(tab.key))
        self._rail_layout.insertWidget(self._rail_layout.count() - 1, button)
        self.rail_buttons[tab.key] = button
        self._apply_width()

    def page(self, key: str) -> QWidget:
        return self.tabs.widget(self._keys.index(key))

    def icon(self, key: str) -> QIcon:
        return self.rail_buttons[key].icon()

    def set_shortcut_hint(self, keys: str) -> None:
        """Name the collapse/expand shortcut in the two buttons' tooltips."""
        for button in (self.collapse_button, self.expand_button):
            button.setToolTip(f"{button.accessibleName()} ({keys})")

    # ------------------------------------------------------------ state

    def current_key(self) -> str:
        index = self.tabs.currentIndex()
        return self._keys[index] if index >= 0 else ""

    def showing(self, key: str) -> bool:
        """Whether the tab `key` is what the panel shows now (expanded, and that tab open)."""
        return not self._collapsed and self.current_key() == key

    def show_tab(self, key: str) -> QWidget:
        """Expand the panel (if collapsed) at the tab `key`; its page."""
        if key in self._keys:
            self.tabs.setCurrentIndex(self._keys.index(key))
        self.set_collapsed(False)
        return self.page(key)

    def toggle_tab(self, key: str) -> None:
        """Show the tab `key`, or collapse the panel if that tab is what it shows already."""
        if self.showing(key):
            self.set_collapsed(True)
        else:
            self.show_tab(key)

    def is_collapsed(self) -> bool:
        return self._collapsed

    def set_collapsed(self, collapsed: bool) -> None:
        if collapsed == self._collapsed:
            return
        # Focus inside the page would be left on a hidden widget: move it to the button that brings it back.
        had_focus = self.tabs.isAncestorOf(self.focusWidget()) if self.focusWidget() else False
        self._collapsed = collapsed
        self.tabs.setVisible(not collapsed)
        self.rail.setVisible(collapsed)
        self._apply_width()
        if had_focus and collapsed:
            self.rail_buttons.get(self.current_key(), self.expand_button).setFocus()
        self.collapsed_changed.emit(collapsed)
        self.changed.emit()

    def toggle_collapsed(self) -> None:
        self.set_collapsed(not self._collapsed)

    def _apply_width(self) -> None:
        """Collapsed: exactly the rail's width. Expanded: at least what its pages need, and what the splitter gives."""
        if self._collapsed:
            self.setFixedWidth(self.rail.sizeHint().width())
            return
        pages = [self.tabs.widget(i).minimumSizeHint().width() for i in range(self.tabs.count())]
        tab_bar = self.tabs.tabBar().sizeHint().width() + self.collapse_button.sizeHint().width()
        self.setMinimumWidth(max([EXPANDED_MIN_WIDTH, tab_bar, *pages]))
        self.setMaximumWidth(QWIDGETSIZE_MAX)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
