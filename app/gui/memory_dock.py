"""MemoryDock: the memory and performance panel and the hardware panel, docked in the main window."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QGroupBox, QScrollArea, QVBoxLayout, QWidget

from app.gui.chat_controller import ChatController
from app.gui.hardware_panel import HardwarePanel
from app.gui.memory_panel import MemoryPanel
from models.hardware import HardwareProfile, detect_hardware
from models.plan import Plan

TITLE = "Memory and performance"


class MemoryDock(QDockWidget):
    """A dock (hidden until the user asks for it) fed by the chat's engine events.

    Args:
        chat: the window's chat: memory reports, plans, finished replies.
        plan: the plan of the load under way, if one is.
        detect: returns the hardware profile (tests inject one).
        parent: the Qt parent.
    """

    def __init__(self, chat: ChatController, plan: Plan | None = None,
                 detect: Callable[[], HardwareProfile] = detect_hardware, parent: QWidget | None = None):
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
        self.memory.set_plan(plan)
        chat.memory.connect(self.memory.show_report)
        chat.memory.connect(self.hardware.set_engine_memory)
        chat.planned.connect(self.memory.set_plan)
        chat.reply_done.connect(self.memory.add_stats)
        chat.unloaded.connect(self.memory.clear)
        chat.engine_error.connect(lambda e: self.memory.clear() if e.kind == "engine_died" else None)

    def shutdown(self) -> None:
        self.hardware.shutdown()
