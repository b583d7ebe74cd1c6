"""MemoryDock: the memory and performance panel and the hardware panel, docked in the main window."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QGroupBox, QScrollArea, QVBoxLayout, QWidget

from app.gui.engine_bridge import EngineBridge
from app.gui.hardware_panel import HardwarePanel
from app.gui.memory_panel import MemoryPanel
from models.hardware import HardwareProfile, detect_hardware

TITLE = "Memory and performance"


class MemoryDock(QDockWidget):
    """A dock (hidden until the user asks for it) fed by the engine bridge.

    Args:
        bridge: the engine, seen from Qt: memory reports, the plan, finished replies.
        detect: returns the hardware profile (tests inject one).
        parent: the Qt parent.
    """

    def __init__(self, bridge: EngineBridge, detect: Callable[[], HardwareProfile] = detect_hardware,
                 parent: QWidget | None = None):
        super().__init__(TITLE, parent)
        self.setObjectName("memoryDock")
        self.memory = MemoryPanel()
        self.hardware = HardwarePanel(detect)
        body = QWidget()
        column = QVBoxLayout(body)
        for title, panel in (("Memory", self.memory), ("Hardware", self.hardware)):
            box = QGroupBox(title)
            QVBoxLayout(box).addWidget(panel)
            column.addWidget(box)
        column.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(body)
        self.setWidget(scroll)
        self.setAllowedAreas(Qt.DockWidgetArea.LeftDockWidgetArea | Qt.DockWidgetArea.RightDockWidgetArea)
        self.memory.set_plan(bridge.plan)
        bridge.memory.connect(self.memory.show_report)
        bridge.memory.connect(self.hardware.set_engine_memory)
        bridge.planned.connect(self.memory.set_plan)
        bridge.done.connect(self.memory.add_stats)
        bridge.unloaded.connect(self.memory.clear)
        bridge.error.connect(lambda e: self.memory.clear() if e.kind == "engine_died" else None)

    def shutdown(self) -> None:
        self.hardware.shutdown()
