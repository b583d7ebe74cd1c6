"""Keyboard and screen-reader basics of the main window: every button says what it does (a button
showing only an icon or a glyph has an accessible name), every control the mouse can use takes the
keyboard's focus, and the application's text follows its font (the system's size, or Preferences')."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QApplication, QComboBox, QLineEdit, QPlainTextEdit, QTextEdit

from app.gui.common.theme import apply_font_size


def _unnamed_buttons(window) -> list[str]:
    """Buttons a screen reader could only call "button": no words of their own, no accessible name."""
    found = []
    for button in window.findChildren(QAbstractButton):
        words = button.text().strip(" ‹›▸▾…&")
        qt_own = button.objectName().startswith("qt_")  # the menu bar's », shown only when its menus overflow
        if not words and not button.accessibleName().strip() and not qt_own:
            parent = button.parentWidget()
            found.append(f"{type(button).__name__} {button.objectName() or button.toolTip() or '?'} in "
                         f"{type(parent).__name__} {parent.objectName() if parent else ''}")
    return found


def test_every_button_of_the_window_has_a_name(make_window):
    window = make_window(start=False)
    assert _unnamed_buttons(window) == []


def test_the_window_s_controls_take_the_keyboard_s_focus(make_window):
    window = make_window(start=False)
    controls = [w for kind in (QLineEdit, QTextEdit, QPlainTextEdit, QComboBox) for w in window.findChildren(kind)]
    assert controls
    no_focus = [f"{type(w).__name__} {w.objectName()}" for w in controls
                if w.isVisibleTo(window) and w.focusPolicy() == Qt.FocusPolicy.NoFocus]
    assert no_focus == []


def test_the_application_font_size_reaches_the_window_s_text(qtbot, make_window):
    window = make_window(start=False)
    app = QApplication.instance()
    before = app.font().pointSizeF()
    try:
        apply_font_size(app, before + 4)
        # Qt hands the new font to each widget with its queued font-change events.
        qtbot.waitUntil(lambda: abs(window.composer.font().pointSizeF() - (before + 4)) < 0.01, timeout=5000)
        assert abs(window.conversations.font().pointSizeF() - (before + 4)) < 0.01
        assert abs(window.chat.font().pointSizeF() - (before + 4)) < 0.01
    finally:
        apply_font_size(app, 0)
    assert abs(app.font().pointSizeF() - before) < 0.01
