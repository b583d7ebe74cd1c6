"""MemoryPanel: where the engine's memory goes, live, and how fast the last replies were.

Fed by the engine bridge: `show_report` for every MemoryReport (a few a second while a
reply streams), `set_plan` with the plan of the loaded settings (its forecast is drawn as a
marker on each bar), `add_stats` with each finished reply. Bars are made when the set of
devices changes; every other report only changes numbers and repaints.
"""

from __future__ import annotations

from PySide6.QtCore import Slot
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.chat.stats_line import cache_text, sequences_text
from app.gui.side_panel.memory.bar import GB, MemoryBar
from app.gui.side_panel.memory.perf_history import PerfHistory
from app.gui.side_panel.memory.sparkline import Sparkline
from app.server.model_router import LoadedModel
from engine.protocol import Done, GenerationStats, MemoryReport
from models.plan.decision_tree import Plan

NO_MODEL = "No model loaded."


def device_order(name: str) -> tuple[int, str]:
    """GPUs first (what people watch), host RAM last."""
    return (1 if name == "cpu" else 0, name)


def kv_text(report: MemoryReport) -> str:
    text = f"KV cache: {report.kv_tokens_used:,} / {report.kv_tokens_total:,} tokens in use"
    if report.kv_cached_tokens:
        text += f", {report.kv_cached_tokens:,} more kept for reuse"
    return text + sequences_text(report)


def room_text(report: MemoryReport) -> str:
    """Room left in the context; and how many more tokens the free memory would hold."""
    left = max(0, report.kv_tokens_total - report.kv_tokens_used)
    text = f"Room for {left:,} more tokens of context"
    kv = [d for d in report.devices if d.kv_allocated_bytes and d.kv_total_tokens]
    if kv and report.kv_tokens_total:
        # A longer context needs cells on every device that holds KV layers: the tightest one decides.
        more = min(d.free_bytes * d.kv_total_tokens // d.kv_allocated_bytes for d in kv)
        text += f"; the free memory would hold about {more:,} more at this KV type"
    return text + "."


def server_models_text(models: list[LoadedModel]) -> str:
    """The models the server holds besides the window's: each with its memory (its forecast) and how long idle."""
    if not models:
        return ""
    parts = []
    for m in models:
        memory = " + ".join(f"{size / GB:.2f} GB {'RAM' if device == 'cpu' else device}"
                            for device, size in sorted(m.memory_bytes.items(), key=lambda item: device_order(item[0])))
        state = "busy" if m.busy else f"idle {_duration(m.idle_s)}"
        parts.append(f"{m.model.id} · {memory or 'memory unknown'} · {state}")
    return "Also loaded by the server: " + "; ".join(parts) + "."


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def stats_text(s: GenerationStats) -> str:
    return (
        f"Last reply: TTFT {s.ttft_s:.2f} s · prefill {s.prefill_tok_s:,.0f} tok/s · "
        f"decode {s.decode_tok_s:.1f} tok/s · {cache_text(s.cached_tokens, s.prompt_tokens)}"
    )


class MemoryPanel(QWidget):
    """Bars per device, KV cache use, and the performance of recent replies.

    Args:
        parent: the Qt parent.
    """

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.report: MemoryReport | None = None
        self.plan: Plan | None = None
        self.bars: dict[str, MemoryBar] = {}
        self.history = PerfHistory()
        self.status_label = QLabel(NO_MODEL)
        self.kv_label = QLabel("")
        self.room_label = QLabel("")
        self.prefix_label = QLabel("")
        self.last_label = QLabel("")
        self.rolling_label = QLabel("")
        self.server_label = QLabel("")  # the models the server loaded besides the window's
        self.server_label.hide()
        self.sparkline = Sparkline()
        self.sparkline.setToolTip("Decode tokens per second of the last replies")
        self._bars_box = QVBoxLayout()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        spark_title = QLabel("Decode tok/s, recent replies:")
        # Every line wraps: the side panel can be narrow, and it never scrolls sideways.
        for label in (self.status_label, self.kv_label, self.room_label, self.prefix_label, self.last_label,
                      self.rolling_label, spark_title, self.server_label):
            label.setWordWrap(True)
        layout.addWidget(self.status_label)
        layout.addLayout(self._bars_box)
        layout.addWidget(self.server_label)
        for label in (self.kv_label, self.room_label, self.prefix_label, self.last_label, self.rolling_label):
            layout.addWidget(label)
        layout.addWidget(spark_title)
        layout.addWidget(self.sparkline)

    # ------------------------------------------------------------ memory

    @Slot(object)
    def show_report(self, report: MemoryReport) -> None:
        self.report = report
        if not report.devices:
            self.clear()
            return
        names = sorted((d.device for d in report.devices), key=device_order)
        if list(self.bars) != names:
            self._make_bars(names)
        for device in report.devices:
            self.bars[device.device].set_device(device, self.forecast_bytes(device.device))
        if report.kv_tokens_total:
            self.status_label.setText(self._status_text())
            self.kv_label.setText(kv_text(report))
            self.room_label.setText(room_text(report))
        ram = report.device("cpu")
        prefix_ram = ram.prefix_cache_bytes if ram is not None else 0
        self.prefix_label.setText(
            f"Prefix cache: {prefix_ram / GB:.2f} GB in RAM, {report.prefix_cache_disk_bytes / GB:.2f} GB on disk"
        )

    @Slot(list)
    def show_server_models(self, models: list[LoadedModel]) -> None:
        """What the server holds besides the window's model (its engines are its own: they send no reports here)."""
        self.server_label.setText(server_models_text(models))
        self.server_label.setVisible(bool(models))

    @Slot(object)
    def set_plan(self, plan: Plan | None) -> None:
        """The plan of the settings being loaded; its forecast becomes each bar's marker."""
        self.plan = plan
        if self.report is not None:
            self.show_report(self.report)

    def forecast_bytes(self, device: str) -> int | None:
        forecast = self.plan.forecast if self.plan is not None else None
        if forecast is None or device not in forecast.devices:
            return None
        return forecast.devices[device].total_bytes

    @Slot()
    def clear(self) -> None:
        """No model: no bars, no KV figures (the reply figures stay; they are history)."""
        self._make_bars([])
        self.status_label.setText(NO_MODEL)
        for label in (self.kv_label, self.room_label, self.prefix_label):
            label.setText("")

    def _make_bars(self, names: list[str]) -> None:
        for bar in self.bars.values():
            self._bars_box.removeWidget(bar)
            bar.deleteLater()
        self.bars = {}
        for name in names:
            bar = MemoryBar(self)
            self._bars_box.addWidget(bar)
            self.bars[name] = bar

    def _status_text(self) -> str:
        if self.report is not None and all(d.device == "cpu" for d in self.report.devices):
            text = "No GPU in use: the model runs in RAM."
        else:
            text = "Memory per device:"
        if self.plan is not None and self.plan.gpu_unused_reason:
            text = f"{self.plan.gpu_unused_reason} {text}"
        if self.forecast_bytes("cpu") is not None or any(self.forecast_bytes(n) for n in self.bars):
            text += " The dashed line marks the forecast for these settings."
        return text

    # ------------------------------------------------------------ performance

    @Slot(object)
    def add_stats(self, done: Done | GenerationStats) -> None:
        stats = done.stats if isinstance(done, Done) else done
        self.history.add(stats)
        self.last_label.setText(stats_text(stats))
        rolling = self.history.rolling()
        if rolling is not None:
            self.rolling_label.setText(
                f"Last {rolling.n} replies: TTFT {rolling.ttft_s:.2f} s · prefill {rolling.prefill_tok_s:,.0f} tok/s"
                f" · decode {rolling.decode_tok_s:.1f} tok/s · {cache_text(rolling.cached_tokens, rolling.prompt_tokens)}"
            )
        self.sparkline.set_values(self.history.decode_rates)
