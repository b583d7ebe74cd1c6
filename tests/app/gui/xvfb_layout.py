"""Lay the window out at given sizes, check from widget geometry that nothing is cut, take screenshots.

Run by tests/app/gui/test_window_layout_xvfb.py in a process of its own, on a real X server (Xvfb, the xcb
platform): `python -m tests.app.gui.xvfb_layout --out DIR --report FILE [--sizes 1280x720,...] [--theme T]`.
It writes one PNG per size and side panel state (window-1280x720.png, window-1280x720-memory.png) and a
JSON report: per shot the figures (window, chat list, chat column, readable width, side panel) and the
problems found. `layout_problems` is also what the offscreen tests call.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QGuiApplication, QTextDocument
from PySide6.QtGui import Qt as GuiQt
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractScrollArea,
    QApplication,
    QLabel,
    QScrollArea,
    QTabBar,
    QWidget,
)

from app.gui.common.status_labels import ELLIPSIS, FittingLabel
from app.gui.common.theme import install_theme
from app.gui.main_window import MainWindow
from app.gui.window_layout import CHAT_MIN_WIDTH, MEMORY, PLAN, SETTINGS
from tests.app.gui.xvfb_window import ScriptedWindow, wait_until

SIZES = ((1280, 720), (1600, 1000), (1920, 1080))
THEMES = ("light", "dark")  # app/gui/common/theme.py's palettes, forced whatever the X server's scheme says
SLACK = 1  # pixels of rounding allowed


def describe(widget: QWidget) -> str:
    """'QLabel "Room for 4,047…" in MemoryPanel < memoryPage': enough to find the widget."""
    chain, parent = [], widget.parentWidget()
    while parent is not None and len(chain) < 3:
        chain.append(parent.objectName() or type(parent).__name__)
        parent = parent.parentWidget()
    text = QLabel.text(widget) if isinstance(widget, QLabel) else getattr(widget, "text", lambda: "")()
    name = widget.objectName() or type(widget).__name__
    return f'{name} "{text[:50]}" in {" < ".join(chain)}'


def label_needs(label: QLabel, width: int) -> tuple[int, int]:
    """The width and height the label's painted text needs, laid out as QLabel lays it out."""
    text = QLabel.text(label)  # what is painted (a FittingLabel's text() is its full text)
    rich = label.textFormat() == Qt.TextFormat.RichText or (
        label.textFormat() == Qt.TextFormat.AutoText and GuiQt.mightBeRichText(text))
    if rich:
        doc = QTextDocument()
        doc.setDefaultFont(label.font())
        doc.setDocumentMargin(0)
        doc.setHtml(text)
        if label.wordWrap():
            doc.setTextWidth(width)
        return round(doc.idealWidth()), round(doc.size().height())
    flags = int(label.alignment()) | (int(Qt.TextFlag.TextWordWrap) if label.wordWrap() else 0)
    rect = label.fontMetrics().boundingRect(QRect(0, 0, width if label.wordWrap() else 100_000, 100_000), flags, text)
    return rect.width(), rect.height()


def label_problem(label: QLabel) -> str | None:
    if not QLabel.text(label).strip():
        return None
    # Cut by what holds it: part of its width outside the view (rows scrolled out of sight are fine).
    seen = label.visibleRegion().boundingRect()
    if not seen.isEmpty() and seen.width() + SLACK < label.width():
        return f"cut: {describe(label)} shows {seen.width()} of its {label.width()} px"
    room = label.contentsRect().adjusted(label.margin(), label.margin(), -label.margin(), -label.margin())
    needs_w, needs_h = label_needs(label, room.width())
    if needs_w > room.width() + SLACK or needs_h > room.height() + SLACK:
        return f"cut: {describe(label)} needs {needs_w}x{needs_h} px, has {room.width()}x{room.height()}"
    return None


def status_problem(label: FittingLabel) -> str | None:
    """A status bar label: its short form fits, keeps whole words, and the tooltip has the whole text."""
    shown, full = label.shown_text(), label.text()
    if label.fontMetrics().horizontalAdvance(shown) > label.contentsRect().width() + SLACK:
        return f"status bar: {describe(label)} does not fit in {label.contentsRect().width()} px"
    if shown == full:
        return None
    kept = shown.removesuffix(ELLIPSIS).rstrip()
    if kept and not (full.startswith(kept) and full[len(kept):len(kept) + 1] in (" ", ",", ";", ":")):
        return f"status bar: {describe(label)} is cut mid-word (full: {full!r})"
    if full not in label.toolTip():
        return f"status bar: {describe(label)} is shortened but its tooltip lacks the full text"
    return None


def layout_problems(window: MainWindow) -> list[str]:
    """Everything visible that is cut: labels, buttons, tabs, widgets squeezed below their minimum, sideways scroll."""
    problems: list[str] = []
    for widget in window.findChildren(QWidget):
        if not widget.isVisible():
            continue
        if isinstance(widget, FittingLabel):
            problem = status_problem(widget)
        elif isinstance(widget, QLabel):
            problem = label_problem(widget)
        elif isinstance(widget, QAbstractButton) and widget.text():
            short = widget.minimumSizeHint().width() - widget.width()
            problem = f"cut: {describe(widget)} is {short} px too narrow" if short > SLACK else None
        else:
            problem = None
        if problem:
            problems.append(problem)
    for bar in window.findChildren(QTabBar):
        if bar.isVisible():
            problems += [f"cut: tab {bar.tabText(i)!r}" for i in range(bar.count())
                         if bar.tabRect(i).width() + SLACK < bar.tabSizeHint(i).width()]
    for area in window.side_panel.findChildren(QAbstractScrollArea) + [window.conversations.list]:
        if area.isVisible() and area.horizontalScrollBar().isVisible():
            problems.append(f"scrolls sideways: {describe(area)}")
        page = area.widget() if isinstance(area, QScrollArea) else None
        if area.isVisible() and page is not None and page.width() > area.viewport().width() + SLACK:
            problems.append(f"cut: {describe(page)} is {page.width()} px wide in a {area.viewport().width()} px view")
    for bar in window.memory_page.memory.bars.values():
        if bar.isVisible():
            problems += [f"cut in the memory bar: {text!r}" for text in bar.overflows()]
    if window.chat_column.width() < CHAT_MIN_WIDTH:
        problems.append(f"the chat column is {window.chat_column.width()} px, under {CHAT_MIN_WIDTH}")
    return problems


def figures(window: MainWindow) -> dict:
    return {
        "window": [window.width(), window.height()],
        "chat_list": window.conversations.width(),
        "chat_column": window.chat_column.width(),
        "transcript": window.chat.width(),
        "readable_width": window.readable.readable_width(),
        "side_panel": window.side_panel.width(),
        "side_panel_tab": window.side_panel.current_key(),
        "status": {name: getattr(window, name).shown_text() for name in ("model_label", "plan_label", "stats_label",
                                                                         "memory_label")},
    }


def settle(window: MainWindow, width: int, height: int) -> None:
    """Resize, then wait until the window has that size and its layout stopped moving."""
    window.resize(width, height)
    wait_until(lambda: (window.width(), window.height()) == (width, height), what=f"the window at {width}x{height}")
    last: list[object] = [None]

    def still() -> bool:
        now = json.dumps(figures(window))
        same, last[0] = now == last[0], now
        return same

    wait_until(still, what="the layout settled")
    wait_until(still, what="the layout settled")


def shoot(scripted: ScriptedWindow, out: Path, theme: str, sizes: tuple[tuple[int, int], ...]) -> list[dict]:
    window = scripted.window
    shots = []
    suffix = "" if theme == "light" else f"-{theme}"  # the light shots keep the README's names
    for width, height in sizes:
        for tab in (SETTINGS.key, MEMORY.key):
            window.side_panel.show_tab(tab)
            if tab == MEMORY.key:
                wait_until(lambda: window.memory_page.hardware.profile is not None, what="the hardware panel filled")
            settle(window, width, height)
            name = f"window-{width}x{height}{'-memory' if tab == MEMORY.key else ''}{suffix}.png"
            if not window.grab().save(str(out / name)):
                raise OSError(f"could not write {out / name}")
            shots.append({"size": [width, height], "tab": tab, "theme": theme, "file": name,
                          "figures": figures(window), "problems": layout_problems(window)})
    return shots


def remembered(scripted: ScriptedWindow, folder: Path) -> dict:
    """Close the window at a size and place of its own, with the plan tab open; what the next window opens with."""
    window = scripted.window
    window.side_panel.show_tab(PLAN.key)
    window.setGeometry(100, 80, 1500, 900)
    wait_until(lambda: window.geometry().getRect() == (100, 80, 1500, 900), what="the window moved")
    sizes = window.splitter.sizes()
    scripted.close()
    again = ScriptedWindow(folder)
    again.window.show()
    wait_until(lambda: again.window.windowHandle().isExposed(), what="the second window shown")
    state = {"geometry": again.window.geometry().getRect(), "splitter": again.window.splitter.sizes(),
             "closed_with": sizes, "tab": again.window.side_panel.current_key()}
    again.close()
    return state


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--sizes", default=",".join(f"{w}x{h}" for w, h in SIZES))
    parser.add_argument("--theme", default="light", choices=THEMES)
    args = parser.parse_args(argv)
    sizes = tuple(tuple(int(n) for n in size.split("x")) for size in args.sizes.split(","))
    app = QApplication.instance() or QApplication(["tailor-layout-check"])
    install_theme(app, args.theme)  # as Preferences → Theme would
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        scripted = ScriptedWindow(Path(folder))
        window = scripted.window
        window.show()
        wait_until(lambda: window.windowHandle() is not None and window.windowHandle().isExposed(),
                   what="the window shown on the X server")
        # A first start (no saved settings): the size and place the window chose for this screen.
        first, available = window.geometry(), window.screen().availableGeometry()
        scripted.start()
        scripted.fill()
        report = {"platform": QGuiApplication.platformName(), "font": app.font().family(),
                  "first_geometry": first.getRect(), "available": available.getRect(),
                  "shots": shoot(scripted, args.out, args.theme, sizes)}
        report["remembered"] = remembered(scripted, Path(folder) / "again")
    args.report.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
