"""The theme: light and dark palettes following the system's scheme (or the user's choice), the style
sheet with its focus ring, the font size, and the status colours widgets take from the theme."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QPalette
from PySide6.QtTest import QTest
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QFrame,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.gui.banners.problem_banner import Banner
from app.gui.common.theme import (
    STYLE_SHEET,
    apply_font_size,
    apply_scheme,
    chart_colors,
    contrast,
    install_theme,
    is_dark,
    palette_for,
    resolve_scheme,
    set_tone,
    status_colors,
    style_sheet,
    system_font,
    tone_frame_style,
)
from app.gui.side_panel.memory.sparkline import Sparkline
from tests.app.gui import theme_fixtures

Role = QPalette.ColorRole
DARK, LIGHT, UNKNOWN = Qt.ColorScheme.Dark, Qt.ColorScheme.Light, Qt.ColorScheme.Unknown


app = theme_fixtures.app


def window_colour(app: QApplication) -> str:
    return app.palette().color(Role.Window).name()


def test_each_scheme_has_its_own_palette(app):
    apply_scheme(app, DARK)
    assert is_dark(app.palette())
    assert window_colour(app) == palette_for(DARK).color(Role.Window).name()
    apply_scheme(app, LIGHT)
    assert not is_dark(app.palette())
    assert window_colour(app) == palette_for(LIGHT).color(Role.Window).name()
    # Text reads on both: dark on light, light on dark.
    for scheme in (LIGHT, DARK):
        p = palette_for(scheme)
        assert contrast(p.color(Role.Text), p.color(Role.Base)) > 10
        assert contrast(p.color(Role.PlaceholderText), p.color(Role.Base)) >= 4.5


def test_the_palette_follows_the_system_as_it_changes(app):
    follower = install_theme(app, "system")
    hints = app.styleHints()
    hints.colorSchemeChanged.emit(DARK)  # what the desktop sends when it turns dark
    assert is_dark(app.palette()) and follower.scheme == DARK
    hints.colorSchemeChanged.emit(LIGHT)
    assert not is_dark(app.palette()) and follower.scheme == LIGHT


def test_the_choice_in_preferences_wins_over_the_system(app):
    follower = install_theme(app, "dark")
    assert is_dark(app.palette())
    app.styleHints().colorSchemeChanged.emit(LIGHT)
    assert is_dark(app.palette()), "a forced dark theme stays dark when the system turns light"
    follower.set_theme("light")
    app.styleHints().colorSchemeChanged.emit(DARK)
    assert not is_dark(app.palette())
    follower.set_theme("system")  # following the system again, from its next change
    app.styleHints().colorSchemeChanged.emit(DARK)
    assert is_dark(app.palette())
    assert install_theme(app, "light") is follower, "one follower per application"


def test_a_system_that_does_not_say_keeps_its_own_lightness():
    assert resolve_scheme("system", UNKNOWN) == LIGHT
    assert resolve_scheme("system", UNKNOWN, unknown_is_dark=True) == DARK
    assert resolve_scheme("system", DARK) == DARK
    assert resolve_scheme("light", DARK) == LIGHT and resolve_scheme("dark", LIGHT) == DARK


def test_the_style_sheet_loads_with_a_focus_ring_in_the_theme_colour(app):
    sheet = style_sheet()
    assert ":focus" in sheet and "palette(highlight)" in sheet
    rules = re.sub(r"/\*.*?\*/", "", sheet, flags=re.S)
    assert not re.search(r"#[0-9a-fA-F]{3,8}\b|rgba?\(", rules), "colours come from the palette"
    apply_scheme(app, LIGHT)
    assert app.styleSheet() == sheet
    app.setStyleSheet("")
    assert app.style().name().lower() == "fusion", "the sheet is on Fusion, whose drawing follows the palette"


def _left_edge(widget: QWidget) -> str:
    image = widget.grab().toImage()
    return image.pixelColor(0, image.height() // 2).name()


@pytest.mark.parametrize("scheme", [LIGHT, DARK])
def test_a_focused_text_area_shows_the_ring_and_an_unfocused_one_does_not(qtbot, app, scheme):
    apply_scheme(app, scheme)
    page = QWidget()
    qtbot.addWidget(page)
    column = QVBoxLayout(page)
    text, line = QPlainTextEdit(), QLineEdit()
    column.addWidget(text)
    column.addWidget(line)
    page.show()
    page.activateWindow()
    qtbot.waitUntil(page.isActiveWindow)
    highlight = app.palette().color(Role.Highlight).name()
    line.setFocus()
    qtbot.waitUntil(line.hasFocus)
    assert _left_edge(text) != highlight
    width = text.contentsRect().width()
    text.setFocus()
    qtbot.waitUntil(text.hasFocus)
    assert _left_edge(text) == highlight
    assert text.contentsRect().width() == width, "the ring does not move the text"


@pytest.mark.parametrize("scheme", [LIGHT, DARK])
def test_every_control_reached_with_tab_shows_that_it_has_focus(qtbot, app, scheme):
    install_theme(app, "dark" if scheme == DARK else "light")
    page = QWidget()
    qtbot.addWidget(page)
    column = QVBoxLayout(page)
    start = QLineEdit()
    tool = QToolButton(text="Tool", autoRaise=True, focusPolicy=Qt.FocusPolicy.StrongFocus)
    controls = [QPushButton("Push"), tool, QCheckBox("Check"), QComboBox(), QListWidget(), QTextBrowser()]
    for widget in (start, *controls):
        column.addWidget(widget)
    page.show()
    page.activateWindow()
    qtbot.waitUntil(page.isActiveWindow)
    start.setFocus()
    for control in controls:
        before = control.grab().toImage()
        QTest.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        assert control.hasFocus()
        assert control.grab().toImage() != before, f"{type(control).__name__} looks the same with focus"


def test_a_missing_style_sheet_leaves_the_palette_alone(tmp_path: Path):
    assert style_sheet(tmp_path) == ""
    (tmp_path / STYLE_SHEET).write_text("QTextEdit:focus { border: 1px solid palette(highlight); }")
    assert "QTextEdit:focus" in style_sheet(tmp_path)


def test_the_font_size_is_the_application_font(qtbot, app):
    apply_font_size(app, 15)
    assert app.font().pointSizeF() == 15
    label = QLabel("text")
    qtbot.addWidget(label)
    assert label.font().pointSizeF() == 15, "widgets take the application font"
    apply_font_size(app, 0)
    assert app.font().pointSizeF() == system_font().pointSizeF(), "0 is the desktop's own size"


@pytest.mark.parametrize("scheme", [LIGHT, DARK])
def test_status_colours_read_on_the_theme(scheme):
    palette = palette_for(scheme)
    colours = status_colors(palette)
    for colour in (colours.ok, colours.warn, colours.error):
        for background in (palette.color(Role.Window), palette.color(Role.Base)):
            assert contrast(colour, background) >= 4.5
    assert colours.error.hue() == 0 and 100 <= colours.ok.hue() <= 150 and 20 <= colours.warn.hue() <= 50


def test_light_and_dark_status_colours_differ():
    light, dark = status_colors(palette_for(LIGHT)), status_colors(palette_for(DARK))
    assert dark.error.lightness() > light.error.lightness()
    assert dark.ok.lightness() > light.ok.lightness()


def test_a_toned_label_follows_a_theme_switch(qtbot, app):
    apply_scheme(app, LIGHT)
    label = QLabel("failed: no space left")
    qtbot.addWidget(label)
    label.show()
    set_tone(label, "error")
    assert label.palette().color(Role.WindowText) == status_colors(palette_for(LIGHT)).error
    apply_scheme(app, DARK)
    assert label.palette().color(Role.WindowText) == status_colors(palette_for(DARK)).error
    set_tone(label, None)
    assert label.palette().color(Role.WindowText) == app.palette().color(Role.WindowText)
    assert label.property("tone") == ""


def test_a_hidden_toned_label_is_right_when_shown(qtbot, app):
    apply_scheme(app, LIGHT)
    label = QLabel("x")
    qtbot.addWidget(label)
    set_tone(label, "warn")
    apply_scheme(app, DARK)  # while it was never shown
    label.show()
    assert label.palette().color(Role.WindowText) == status_colors(palette_for(DARK)).warn


def test_the_error_banner_is_tinted_from_the_theme(qtbot, app):
    apply_scheme(app, LIGHT)
    banner = Banner()
    qtbot.addWidget(banner)
    light_sheet = banner.styleSheet()
    assert light_sheet.startswith("#banner {") and banner.property("tone") == "error"
    apply_scheme(app, DARK)
    assert banner.styleSheet() != light_sheet, "the strip is recoloured for the dark theme"
    frame = QFrame()
    frame.setObjectName("strip")
    qtbot.addWidget(frame)
    set_tone(frame, "ok", frame=True)
    assert frame.styleSheet() == tone_frame_style("#strip", "ok", QGuiApplication.palette())
    set_tone(frame, None, frame=True)
    assert frame.styleSheet() == ""


def test_the_sparkline_draws_in_the_theme_highlight(qtbot, app):
    spark = Sparkline()
    qtbot.addWidget(spark)
    spark.show()
    apply_scheme(app, DARK)
    assert spark.line_color() == palette_for(DARK).color(Role.Highlight)
    apply_scheme(app, LIGHT)
    assert spark.line_color() == palette_for(LIGHT).color(Role.Highlight)


@pytest.mark.parametrize("scheme", [LIGHT, DARK])
def test_chart_colours_are_told_apart_and_stand_out_from_the_base(scheme):
    palette = palette_for(scheme)
    colours = chart_colors(palette)
    assert len({c.name() for c in colours}) == len(colours) == 10
    assert all(contrast(c, palette.color(Role.Base)) > 1.5 for c in colours)
