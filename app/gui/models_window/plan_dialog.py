"""The repo page's Why?: one file's plan with its numbers and reasons, in a dialog the user can read and copy.

The text is `tailor plan`'s (app/services/planning/plan_text.py) with the room left on each device under
it (app/services/planning/plan_room.py), so the window and the CLI say the same; it is selectable, and
Copy puts all of it on the clipboard (to paste into an issue or a chat).
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.services.planning.plan_room import DeviceRoom, format_rooms
from app.services.planning.plan_text import format_plan
from app.services.planning.pull_plan import GroupVerdict


def plan_text(g: GroupVerdict, rooms: tuple[DeviceRoom, ...]) -> str:
    """What the dialog shows for `g`: its plan as `tailor plan` prints it (with the reasons the page
    gives it: the whole tree's for the recommended file), then the room on each device."""
    if g.plan is None:
        return "\n".join(["No plan for this file:"] + [f"  - {r}" for r in g.reasons])
    text = format_plan(replace(g.plan, reasons=g.reasons))
    room = format_rooms(rooms)
    return f"{text}\n\n{room}" if room else text


class PlanDialog(QDialog):
    """Non-modal: the page keeps one and fills it again for each Why? pressed."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Why?")
        self.heading = QLabel(wordWrap=True)
        self.heading.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text = QPlainTextEdit(readOnly=True)
        # Fixed-width: the per-device lines of `tailor plan` line up in columns.
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                          | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        self.text.setAccessibleName("The plan and its reasons")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.copy_button = QPushButton("&Copy")
        self.copy_button.setToolTip("Copy the whole plan to the clipboard")
        self.buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.copy_button.clicked.connect(self.copy)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.heading)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.buttons)
        self.resize(self.fontMetrics().averageCharWidth() * 110, self.fontMetrics().height() * 30)

    def show_plan(self, title: str, heading: str, text: str) -> None:
        self.setWindowTitle(title)
        self.heading.setText(heading)
        self.text.setPlainText(text)
        self.show()
        self.raise_()
        self.activateWindow()

    def plain_text(self) -> str:
        return self.text.toPlainText()

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.plain_text())
