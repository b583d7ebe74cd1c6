"""ForecastBar: a file's memory forecast as small stacked bars, one per device, against its free memory.

Each lane is one device of the plan (GPUs, then the CPU, as `tailor plan` prints them): weights,
KV cache and compute from the left, over the device's free memory. A tick marks what the plan may
use of it (free less the reserve and the margin); what passes that tick is drawn hatched in the
"over" colour, which is why a file is "too large". The lane's width stands for the free memory, or
for the forecast when that is more, so a file over the limit shows by how much.

The geometry is computed apart from painting (`lanes_of`), so tests check the proportions and
not pixels; the colours come from the palette (`bar_colors`), so a theme changes them all.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.gui.common.theme import mix, status_colors
from app.services.planning.plan_room import DeviceRoom, gib, room_line

PARTS = (("weights", "weights"), ("kv", "KV cache"), ("compute", "compute"), ("other", "other"))


@dataclass(slots=True, frozen=True)
class BarSegment:
    """A stretch of a lane: `start` and `width` are fractions of the lane's width."""

    key: str
    label: str
    nbytes: int
    start: float
    width: float


@dataclass(slots=True, frozen=True)
class Lane:
    """One device's bar.

    Attributes:
        scale: The bytes the lane's full width stands for: the free memory, or the forecast if more.
        segments: Weights, KV cache, compute (and other, when the forecast has any), left to right.
        free: Where the free memory ends (1.0 unless the forecast is larger).
        limit: Where the plan's limit is (the tick).
        over: The part of the forecast past the limit, or None when it fits under it.
    """

    room: DeviceRoom
    scale: int
    segments: tuple[BarSegment, ...]
    free: float
    limit: float
    over: BarSegment | None


def lane_of(room: DeviceRoom) -> Lane:
    sizes = {"weights": room.weights_bytes, "kv": room.kv_cache_bytes, "compute": room.compute_bytes,
             "other": room.other_bytes}
    scale = max(room.free_bytes, room.total_bytes, 1)
    segments, x = [], 0.0
    for key, label in PARTS:
        if key == "other" and not sizes[key]:
            continue  # the forecast rarely has any: no empty entry in the tooltip
        width = sizes[key] / scale
        segments.append(BarSegment(key, label, sizes[key], x, width))
        x += width
    limit = min(room.limit_bytes, room.free_bytes) / scale
    over = None
    if room.left_bytes < 0:
        over = BarSegment("over", "over the limit", -room.left_bytes, limit, -room.left_bytes / scale)
    return Lane(room, scale, tuple(segments), room.free_bytes / scale, limit, over)


def lanes_of(rooms: tuple[DeviceRoom, ...]) -> tuple[Lane, ...]:
    return tuple(lane_of(r) for r in rooms)


def _far(a: QColor, b: QColor) -> bool:
    return abs(a.red() - b.red()) + abs(a.green() - b.green()) + abs(a.blue() - b.blue()) > 90


def bar_colors(palette: QPalette) -> dict[str, QColor]:
    """The bar's colours from `palette`: weights in Highlight, KV cache in Link (or Highlight moved
    towards the text colour where a theme makes the two alike: darker in a light theme, lighter in a
    dark one, so it stands out from both Highlight and Base), compute half way from the text to the base, the
    free room in Base, the frame in Mid; "over" is the theme's error red (`status_colors`), which stands
    out from Base in a light and a dark theme alike (Qt's palette has no role for a negative colour)."""
    highlight, base, text = palette.color(QPalette.ColorRole.Highlight), palette.color(QPalette.ColorRole.Base), \
        palette.color(QPalette.ColorRole.Text)
    link = palette.color(QPalette.ColorRole.Link)
    kv = link if _far(link, highlight) and _far(link, base) else mix(highlight, text, 0.45)
    return {"weights": highlight, "kv": kv, "compute": mix(text, base, 0.5), "other": mix(text, base, 0.7),
            "free": base, "frame": palette.color(QPalette.ColorRole.Mid), "over": status_colors(palette).error,
            "text": text, "label": palette.color(QPalette.ColorRole.WindowText)}


class ForecastBar(QWidget):
    """The lanes of one file's plan, a label ("GPU", "CPU") to the left of each; the numbers in the tooltip."""

    WIDTH = 160
    GAP = 1  # pixels between lanes

    def __init__(self, rooms: tuple[DeviceRoom, ...] = (), name: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.lanes: tuple[Lane, ...] = ()
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.setAccessibleName(f"Memory forecast of {name}" if name else "Memory forecast")
        self.set_rooms(rooms)

    def set_rooms(self, rooms: tuple[DeviceRoom, ...]) -> None:
        self.lanes = lanes_of(rooms)
        text = self.summary()
        self.setToolTip(text)
        # A screen reader reads the same numbers the tooltip shows, in one go.
        self.setAccessibleDescription(text.replace("\n", "; "))
        self.updateGeometry()
        self.update()

    def summary(self) -> str:
        """The numbers in GiB, one line per device."""
        if not self.lanes:
            return "No forecast for this file."
        fits = all(lane.over is None for lane in self.lanes)
        head = "Fits under the plan's limit on every device" if fits else "Over the plan's limit on " + ", ".join(
            f"{lane.room.label} by {gib(lane.over.nbytes)}" for lane in self.lanes if lane.over)
        return "\n".join([head + ":"] + [room_line(lane.room) for lane in self.lanes])

    def lane_height(self) -> int:
        return self.fontMetrics().height()  # follows the font, so it scales with the system's text size

    def label_width(self) -> int:
        labels = [lane.room.label for lane in self.lanes] or ["CPU"]
        return max(self.fontMetrics().horizontalAdvance(t) for t in labels) + 6

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        n = max(1, len(self.lanes))
        return QSize(self.WIDTH, n * self.lane_height() + (n - 1) * self.GAP + 2)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(self.label_width() + 60, self.sizeHint().height())

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        if not self.lanes:
            return
        colors = bar_colors(self.palette())
        p = QPainter(self)
        left = self.label_width()
        width = max(1.0, self.width() - left - 3.0)
        height = self.lane_height()
        top = (self.height() - (len(self.lanes) * (height + self.GAP) - self.GAP)) / 2
        for i, lane in enumerate(self.lanes):
            y = top + i * (height + self.GAP)
            p.setPen(colors["label"])
            p.drawText(QRectF(0, y, left - 4, height), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight,
                       lane.room.label)
            self._paint_lane(p, lane, colors, QRectF(left, y + 2, width, height - 4))
        p.end()

    @staticmethod
    def _paint_lane(p: QPainter, lane: Lane, colors: dict[str, QColor], r: QRectF) -> None:
        def span(start: float, width: float) -> QRectF:
            return QRectF(r.left() + start * r.width(), r.top(), width * r.width(), r.height())

        p.fillRect(span(0, lane.free), colors["free"])
        for seg in lane.segments:
            if seg.width > 0:
                p.fillRect(span(seg.start, seg.width), colors[seg.key])
        if lane.over is not None:
            # Hatched as well as coloured: the over part must not be told by its colour alone.
            over = span(lane.over.start, lane.over.width)
            p.fillRect(over, colors["over"])
            p.fillRect(over, QBrush(colors["text"], Qt.BrushStyle.BDiagPattern))
        p.setPen(QPen(colors["frame"]))
        p.drawRect(span(0, lane.free))
        x = r.left() + lane.limit * r.width()
        p.setPen(QPen(colors["label"], 1.5))
        p.drawLine(int(x), int(r.top() - 2), int(x), int(r.bottom() + 2))
