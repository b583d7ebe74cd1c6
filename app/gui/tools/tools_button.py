"""ToolsButton: which MCP servers' tools the model may call in this chat, beside the message box.

    [Tools · 2 ▾]   files (ready · 3 tools)   ✓
                    web (failed)              ✓
                    git (stopped)
                    ─────────────
                    Require a tool call       ✓
                    Manage servers…

Its menu lists every configured server with where it stands; a check offers that server's tools in the open
chat. It says how many are on ("Tools · 2"). "Require a tool call" makes each reply of the chat call a tool
before it answers (the model's first request must call one; it answers freely after the calls), for models
that would otherwise answer from what they know; it is off while the chat has no servers on. The chat's own
choice is shown when a chat opens (`show_choice`); what the user checks goes out as `servers_chosen` and
`tool_choice_chosen`.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Signal, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QStyle, QToolButton, QWidget

from app.gui.tools.server_entry import status_text
from app.mcp.types import ServerStatus


class ToolsButton(QToolButton):
    """The button and its menu.

    Args:
        parent: the Qt parent.

    Signals:
        servers_chosen(tuple): the servers (names, in the configuration's order) whose tools the chat may call.
        tool_choice_chosen(str): "required" (Require a tool call was checked) or "auto" (unchecked).
        manage_requested(): Manage servers… was chosen (open the servers dialog).
    """

    servers_chosen = Signal(tuple)
    tool_choice_chosen = Signal(str)
    manage_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.setAccessibleName("Tools")
        self.setToolTip("Which MCP servers' tools the model may call in this chat")
        self.setMenu(QMenu(self))
        self._names: list[str] = []  # the servers, in the configuration's order
        self._states: dict[str, ServerStatus] = {}
        self._choice: tuple[str, ...] = ()
        self._tool_choice = "auto"
        self.require_action: QAction | None = None  # Require a tool call (made again with the menu)
        self._rebuild()

    def choice(self) -> tuple[str, ...]:
        return self._choice

    def tool_choice(self) -> str:
        return self._tool_choice

    @Slot(object)
    def set_statuses(self, statuses: list[ServerStatus]) -> None:
        """The configured servers and where each stands (ServerControl.statuses())."""
        self._names = [status.name for status in statuses]
        self._states = {status.name: status for status in statuses}
        self._rebuild()

    @Slot(object)
    def update_status(self, status: ServerStatus) -> None:
        """One server's new status (from the status relay)."""
        if status.name not in self._states:
            self._names.append(status.name)
        self._states[status.name] = status
        self._rebuild()

    def show_choice(self, names: tuple[str, ...], tool_choice: str = "auto") -> None:
        """The open chat's servers and tool choice (a chat opened); nothing is emitted."""
        self._choice, self._tool_choice = tuple(names), tool_choice
        self._rebuild()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        # Styles draw an instant popup's arrow over the text's end ("Tools · 1" lost its digit): room for it.
        hint = super().sizeHint()
        return QSize(hint.width() + self.style().pixelMetric(QStyle.PixelMetric.PM_MenuButtonIndicator, None, self),
                     hint.height())

    def _rebuild(self) -> None:
        menu = self.menu()
        menu.clear()
        for name in self._names:
            action = menu.addAction(f"{name} ({status_text(self._states.get(name))})")
            action.setCheckable(True)
            action.setChecked(name in self._choice)
            action.toggled.connect(lambda on, n=name: self._toggled(n, on))
        if not self._names:
            menu.addAction("No MCP servers yet").setEnabled(False)
        menu.addSeparator()
        self.require_action = menu.addAction("Require a tool call")
        self.require_action.setCheckable(True)
        self.require_action.setChecked(self._tool_choice == "required")
        self.require_action.setToolTip("Each reply calls a tool before it answers")
        self.require_action.toggled.connect(self._require_toggled)
        menu.addAction("Manage servers…", self.manage_requested.emit)
        self._show_count()

    def _show_count(self) -> None:
        on = [name for name in self._choice if name in self._states]
        self.setText(f"Tools · {len(on)}" if on else "Tools")
        if self.require_action is not None:  # without tools on, nothing can be called
            self.require_action.setEnabled(bool(self._choice))

    def _toggled(self, name: str, on: bool) -> None:
        chosen = set(self._choice) - {name} | ({name} if on else set())
        # Known servers in the configuration's order; a chosen one not configured (any more) is kept last.
        self._choice = tuple(n for n in self._names if n in chosen) + tuple(
            n for n in self._choice if n in chosen and n not in self._names)
        self._show_count()  # the menu is not rebuilt under the action that is being toggled
        self.servers_chosen.emit(self._choice)

    def _require_toggled(self, on: bool) -> None:
        self._tool_choice = "required" if on else "auto"
        self.tool_choice_chosen.emit(self._tool_choice)
