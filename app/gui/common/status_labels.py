"""Status bar labels that shorten themselves to fit: whole parts or whole words, never a cut word.

A QLabel in a status bar asks for its whole text's width as its minimum, so a long line either
pushes the bar wider than the window or is cut by the bar mid-word ("21 of 41 prompt tokens from
cac…"). A FittingLabel asks for almost nothing, and on every resize shows the longest short form of
its text that fits: the leading " · "-separated parts, else the leading words, with an ellipsis; the
full text is always its tooltip.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QSize
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

SEPARATOR = " · "
ELLIPSIS = "…"


def short_form(text: str, fits: Callable[[str], bool]) -> str:
    """The longest form of `text` that `fits`: the text itself, its leading parts, or its leading words.

    Parts (separated by " · ") are dropped from the end first: what a status line puts first is what
    matters most. A form is the kept part(s) with " …" after them; if not even the first part fits, its
    leading words with "…"; if not even one word fits, "…" alone (the tooltip still has it all).
    """
    if fits(text):
        return text
    parts = text.split(SEPARATOR)
    for n in range(len(parts) - 1, 0, -1):
        candidate = SEPARATOR.join(parts[:n]) + " " + ELLIPSIS
        if fits(candidate):
            return candidate
    words = parts[0].split(" ")
    for n in range(len(words) - 1, 0, -1):
        candidate = " ".join(words[:n]).rstrip(",;:") + ELLIPSIS
        if fits(candidate):
            return candidate
    return ELLIPSIS if text else ""


class FittingLabel(QLabel):
    """A one-line label showing the short form of its text that fits its width.

    `text()` and `setText()` are the full text (what callers and tests mean by the label's text);
    `shown_text()` is what is painted. `detail`, when set, is added to the tooltip below the full text
    (above it where DETAIL_FIRST).

    Args:
        text: the first text.
        parent: the Qt parent.
    """

    DETAIL_FIRST = False

    def __init__(self, text: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self._full = ""
        self._detail = ""
        # Preferred: the whole text when there is room; it may shrink down to the minimum below.
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.setContentsMargins(0, 0, 12, 0)  # a gap before the next label of the bar
        self.setText(text)

    def text(self) -> str:  # the full text, not the short form shown
        return self._full

    def shown_text(self) -> str:
        return super().text()

    def setText(self, text: str) -> None:  # noqa: N802 (Qt override)
        self._full = text or ""
        self._update_tooltip()
        self._fit()
        self.updateGeometry()  # the size hint follows the full text

    def set_detail(self, detail: str) -> None:
        """More than the text says (e.g. the plan's reasons), shown in the tooltip under it."""
        self._detail = detail
        self._update_tooltip()

    def is_shortened(self) -> bool:
        return self.shown_text() != self._full

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        margins = self.contentsMargins()
        width = self.fontMetrics().horizontalAdvance(self._full) + margins.left() + margins.right() + 2
        return QSize(width, super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        # Room for the ellipsis alone: the bar can always make room, and the short form fills what it gets.
        margins = self.contentsMargins()
        width = self.fontMetrics().horizontalAdvance(ELLIPSIS) + margins.left() + margins.right() + 2
        return QSize(width, super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        room = self.contentsRect().width()
        metrics = self.fontMetrics()
        shown = short_form(self._full, lambda s: metrics.horizontalAdvance(s) <= room)
        if shown != super().text():
            super().setText(shown)

    def _update_tooltip(self) -> None:
        parts = (self._detail, self._full) if self.DETAIL_FIRST else (self._full, self._detail)
        self.setToolTip("\n\n".join(t for t in parts if t))
