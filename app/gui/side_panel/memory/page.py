"""MemoryPage: the memory and performance panel and the hardware panel, the side panel's Memory tab.

(The module keeps its old name: until the side panel it was a dock of its own.)
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QGroupBox, QVBoxLayout, QWidget

from app.gui.chat_controller import ChatController
from app.gui.side_panel.memory.hardware_panel import HardwarePanel
from app.gui.side_panel.memory.panel import MemoryPanel
from app.gui.side_panel.panel import FitWidthScroll
from models.hardware.profile import HardwareProfile, detect_hardware
from models.plan.decision_tree import Plan

TITLE = "Memory and performance"


class MemoryPage(FitWidthScroll):
    """Memory per device, reply speed and the hardware, fed by the chat's engine events; scrolls only down.

    Args:
        chat: the window's chat: memory reports, plans, finished replies.
        plan: the plan of the load under way, if one is.
        detect: returns the hardware profile (tests inject one).
        parent: the Qt parent.
    """

    def __init__(self, chat: ChatController, plan: Plan | None = None,
                 detect: Callable[[], HardwareProfile] = detect_hardware, parent: QWidget | None = None):
        self.memory = MemoryPanel()
        self.hardware = HardwarePanel(detect)
        body = QWidget()
        column = QVBoxLayout(body)
        for title, panel in (("Memory", self.memory), ("Hardware", self.hardware)):
            box = QGroupBox(title)
            QVBoxLayout(box).addWidget(panel)
            column.addWidget(box)
        column.addStretch(1)
        super().__init__(body, parent)
        self.setObjectName("memoryPage")
        self.setAccessibleName(TITLE)
        self.memory.set_plan(plan)
        chat.memory.connect(self.memory.show_report)
        chat.memory.connect(self.hardware.set_engine_memory)
        chat.planned.connect(self.memory.set_plan)
        chat.reply_done.connect(self.memory.add_stats)
        chat.unloaded.connect(self.memory.clear)
        chat.engine_error.connect(lambda e: self.memory.clear() if e.kind == "engine_died" else None)

    def show_remote(self, status: str) -> None:
        """The chat runs on a remote server: no figures of this machine's engine; `status` says whose they are."""
        self.memory.clear()
        self.memory.status_label.setText(status)

    def shutdown(self) -> None:
        self.hardware.shutdown()
