"""The window's size on its first start, and what it remembers between starts.

First start: about 80 % of the screen's available area (at least 1024 × 640, never more than the
screen), centred. Afterwards: the geometry it was closed with, the splitter between the chat list,
the chat and the side panel, the side panel's open tab and whether it was collapsed (QSettings:
`app_settings()`, an ini file under $TAILOR_HOME in tests).
"""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QRect, QSettings
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

from app.gui.window_layout import LayoutState

SHARE = 0.8
MIN_WIDTH, MIN_HEIGHT = 1024, 640
GEOMETRY_KEY = "window/geometry"
SPLITTER_KEY = "window/splitter"
TAB_KEY = "side_panel/tab"
COLLAPSED_KEY = "side_panel/collapsed"
PANEL_WIDTH_KEY = "side_panel/width"


def first_geometry(available: QRect) -> QRect:
    """80 % of `available`, at least 1024 × 640 but never larger than it, centred in it."""
    width = min(available.width(), max(MIN_WIDTH, round(available.width() * SHARE)))
    height = min(available.height(), max(MIN_HEIGHT, round(available.height() * SHARE)))
    rect = QRect(0, 0, width, height)
    rect.moveCenter(available.center())
    return rect


def restore_window(window: QWidget, layout: LayoutState, settings: QSettings) -> None:
    """Put the window and its splitter (`layout`) back as they were closed; on a first start, size the
    window to the screen."""
    panel = layout.panel
    tab = settings.value(TAB_KEY, "", type=str)
    if tab in panel.rail_buttons:
        panel.tabs.setCurrentIndex(list(panel.rail_buttons).index(tab))
    width = settings.value(PANEL_WIDTH_KEY, 0, type=int)
    if width > 0:
        layout.panel_width = width
    panel.set_collapsed(settings.value(COLLAPSED_KEY, False, type=bool))
    geometry = settings.value(GEOMETRY_KEY, QByteArray(), type=QByteArray)
    if geometry.isEmpty() or not window.restoreGeometry(geometry):
        screen = window.screen() or QGuiApplication.primaryScreen()
        window.setGeometry(first_geometry(screen.availableGeometry()))
    state = settings.value(SPLITTER_KEY, QByteArray(), type=QByteArray)
    if not state.isEmpty():
        layout.splitter.restoreState(state)


def save_window(window: QWidget, layout: LayoutState, settings: QSettings) -> None:
    settings.setValue(GEOMETRY_KEY, window.saveGeometry())
    settings.setValue(SPLITTER_KEY, layout.splitter.saveState())
    settings.setValue(TAB_KEY, layout.panel.current_key())
    settings.setValue(COLLAPSED_KEY, layout.panel.is_collapsed())
    settings.setValue(PANEL_WIDTH_KEY, layout.panel_width)
    settings.sync()
