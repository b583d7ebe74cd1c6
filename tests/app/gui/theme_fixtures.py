"""The application with its look (palette, style sheet, font) put back after a test that changes it."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

from app.gui.common.theme import theme_follower


@pytest.fixture
def app(qapp: QApplication):
    """The application, its look put back afterwards (other tests share it)."""
    palette, sheet, font = QPalette(qapp.palette()), qapp.styleSheet(), qapp.font()
    yield qapp
    follower = theme_follower(qapp)
    if follower is not None:
        follower.setParent(None)  # owned by Python now: gone with the last reference, its connection too
        del follower
    qapp.setPalette(palette)
    qapp.setStyleSheet(sheet)
    qapp.setFont(font)
