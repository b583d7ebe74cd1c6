"""Sparkline: a small line of recent values (decode tok/s of the last replies), painted in the theme's
Highlight colour unless given one."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QPointF, QSize
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget


class Sparkline(QWidget):
    """The values scaled from 0 to their maximum; the last one marked with a dot."""

    def __init__(self, parent: QWidget | None = None, color: QColor | None = None):
        super().__init__(parent)
        self.values: list[float] = []
        self._color = color  # None: the palette's, read at each paint so a theme change shows
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_values(self, values: Iterable[float]) -> None:
        self.values = list(values)
        self.update()

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(200, 36)

    def line_color(self) -> QColor:
        return self._color if self._color is not None else self.palette().color(QPalette.ColorRole.Highlight)

    def points(self) -> list[QPointF]:
        """The polyline in widget coordinates (x left to right, y up from the bottom)."""
        n, top = len(self.values), max(self.values, default=0.0)
        if n == 0 or top <= 0:
            return []
        w, h = self.width() - 6, self.height() - 6
        step = w / (n - 1) if n > 1 else 0.0
        return [QPointF(3 + i * step, 3 + h - h * v / top) for i, v in enumerate(self.values)]

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        points = self.points()
        if not points:
            return
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        color = self.line_color()
        p.setPen(QPen(color, 1.5))
        p.drawPolyline(QPolygonF(points))
        p.setBrush(color)
        p.drawEllipse(points[-1], 2.5, 2.5)
        p.end()
