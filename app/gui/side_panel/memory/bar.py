"""MemoryBar: one device's memory as a stacked horizontal bar, with a legend in GB and %.

Everything is painted in paintEvent from the last report: a new report replaces a few
numbers and asks for a repaint, so reports while a reply streams cost next to nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette, QPen, QResizeEvent
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.gui.common.theme import chart_colors
from engine.protocol import DeviceMemory

GB = 1e9


@dataclass(slots=True, frozen=True)
class Part:
    key: str
    label: str
    chart: int | None  # its colour: an index into theme.chart_colors; None: the palette's Base (empty)


# Left to right: this engine's parts, then other programs, then free memory.
PARTS = (
    Part("weights", "weights", 0),
    Part("kv_used", "KV in use", 2),
    Part("kv_free", "KV free", 7),
    Part("compute", "compute", 4),
    Part("prefix_cache", "prefix cache", 6),
    Part("draft", "draft model", 5),
    Part("projector", "vision projector", 1),
    Part("other", "engine, other", 8),
    Part("others", "other programs", 9),
    Part("free", "free", None),  # the palette's base colour: empty, in a light theme or a dark one
)
LONGEST_ENTRY = "other programs  000.00 GB (100%)"
SWATCH = 14  # a legend entry's colour square and the gap after it


@dataclass(slots=True, frozen=True)
class Segment:
    part: Part
    nbytes: int


def segments_of(device: DeviceMemory) -> tuple[list[Segment], int]:
    """The bar's segments and the total they add up to (the device's total memory).

    What is neither this engine's nor free is other programs'. On the host the two can
    overlap (mapped weights are in the page cache, which the OS counts as available): free
    is then cut to what is left, so the segments always add up to the total.
    """
    kv_used = min(device.kv_used_bytes, device.kv_allocated_bytes)
    ours = {
        "weights": device.weights_bytes,
        "kv_used": kv_used,
        "kv_free": device.kv_allocated_bytes - kv_used,
        "compute": device.compute_bytes,
        "prefix_cache": device.prefix_cache_bytes,
        "draft": device.draft_bytes,
        "projector": device.projector_bytes,
        "other": device.other_bytes,
    }
    used = sum(ours.values())
    total = max(device.total_bytes, used)
    free = min(max(0, device.free_bytes), total - used)
    sizes = {**ours, "others": total - used - free, "free": free}
    return [Segment(p, sizes[p.key]) for p in PARTS], total


def size_label(nbytes: int, total: int) -> str:
    """'14.20 GB (58%)': the size in GB and its share of the device."""
    share = 100 * nbytes / total if total else 0.0
    pct = f"{share:.0f}%" if share >= 10 or share == 0 else f"{share:.1f}%"
    return f"{nbytes / GB:.2f} GB ({pct})"


class MemoryBar(QWidget):
    """One device: the stacked bar, a marker at the forecast, and the legend below it."""

    BAR_HEIGHT = 18
    ROW_HEIGHT = 17

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.device: DeviceMemory | None = None
        self.segments: list[Segment] = []
        self.total = 0
        self.forecast_bytes: int | None = None
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        # As narrow as one legend entry: the bar scales to any width from there.
        self.setMinimumWidth(self.fontMetrics().horizontalAdvance(LONGEST_ENTRY) + SWATCH + 6)
        self.setFixedHeight(self.height_for(320))

    def set_device(self, device: DeviceMemory, forecast_bytes: int | None = None) -> None:
        self.device = device
        self.segments, self.total = segments_of(device)
        self.forecast_bytes = forecast_bytes
        self.setToolTip(self._tooltip())
        self.update()

    def title(self) -> str:
        d = self.device
        if d is None:
            return ""
        return f"{d.name or d.device} ({d.device}): {d.total_bytes / GB:.2f} GB"

    def labels(self) -> dict[str, str]:
        """The legend as painted: part label -> 'x.xx GB (n%)'."""
        return {s.part.label: size_label(s.nbytes, self.total) for s in self.segments}

    def forecast_x(self, width: float) -> float | None:
        """Where the forecast marker sits, in pixels from the bar's left edge."""
        if self.forecast_bytes is None or not self.total:
            return None
        return width * min(1.0, self.forecast_bytes / self.total)

    def columns(self, width: int) -> int:
        """Legend columns: two where the longest entry fits in half the width, else one."""
        return 2 if width / 2 >= self.fontMetrics().horizontalAdvance(LONGEST_ENTRY) + SWATCH + 4 else 1

    def title_rect(self, width: int) -> QRect:
        """Where the title goes: one row, or as many as it needs word-wrapped at this width."""
        flags = int(Qt.AlignmentFlag.AlignLeft | Qt.TextFlag.TextWordWrap)
        needed = self.fontMetrics().boundingRect(QRect(0, 0, max(1, width), 10_000), flags, self.title())
        rows = max(1, -(-needed.height() // self.fontMetrics().lineSpacing()))
        return QRect(1, 0, width, max(self.ROW_HEIGHT, rows * self.fontMetrics().lineSpacing()))

    def height_for(self, width: int) -> int:
        rows = -(-len(PARTS) // self.columns(width))
        return self.title_rect(width - 2).height() + self.BAR_HEIGHT + 8 + rows * self.ROW_HEIGHT + 4

    def overflows(self) -> list[str]:
        """The painted texts that do not fit where they are painted (none, unless the bar is too narrow)."""
        width = self.width() - 2
        metrics = self.fontMetrics()
        cut = [self.title()] if self.title_rect(width).bottom() > self.height() else []
        column = width / self.columns(width) - SWATCH - 2
        for seg in self.segments:
            entry = f"{seg.part.label}  {size_label(seg.nbytes, self.total)}"
            if metrics.horizontalAdvance(entry) > column:
                cut.append(entry)
        return cut

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(320, self.height())

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        # A fixed height that follows the width: layouts (and scroll areas) honour it exactly,
        # where height-for-width is only estimated.
        super().resizeEvent(event)
        height = self.height_for(event.size().width())
        if height != self.height():
            self.setFixedHeight(height)

    def _color(self, part: Part) -> QColor:
        palette = self.palette()
        return chart_colors(palette)[part.chart] if part.chart is not None else palette.color(QPalette.ColorRole.Base)

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        if self.device is None:
            return
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        width = self.width() - 2
        title = self.title_rect(width)
        p.drawText(title, int(Qt.AlignmentFlag.AlignVCenter | Qt.TextFlag.TextWordWrap), self.title())
        top = title.height() + 2
        x = 1.0
        for seg in self.segments:
            w = width * seg.nbytes / self.total if self.total else 0.0
            if w > 0:
                p.fillRect(QRectF(x, top, w, self.BAR_HEIGHT), self._color(seg.part))
            x += w
        outline = self.palette().color(QPalette.ColorRole.Mid)
        p.setPen(QPen(outline))
        p.drawRect(QRectF(1, top, width, self.BAR_HEIGHT))
        marker = self.forecast_x(width)
        if marker is not None:
            p.setPen(QPen(self.palette().color(QPalette.ColorRole.WindowText), 2, Qt.PenStyle.DashLine))
            p.drawLine(int(1 + marker), int(top - 3), int(1 + marker), int(top + self.BAR_HEIGHT + 3))
        self._paint_legend(p, top + self.BAR_HEIGHT + 6, width, outline)
        p.end()

    def _paint_legend(self, p: QPainter, top: float, width: float, outline: QColor) -> None:
        n = self.columns(int(width))
        column = width / n
        for i, seg in enumerate(self.segments):
            x = 1 + (i % n) * column
            y = top + (i // n) * self.ROW_HEIGHT
            p.fillRect(QRectF(x, y + 4, 10, 10), self._color(seg.part))
            p.setPen(QPen(outline))
            p.drawRect(QRectF(x, y + 4, 10, 10))
            p.setPen(self.palette().windowText().color())
            text = f"{seg.part.label}  {size_label(seg.nbytes, self.total)}"
            p.drawText(QRectF(x + SWATCH, y, column - SWATCH - 2, self.ROW_HEIGHT), Qt.AlignmentFlag.AlignVCenter, text)

    def _tooltip(self) -> str:
        lines = [self.title()] + [f"{k}: {v}" for k, v in self.labels().items()]
        if self.forecast_bytes is not None:
            lines.append(f"forecast for these settings (dashed line): {self.forecast_bytes / GB:.2f} GB")
        return "\n".join(lines)
