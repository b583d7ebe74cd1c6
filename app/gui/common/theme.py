"""The window's look: a light and a dark palette on the Fusion style, following the system's colour
scheme (or the user's choice in Preferences), the style sheet assets/style.qss, the font size, and
the few colours a palette has no role for (`status_colors`).

Widgets take every colour from the palette (or `status_colors` of it), never a literal: a theme
change (the system going dark at dusk, the user's choice) then recolours them all. This module is
the one place colour values are written down.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QColor, QFont, QFontDatabase, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory, QWidget

from app.gui.common.app_icon import assets_dir

Theme = Literal["system", "light", "dark"]
THEMES: tuple[Theme, ...] = ("system", "light", "dark")
Tone = Literal["ok", "warn", "error"]
STYLE_SHEET = "style.qss"
_ON_FUSION = "tailorOnFusion"
_FONT_SET = "tailorFontSet"
Role, Group = QPalette.ColorRole, QPalette.ColorGroup
_log = logging.getLogger(__name__)

# Both palettes on Fusion, whose drawing takes every colour from the palette; the platform's own
# styles (Windows 11, macOS) ignore parts of a palette and would mix a dark palette with light controls.
_LIGHT = {
    Role.Window: "#efefef", Role.WindowText: "#1b1b1b", Role.Base: "#ffffff", Role.AlternateBase: "#f5f5f5",
    Role.ToolTipBase: "#ffffdc", Role.ToolTipText: "#1b1b1b", Role.Text: "#1b1b1b", Role.Button: "#efefef",
    Role.ButtonText: "#1b1b1b", Role.BrightText: "#ffffff", Role.Light: "#ffffff", Role.Midlight: "#e3e3e3",
    Role.Mid: "#b8b8b8", Role.Dark: "#9f9f9f", Role.Shadow: "#767676", Role.Highlight: "#2f7cc4",
    Role.HighlightedText: "#ffffff", Role.Link: "#1a5fb4", Role.LinkVisited: "#7a3ea8",
    Role.PlaceholderText: "#6e6e6e", Role.Accent: "#2f7cc4",
}
_DARK = {
    Role.Window: "#2b2b2b", Role.WindowText: "#e6e6e6", Role.Base: "#1f1f1f", Role.AlternateBase: "#272727",
    Role.ToolTipBase: "#3a3a3a", Role.ToolTipText: "#e6e6e6", Role.Text: "#e6e6e6", Role.Button: "#353535",
    Role.ButtonText: "#e6e6e6", Role.BrightText: "#ffffff", Role.Light: "#505050", Role.Midlight: "#424242",
    Role.Mid: "#5a5a5a", Role.Dark: "#1a1a1a", Role.Shadow: "#0d0d0d", Role.Highlight: "#3d8ee0",
    Role.HighlightedText: "#ffffff", Role.Link: "#78b6ff", Role.LinkVisited: "#c49cff",
    Role.PlaceholderText: "#9a9a9a", Role.Accent: "#3d8ee0",
}
# Disabled controls: text dimmed towards the background, selections without colour.
_LIGHT_DISABLED = {Role.WindowText: "#9a9a9a", Role.Text: "#9a9a9a", Role.ButtonText: "#9a9a9a",
                   Role.Highlight: "#b0b0b0", Role.HighlightedText: "#f0f0f0", Role.Base: "#f3f3f3"}
_DARK_DISABLED = {Role.WindowText: "#7a7a7a", Role.Text: "#7a7a7a", Role.ButtonText: "#7a7a7a",
                  Role.Highlight: "#4a4a4a", Role.HighlightedText: "#9a9a9a", Role.Base: "#262626"}
# The hues of the status colours; their lightness is worked out per palette (`status_colors`).
_HUES = {"ok": (130, 0.65), "warn": (35, 0.9), "error": (0, 0.75)}
READABLE = 4.5  # WCAG AA contrast for body text
_CHART = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
          "#bab0ac")


def palette_for(scheme: Qt.ColorScheme) -> QPalette:
    """Tailor's dark palette for `Qt.ColorScheme.Dark`, its light one otherwise."""
    dark = scheme == Qt.ColorScheme.Dark
    palette = QPalette()
    for role, color in (_DARK if dark else _LIGHT).items():
        palette.setColor(role, QColor(color))
    for role, color in (_DARK_DISABLED if dark else _LIGHT_DISABLED).items():
        palette.setColor(Group.Disabled, role, QColor(color))
    return palette


def is_dark(palette: QPalette) -> bool:
    """Whether `palette` is a dark one (light text on a dark window)."""
    return palette.color(Role.Window).lightnessF() < palette.color(Role.WindowText).lightnessF()


def resolve_scheme(theme: Theme, system: Qt.ColorScheme, unknown_is_dark: bool = False) -> Qt.ColorScheme:
    """The scheme to show: the user's choice, else the system's; `unknown_is_dark` decides when the
    system does not say (older desktops: its palette at start was dark)."""
    if theme == "light":
        return Qt.ColorScheme.Light
    if theme == "dark":
        return Qt.ColorScheme.Dark
    if system == Qt.ColorScheme.Unknown:
        return Qt.ColorScheme.Dark if unknown_is_dark else Qt.ColorScheme.Light
    return system


def style_sheet(folder: Path | None = None) -> str:
    """assets/style.qss (what a palette cannot say: the focus ring, spacing), or "" if it is missing."""
    path = (folder or assets_dir()) / STYLE_SHEET
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:  # a trimmed install: the palette alone still gives a usable window
        _log.warning("No style sheet: %s", exc)
        return ""


def apply_scheme(app: QApplication, scheme: Qt.ColorScheme) -> None:
    """Fusion with the palette of `scheme`, and the style sheet (set again, so its palette(…) colours
    are those of the new palette)."""
    # Once: setting a style repolishes every widget. (With a style sheet set, app.style() is the
    # sheet's own style and no longer says "fusion", so the application remembers it instead.)
    if app.property(_ON_FUSION) is not True:
        app.setStyle(QStyleFactory.create("Fusion"))
        app.setProperty(_ON_FUSION, True)
    app.setPalette(palette_for(scheme))
    app.setStyleSheet(style_sheet())


def system_font() -> QFont:
    """The desktop's own font, whatever size the application font was given since."""
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.GeneralFont)


def apply_font_size(app: QApplication, points: float) -> QFont:
    """The application font at `points`; 0 is the system's own size.

    At 0 a font never set is left alone: Qt then changes it with the desktop's text size, live, which
    an application font set once would stop (until the next start). Widgets take this font, never a
    pixel size of their own, so all text follows it.
    """
    if points <= 0 and app.property(_FONT_SET) is not True:
        return app.font()
    font = system_font()
    if points > 0:
        font.setPointSizeF(points)
    app.setFont(font)
    app.setProperty(_FONT_SET, True)
    return font


class ThemeFollower(QObject):
    """Keeps the application's palette on the chosen theme, following the system's scheme live.

    Args:
        app: the application.
        theme: "system" (follow the desktop), "light" or "dark".
    """

    def __init__(self, app: QApplication, theme: Theme = "system"):
        super().__init__(app)
        self.setObjectName("themeFollower")
        self.app, self.theme = app, theme
        # Older desktops say no scheme: their palette at start tells dark from light.
        self._unknown_is_dark = is_dark(QGuiApplication.palette())
        self.scheme = Qt.ColorScheme.Unknown
        app.styleHints().colorSchemeChanged.connect(self.on_system_scheme)
        self.set_theme(theme)

    def set_theme(self, theme: Theme) -> None:
        """Show `theme` now; "system" follows the desktop again."""
        self.theme = theme if theme in THEMES else "system"
        hints = self.app.styleHints()
        # Qt 6.8+: tell the platform too, so native parts (the title bar) match a forced scheme.
        if self.theme == "system":
            hints.unsetColorScheme()
        else:
            hints.setColorScheme(resolve_scheme(self.theme, Qt.ColorScheme.Unknown))
        self._show(resolve_scheme(self.theme, hints.colorScheme(), self._unknown_is_dark))

    def on_system_scheme(self, scheme: Qt.ColorScheme) -> None:
        """The desktop changed its scheme (or answered ours): follow it unless the user chose one."""
        if self.theme == "system":
            self._show(resolve_scheme("system", scheme, self._unknown_is_dark))

    def _show(self, scheme: Qt.ColorScheme) -> None:
        self.scheme = scheme
        apply_scheme(self.app, scheme)


def theme_follower(app: QApplication) -> ThemeFollower | None:
    return app.findChild(ThemeFollower, "themeFollower")


def install_theme(app: QApplication, theme: Theme = "system", font_points: float = 0) -> ThemeFollower:
    """The theme and font size of the preferences, kept up as the system changes; one per application."""
    apply_font_size(app, font_points)
    follower = theme_follower(app)
    if follower is None:
        return ThemeFollower(app, theme)
    follower.set_theme(theme)
    return follower


# ------------------------------------------------------------ colours beyond the palette


@dataclass(slots=True, frozen=True)
class StatusColors:
    """Text colours for good, doubtful and bad news, readable on the palette's Window and Base."""

    ok: QColor
    warn: QColor
    error: QColor

    def of(self, tone: Tone) -> QColor:
        return getattr(self, tone)


def contrast(a: QColor, b: QColor) -> float:
    """WCAG contrast ratio of two colours (1 … 21)."""
    def luminance(c: QColor) -> float:
        channels = [x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4
                    for x in (c.redF(), c.greenF(), c.blueF())]
        return 0.2126 * channels[0] + 0.7152 * channels[1] + 0.0722 * channels[2]
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def _readable(hue: int, saturation: float, palette: QPalette) -> QColor:
    # From a vivid middle lightness towards the text colour, until it reads on both backgrounds.
    backgrounds = (palette.color(Role.Window), palette.color(Role.Base))
    direction = 1 if is_dark(palette) else -1
    for step in range(51):
        color = QColor.fromHslF(hue / 360, saturation, 0.5 + direction * step / 100)
        if all(contrast(color, b) >= READABLE for b in backgrounds):
            return color
    return palette.color(Role.WindowText)


def status_colors(palette: QPalette) -> StatusColors:
    """Green, amber and red text for `palette` (darker on a light one, lighter on a dark one)."""
    return StatusColors(*(_readable(*_HUES[tone], palette) for tone in ("ok", "warn", "error")))


def chart_colors(palette: QPalette) -> tuple[QColor, ...]:
    """Ten colours told apart at a glance (Tableau 10), for the parts of a chart (the memory bar): mid
    tones that stand out from a light Base and a dark one; a touch lighter on a dark palette."""
    colors = tuple(QColor(c) for c in _CHART)
    if is_dark(palette):
        text = palette.color(Role.WindowText)
        colors = tuple(mix(c, text, 0.1) for c in colors)
    return colors


def mix(a: QColor, b: QColor, t: float) -> QColor:
    """`a` moved a fraction `t` of the way to `b`."""
    return QColor.fromRgbF(*(x + (y - x) * t for x, y in zip(a.getRgbF()[:3], b.getRgbF()[:3], strict=True)))


def tone_frame_style(selector: str, tone: Tone, palette: QPalette) -> str:
    """A strip tinted with `tone` (a light wash of it over Window, a border of it), for `selector`."""
    color, window = status_colors(palette).of(tone), palette.color(Role.Window)
    return (f"{selector} {{ background: {mix(window, color, 0.16).name()}; "
            f"border: 1px solid {mix(window, color, 0.55).name()}; border-radius: 4px; }}")


class _ToneKeeper(QObject):
    """Applies a widget's tone again when the palette changes (a theme switch), and when it is shown
    (a hidden widget is not told of a palette change)."""

    def __init__(self, widget: QWidget):
        super().__init__(widget)
        self.setObjectName("toneKeeper")
        self.tone: Tone | None = None
        self.frame = False
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange, QEvent.Type.Show):
            self.apply(watched)  # type: ignore[arg-type]
        return False

    def apply(self, widget: QWidget) -> None:
        # Each branch sets only what changed: setting it sends PaletteChange, which lands here again.
        app_palette = QGuiApplication.palette()
        if self.frame:
            sheet = tone_frame_style(f"#{widget.objectName()}", self.tone, app_palette) if self.tone else ""
            if widget.styleSheet() != sheet:
                widget.setStyleSheet(sheet)
            return
        wanted = status_colors(app_palette).of(self.tone) if self.tone else app_palette.color(Role.WindowText)
        if widget.palette().color(Role.WindowText) != wanted:
            palette = widget.palette()
            palette.setColor(Role.WindowText, wanted)
            palette.setColor(Role.Text, wanted)
            widget.setPalette(palette)


def set_tone(widget: QWidget, tone: Tone | None, *, frame: bool = False) -> None:
    """Colour `widget` by `tone` from the theme, and keep it so across theme changes; None: plain again.

    frame=False colours the text (a label); frame=True tints the background and border of a strip
    (the widget needs an object name, which the style sheet selects).
    """
    keeper = widget.findChild(_ToneKeeper, "toneKeeper", Qt.FindChildOption.FindDirectChildrenOnly)
    if keeper is None:
        if tone is None:
            return  # never toned: plain already
        keeper = _ToneKeeper(widget)
    keeper.tone, keeper.frame = tone, frame
    widget.setProperty("tone", tone or "")
    keeper.apply(widget)
