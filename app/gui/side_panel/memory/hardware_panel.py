"""HardwarePanel: GPUs (name, driver, VRAM), RAM and CPU, refreshed every 2 s off the GUI thread.

Detection runs on a worker thread (NVML and psutil calls can take a while on a busy
machine); only the finished profile reaches the GUI thread. VRAM "used by other programs"
leaves out what Tailor's own engine holds, taken from its latest memory report.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer, Slot
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.gui.common.jobs import Jobs
from engine.protocol import MemoryReport
from models.hardware.profile import GpuInfo, HardwareProfile, detect_hardware

REFRESH_MS = 2000
GB = 1e9
NO_GPU = "No NVIDIA GPU found."


def gpu_lines(gpu: GpuInfo, engine_bytes: int) -> list[str]:
    """The lines of one GPU; `engine_bytes` is what Tailor's engine holds on it."""
    versions = [f"driver {gpu.driver_version}" if gpu.driver_version else "",
                f"CUDA {gpu.cuda_version}" if gpu.cuda_version else ""]
    head = f"GPU {gpu.index}: {gpu.name}" + "".join(f" · {v}" for v in versions if v)
    # NVML's figure for other processes counts the engine (a child of this window) too.
    held = gpu.used_by_others_bytes if gpu.used_by_others_bytes is not None else gpu.used_bytes
    others = max(0, held - engine_bytes)
    vram = (f"VRAM: {gpu.total_bytes / GB:.2f} GB total · {others / GB:.2f} GB used by other programs · "
            f"{gpu.free_bytes / GB:.2f} GB free")
    return [head, vram]


def profile_lines(profile: HardwareProfile, engine_bytes: dict[str, int] | None = None) -> list[str]:
    engine_bytes = engine_bytes or {}
    lines: list[str] = []
    for gpu in profile.gpus:
        lines += gpu_lines(gpu, engine_bytes.get(f"cuda:{gpu.index}", 0))
    if not profile.gpus:
        lines.append(NO_GPU)
        reason = profile.source.removeprefix("none: ")
        if reason and reason != profile.source:
            lines.append(f"({reason}: models run on the CPU)")
    lines.append(f"RAM: {profile.ram_total_bytes / GB:.2f} GB total · {profile.ram_available_bytes / GB:.2f} GB available")
    lines.append(f"CPU: {profile.cpu_name} · {profile.cpu_physical_cores} cores, {profile.cpu_logical_cores} threads")
    return lines


class HardwarePanel(QWidget):
    """The machine, refreshed every `interval_ms` while the panel is shown.

    Args:
        detect: returns the hardware profile; runs on a worker thread (tests inject one).
        interval_ms: time between refreshes.
        parent: the Qt parent.
    """

    def __init__(self, detect: Callable[[], HardwareProfile] = detect_hardware, interval_ms: int = REFRESH_MS,
                 parent: QWidget | None = None):
        super().__init__(parent)
        self.detect = detect  # public: a window under test shows a machine of its choosing
        self.profile: HardwareProfile | None = None
        self.refreshes = 0
        self._engine_bytes: dict[str, int] = {}
        self.jobs = Jobs(self, max_threads=1)
        # Wrapped: the side panel is narrow and never scrolls sideways (its scroll area sizes the page
        # by its height at the panel's width, so nothing is cut).
        self.label = QLabel("Looking at the hardware…", wordWrap=True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label)
        self.timer = QTimer(self, interval=interval_ms)
        self.timer.timeout.connect(self.refresh)

    def text(self) -> str:
        return self.label.text()

    @Slot()
    def refresh(self) -> None:
        """Detect again in the background, unless a detection is still running."""
        if not self.jobs.busy:
            self.jobs.run(self.detect, self._on_profile, self._on_failure)

    @Slot(object)
    def set_engine_memory(self, report: MemoryReport) -> None:
        """What the engine holds per GPU, so it is not counted as other programs'."""
        self._engine_bytes = {d.device: d.process_bytes for d in report.devices if d.device != "cpu"}

    def _on_profile(self, profile: HardwareProfile) -> None:
        self.profile = profile
        self.refreshes += 1
        self.label.setText("\n".join(profile_lines(profile, self._engine_bytes)))

    def _on_failure(self, exc: BaseException) -> None:  # detect_hardware never raises; an injected one may
        self.label.setText(f"Cannot read the hardware: {exc}")

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        self.refresh()
        self.timer.start()

    def hideEvent(self, event: QHideEvent) -> None:  # noqa: N802 (Qt override)
        self.timer.stop()
        super().hideEvent(event)

    def shutdown(self) -> None:
        self.timer.stop()
        self.jobs.wait()
